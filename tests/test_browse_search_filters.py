"""``project_history_search`` filters (after / before / kinds / scope "all"), through the real registry."""

from __future__ import annotations

import pytest
import yaml

from builders import History, dispatch, git_init, session_ids, tool_call

pytestmark = pytest.mark.usefixtures("registered_plugin")


@pytest.fixture()
def h(tmp_path):
    h = History(tmp_path / "hermes")
    repo, other = git_init(tmp_path / "repo"), git_init(tmp_path / "other")
    h.session("early", repo, "the heron migration plan")
    h.clock += 10 * 86400
    h.session("late", repo, "the heron rollback", title="Heron rollback")
    h.session("tools", repo, "check heron",
              ("assistant", "", {"tool_calls": [tool_call("c1", "terminal", {"command": "heron --check"})]}))
    h.session("elsewhere", other, "a heron in another repo")
    h.session("now", repo)
    yield h
    h.close()


def search(**args):
    return dispatch("project_history_search", {"mode": "keyword", "limit": 10, **args}, session_id="now")


def test_after_and_before(h):
    boundary = h.clock - 5 * 86400
    assert set(session_ids(search(query="heron"))) == {"early", "late", "tools"}
    assert set(session_ids(search(query="heron", after=boundary))) == {"late", "tools"}
    assert session_ids(search(query="heron", before=boundary)) == ["early"]
    assert session_ids(search(query="heron", after="2000-01-01", before="2000-01-02")) == []
    bad = search(query="heron", after="someday")
    assert bad["success"] is False and bad["code"] == "bad_argument"


def test_kinds(h):
    assert session_ids(search(query="heron", kinds=["tool_call"])) == ["tools"]
    titled = search(query="rollback", kinds=["title"])
    assert session_ids(titled) == ["late"] and titled["results"][0]["kind"] == "title"
    assert set(session_ids(search(query="heron", kinds=["user", "assistant"]))) == {"early", "late", "tools"}
    bad = search(query="heron", kinds=["reasoning"])
    assert bad["success"] is False and bad["code"] == "bad_argument"


def test_scope_all_reaches_other_projects_and_names_them(h):
    assert search(query="heron", scope="all")["code"] == "cross_project_disabled"
    (h.root / "config.yaml").write_text(yaml.safe_dump(
        {"plugins": {"entries": {"project-history-recall": {"allow_cross_project": True}}}}))
    reply = search(query="heron", scope="all")
    assert set(session_ids(reply)) == {"early", "late", "tools", "elsewhere"}
    assert {r["session_id"]: r["project"]["name"] for r in reply["results"]}["elsewhere"] == "other"
    assert search(query="heron", scope="galaxy")["code"] == "bad_argument"
