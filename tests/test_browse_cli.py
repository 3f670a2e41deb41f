"""``phr session / timeline / projects / status / index``: the same library as the tools,
human text (shared with ``/recall``) by default, ``--json`` for scripts."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from builders import History, git_init
from project_history_recall.faces.cli import main


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


@pytest.fixture()
def h(tmp_path):
    h = History(tmp_path / "hermes")
    repo, other = git_init(tmp_path / "repo"), git_init(tmp_path / "other")
    h.project("Repo", repo)
    h.session("20260101_090000_aaaa", repo, "the ibis deploy", "done with ibis", title="Ibis deploy")
    h.session("20260102_090000_bbbb", repo, "ibis follow-up")
    h.session("20260103_090000_cccc", other, "something else")
    h.repo, h.other = repo, other  # type: ignore[attr-defined]
    yield h
    h.close()


def test_status_before_and_after_index(h):
    home = str(h.root)
    code, out = run("--home", home, "status", "--json")
    payload = json.loads(out)
    assert code == 0 and payload["index_status"] == "none" and not (h.root / "plugins").exists()
    code, out = run("--home", home, "status", "--cwd", str(h.repo))
    assert code == 0 and "index: none" in out and "current project: Repo (explicit)" in out
    code, out = run("--home", home, "index")
    assert code == 0 and "indexed 3 changed sessions of 3" in out
    code, out = run("--home", home, "index", "--json")
    assert code == 0 and json.loads(out)["status"] == "done" and json.loads(out)["sessions_updated"] == 0
    code, out = run("--home", home, "status", "--cwd", str(h.repo), "--json")
    payload = json.loads(out)
    assert payload["index_status"] == "ready" and payload["sessions_in_project"] == 2
    assert payload["job"]["reason"] == "cli" and isinstance(payload["last_index_seconds"], float)


def test_session_by_prefix_and_its_errors(h):
    home = str(h.root)
    code, out = run("--home", home, "session", "20260101", "--json")
    assert code == 0 and json.loads(out)["session"]["title"] == "Ibis deploy"
    code, out = run("--home", home, "session", "@session:20260101_090000_aaaa")
    assert code == 0 and "@session:20260101_090000_aaaa  Ibis deploy" in out and "user" in out
    code, out = run("--home", home, "session", "2026010", "--json")
    assert code == 1 and json.loads(out)["code"] == "ambiguous_id"
    code, out = run("--home", home, "session", "2026010")
    assert code == 1 and "ambiguous_id" in out and "20260102_090000_bbbb" in out
    code, out = run("--home", home, "session", "nope", "--json")
    assert code == 1 and json.loads(out)["code"] == "not_found"
    mid = json.loads(run("--home", home, "session", "20260101", "--json")[1])["entries"][1]["message_id"]
    code, out = run("--home", home, "session", "20260101", "--around", str(mid), "--window", "1", "--json")
    assert json.loads(out)["mode"] == "window"


def test_timeline_and_projects(h):
    home = str(h.root)
    code, out = run("--home", home, "timeline", "--cwd", str(h.repo), "--json")
    payload = json.loads(out)
    assert code == 0 and [s["session_id"] for s in payload["sessions"]] == ["20260102_090000_bbbb",
                                                                          "20260101_090000_aaaa"]
    code, out = run("--home", home, "timeline", "--all-projects", "--limit", "1")
    assert code == 0 and "every project: 1 of 3 sessions" in out
    code, out = run("--home", home, "projects", "--cwd", str(h.other))
    assert code == 0 and "* other (auto)" in out and "  Repo (explicit)  2 sessions" in out
    code, out = run("--home", home, "projects", "--json")
    assert code == 0 and {p["name"] for p in json.loads(out)["projects"]} == {"Repo", "other"}


def test_no_database(tmp_path):
    code, out = run("--home", str(tmp_path / "none"), "timeline", "--json")
    assert code == 1 and json.loads(out)["code"] == "no_db"
    code, out = run("--home", str(tmp_path / "none"), "status", "--json")
    assert code == 0 and json.loads(out)["state_db_exists"] is False


def test_index_in_the_background_returns_a_job(h):
    from project_history_recall.recall import Recall
    from project_history_recall.services import jobs

    code, out = run("--home", str(h.root), "index", "--background", "--json")
    payload = json.loads(out)
    assert code == 0 and payload["job"]["detached"] is True and payload["job"]["reason"] == "cli"
    assert jobs.wait(Recall(h.root).workspace, jobs.Job(payload["job_id"]), 60).state == "done"
    code, out = run("--home", str(h.root), "status", "--json")
    assert json.loads(out)["sessions_indexed"] == 3
