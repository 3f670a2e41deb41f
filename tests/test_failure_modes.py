"""Every row of the seed's failure table (section 七), through Hermes's real tool registry."""

from __future__ import annotations

import pytest

from builders import History, dispatch, git_init
from project_history_recall.search.keyword import keyword_hits
from project_history_recall.search.scope import Filters
from project_history_recall.tokenizer import QueryPlan, Unit

pytestmark = pytest.mark.usefixtures("registered_plugin")


def test_missing_state_db(tmp_path):
    (tmp_path / "hermes").mkdir()
    reply = dispatch("project_history_search", {"query": "anything"}, session_id="s1")
    assert reply["success"] is False and reply["code"] == "no_db"
    assert reply["error"].startswith("session database not found")


def test_missing_state_db_beside_another_agents_history(tmp_path, monkeypatch):
    """A Claude Code folder on the machine makes the history readable without Hermes's database;
    Hermes's own session still cannot be placed, and the answer says why (it once searched Home
    and answered "no working directory recorded")."""
    (tmp_path / "hermes").mkdir()
    (tmp_path / "claude" / "projects").mkdir(parents=True)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    reply = dispatch("project_history_search", {"query": "anything"}, session_id="s1")
    assert reply["success"] is False and reply["code"] == "no_db"


def test_missing_projects_db_degrades_to_auto_repos(tmp_path):
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    h.session("old", repo, "the ibex release notes")
    h.session("now", repo)
    reply = dispatch("project_history_search", {"query": "ibex"}, session_id="now")
    assert reply["success"] and reply["project"]["kind"] == "auto"
    assert [r["session_id"] for r in reply["results"]] == ["old"]


def test_no_working_directory_recorded(tmp_path):
    h = History(tmp_path / "hermes")
    h.session("old", None, "ibex")
    h.session("now", None)
    reply = dispatch("project_history_search", {"query": "ibex"}, session_id="now")
    assert reply == {**reply, "success": True, "results": [], "sessions_in_scope": 0,
                     "message": "No project context (no working directory recorded)"}


def test_no_other_sessions_in_this_project(tmp_path):
    h = History(tmp_path / "hermes")
    h.session("now", git_init(tmp_path / "lonely"), "ibex")
    reply = dispatch("project_history_search", {"query": "ibex"}, session_id="now")
    assert reply["results"] == [] and reply["sessions_in_scope"] == 1
    assert reply["message"] == "No other sessions in this project"


def test_fts_syntax_error_falls_back_to_like(tmp_path):
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    h.session("old", repo, "the ibex release notes")
    h.recall().refresh()
    conn = h.recall().index.connect_readonly()

    class Broken(QueryPlan):
        def match_any(self) -> str:
            return 'ibex AND AND ("'

    hits = keyword_hits(conn, Broken(units=(Unit("ibex", (("ibex",),)),)), ["old"], Filters())
    assert [h.session_id for h in hits] == ["old"]
    conn.close()


@pytest.mark.parametrize("query", ['"', "AND", "ibex OR", "NEAR(a b", "^x", "*", "ibex:1", "{a b}"])
def test_fts_syntax_never_reaches_the_model(tmp_path, query):
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    h.session("old", repo, "ibex AND OR notes")
    h.session("now", repo)
    assert dispatch("project_history_search", {"query": query}, session_id="now")["success"] is True


def test_move_to_unknown_project(tmp_path):
    h = History(tmp_path / "hermes")
    h.project("Real", git_init(tmp_path / "real"))
    h.session("now", tmp_path)
    reply = dispatch("project_session_move", {"project_id": "p_nope"}, session_id="now")
    assert reply == {"success": False, "error": "project not found: p_nope", "code": "project_not_found"}


def test_move_to_missing_folder(tmp_path):
    h = History(tmp_path / "hermes")
    gone = tmp_path / "gone"
    pid = h.project("Gone", gone)
    h.session("now", tmp_path)
    reply = dispatch("project_session_move", {"project_id": pid}, session_id="now")
    assert reply["success"] is False and reply["error"] == f"project folder not found: {gone}"


@pytest.mark.parametrize("args", [{}, {"query": 5}, {"query": ""}, {"query": "x", "mode": "fuzzy"},
                                  {"query": "x", "limit": "many"}, {"query": "x", "kinds": ["bogus"]},
                                  {"query": "x", "after": "not a date"}, {"query": "x", "scope": "galaxy"}])
def test_bad_arguments_are_clear_errors(tmp_path, args):
    h = History(tmp_path / "hermes")
    h.session("now", tmp_path)
    reply = dispatch("project_history_search", args, session_id="now")
    assert reply["success"] is False and reply["code"] == "bad_argument" and reply["error"]


def test_limit_is_capped_and_below_one_is_refused(tmp_path):
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    for i in range(12):
        h.session(f"s{i}", repo, f"ibex note {i}")
    h.session("now", repo)
    assert len(dispatch("project_history_search", {"query": "ibex", "limit": 50}, "now")["results"]) == 10
    for bad in (0, -3, "0"):
        reply = dispatch("project_history_search", {"query": "ibex", "limit": bad}, "now")
        assert reply["success"] is False and reply["code"] == "bad_argument" and "at least 1" in reply["error"]
    assert len(dispatch("project_history_search", {"query": "ibex"}, "now")["results"]) == 3
