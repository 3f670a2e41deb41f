"""Issue 15, items 1 and 2: one scope rule for every read, through Hermes's real dispatch.
A session of project A opens nothing of project B (by id, link or prefix); ``scope: "all"``
is a person's choice (``phr``, ``/recall``), the model's only with ``allow_cross_project``."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from builders import History, alpha_and_beta, dispatch
from project_history_recall.faces.cli import main
from project_history_recall.settings import Settings

pytestmark = pytest.mark.usefixtures("registered_plugin")

SECRET = "the okapi launch code is tangerine"
B_ID = "20260105_100000_b0b0"


@pytest.fixture()
def two(tmp_path):
    """Project A (asker ``a-now``) and project B with a private session; ids share ``2026``."""
    h, a, b = alpha_and_beta(tmp_path)
    h.session("20260101_100000_a1a1", a, "okapi notes for alpha", "fine", title="Alpha okapi")
    h.session("20260102_100000_a2a2", a, "more okapi work in alpha", "ok")
    h.session(B_ID, b, SECRET, "noted", title="Beta secret plans")
    h.session("a-now", a)
    h.session("home-now", None)
    yield h
    h.close()


def allow_cross_project(h: History) -> None:
    (h.root / "config.yaml").write_text(yaml.safe_dump(
        {"plugins": {"entries": {"project-history-recall": {"allow_cross_project": True}}}}))


def opened(session_ref: str, as_session: str = "a-now") -> dict:
    return dispatch("project_history", {"operation": "session", "session_id": session_ref}, session_id=as_session)


def leaks(reply: dict) -> bool:
    text = json.dumps(reply)
    return "Beta secret plans" in text or "tangerine" in text or (B_ID in text and "candidates" in reply)


@pytest.mark.parametrize("ref", [B_ID, "@session:" + B_ID, "20260105"])
def test_another_projects_session_is_not_opened(two, ref):
    reply = opened(ref)
    assert reply["success"] is False and reply["code"] == "not_in_project", reply
    assert "another project" in reply["error"] and not leaks(reply)


def test_ambiguous_prefix_offers_only_the_askers_project(two):
    reply = opened("2026")  # 4 characters: matches sessions of both projects
    assert reply["code"] == "ambiguous_id", reply
    assert {c["session_id"] for c in reply["candidates"]} == {"20260101_100000_a1a1", "20260102_100000_a2a2"}
    assert not leaks(reply)
    unique = opened("20260101")
    assert unique["success"] and unique["session"]["title"] == "Alpha okapi"


def test_own_session_opens_and_home_opens_nothing(two):
    assert opened("a-now")["session"]["current"] is True
    for ref in ("20260101_100000_a1a1", B_ID, "2026"):
        reply = opened(ref, as_session="home-now")
        assert reply["code"] == "not_in_project" and not leaks(reply), reply
        assert "candidates" not in reply


def test_scope_all_is_refused_for_the_model_by_default(two):
    search = dispatch("project_history_search", {"query": "okapi", "scope": "all"}, session_id="a-now")
    timeline = dispatch("project_history", {"operation": "timeline", "scope": "all"}, session_id="a-now")
    for reply in (search, timeline):
        assert reply["success"] is False and reply["code"] == "cross_project_disabled", reply
        assert "allow_cross_project: true" in reply["error"] and not leaks(reply)
    own = dispatch("project_history", {"operation": "timeline"}, session_id="a-now")
    assert own["success"] and B_ID not in json.dumps(own)


def test_allow_cross_project_lets_the_model_read_everywhere(two):
    allow_cross_project(two)
    search = dispatch("project_history_search", {"query": "okapi tangerine", "scope": "all", "mode": "keyword"},
                      session_id="a-now")
    assert search["success"] and B_ID in json.dumps(search), search
    timeline = dispatch("project_history", {"operation": "timeline", "scope": "all"}, session_id="a-now")
    assert B_ID in {s["session_id"] for s in timeline["sessions"]}
    assert opened(B_ID)["session"]["title"] == "Beta secret plans"


def test_projects_lists_names_and_counts_but_no_sessions(two):
    reply = dispatch("project_history", {"operation": "projects"}, session_id="a-now")
    assert {p["name"] for p in reply["projects"]} >= {"Alpha", "Beta"}
    assert not leaks(reply) and B_ID not in json.dumps(reply)


def test_a_person_may_always_read_everywhere(two):
    def phr(*args: str) -> dict:
        result = CliRunner().invoke(main, ["--home", str(two.root), *args, "--json"], catch_exceptions=False)
        return json.loads(result.output)

    found = phr("search", "tangerine", "--all-projects", "--session", "a-now", "--mode", "keyword")
    assert B_ID in json.dumps(found), found
    assert phr("session", B_ID)["session"]["title"] == "Beta secret plans"
    assert B_ID in {s["session_id"] for s in phr("timeline", "--all-projects", "--session", "a-now")["sessions"]}


def test_setting_parses_default_false():
    assert Settings.from_config({}).allow_cross_project is False
    block = {"plugins": {"entries": {"project-history-recall": {"allow_cross_project": True}}}}
    assert Settings.from_config(block).allow_cross_project is True


def test_relatives_in_another_project_are_not_named(two, tmp_path):
    """A child continued in project B (its cwd moved) is not listed under A's session, nor its parent named."""
    two.session("b-child", tmp_path / "beta", "beta continues the tangerine", parent="20260101_100000_a1a1")
    reply = opened("20260101_100000_a1a1")
    assert reply["success"] and reply["children"] == [] and "b-child" not in json.dumps(reply), reply
    allow_cross_project(two)
    assert [c["session_id"] for c in opened("20260101_100000_a1a1")["children"]] == ["b-child"]
