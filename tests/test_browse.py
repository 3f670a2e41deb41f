"""``project_history``: session / timeline / projects / status, through Hermes's real tool registry."""

from __future__ import annotations

import pytest
import yaml

from builders import History, dispatch, git_init, tool_call

DAY = 86400.0


pytestmark = pytest.mark.usefixtures("registered_plugin")


def history(**args):
    session_id = args.pop("as_session", "now")
    return dispatch("project_history", args, session_id=session_id)


@pytest.fixture()
def repo_history(tmp_path):
    """Two projects; in ``Repo``: a titled session, a compression chain, a /branch, a subagent."""
    h = History(tmp_path / "hermes")
    repo, other = git_init(tmp_path / "repo"), git_init(tmp_path / "other")
    h.project("Repo", repo)
    h.session("20260101_100000_aaaa01", repo, "how do we deploy the pelican service?",
              "with blue-green, see deploy/pelican.sh", title="Pelican deploy")
    h.session("20260102_100000_bbbb01", repo, "start of a long talk", "ok")
    h.db.end_session("20260102_100000_bbbb01", "compression")
    h.session("20260102_110000_bbbb02", repo, "continued after compression", "yes",
              parent="20260102_100000_bbbb01")
    h.session("20260103_100000_cccc01", repo, "try another approach", "sure", parent="20260101_100000_aaaa01",
              model_config={"_branched_from": "20260101_100000_aaaa01"})
    h.db.end_session("20260101_100000_aaaa01", "branched")
    h.session("20260103_120000_dddd01", repo, "subagent work", "done", source="subagent",
              parent="20260101_100000_aaaa01")
    h.session("20260104_100000_eeee01", other, "the otter project notes")
    h.session("now", repo)
    yield h
    h.close()


# -- session -------------------------------------------------------------------------------


def test_session_by_full_id_has_metadata_entries_and_children(repo_history):
    reply = history(operation="session", session_id="20260101_100000_aaaa01")
    assert reply["success"] and reply["operation"] == "session", reply
    meta = reply["session"]
    assert meta["title"] == "Pelican deploy" and meta["project"]["name"] == "Repo"
    assert meta["branch"] == "main" and meta["message_count"] == 2 and meta["cwd"].endswith("/repo")
    assert meta["started"] and meta["link"] == "@session:20260101_100000_aaaa01"
    assert [e["kind"] for e in reply["entries"]] == ["user", "assistant"]
    assert reply["entries"][0]["text"] == "how do we deploy the pelican service?"
    assert [e["position"] for e in reply["entries"]] == [0, 1]
    relations = {c["session_id"]: c["relation"] for c in reply["children"]}
    assert relations == {"20260103_100000_cccc01": "branch", "20260103_120000_dddd01": "delegate"}
    assert reply["parent"] is None


def allow_cross_project(h: History) -> None:
    (h.root / "config.yaml").write_text(yaml.safe_dump(
        {"plugins": {"entries": {"project-history-recall": {"allow_cross_project": True}}}}))


def test_session_by_unique_prefix_and_by_link(repo_history):
    assert history(operation="session", session_id="20260101")["session"]["session_id"] == "20260101_100000_aaaa01"
    # the other project's session: not opened for the model (issue 15), opened once allowed
    assert history(operation="session", session_id="20260104")["code"] == "not_in_project"
    allow_cross_project(repo_history)
    assert history(operation="session", session_id="20260104")["session"]["session_id"] == "20260104_100000_eeee01"
    reply = history(operation="session", session_id="@session:20260102_110000")
    assert reply["session"]["session_id"] == "20260102_110000_bbbb02"
    assert reply["parent"] == {**reply["parent"], "session_id": "20260102_100000_bbbb01", "relation": "compression"}
    chain = history(operation="session", session_id="20260102_100000_bbbb01")
    assert [(c["session_id"], c["relation"]) for c in chain["children"]] == [("20260102_110000_bbbb02", "compression")]


def test_ambiguous_prefix_returns_the_candidates(repo_history):
    reply = history(operation="session", session_id="20260102")
    assert reply["success"] is False and reply["code"] == "ambiguous_id"
    assert {c["session_id"] for c in reply["candidates"]} == {"20260102_100000_bbbb01", "20260102_110000_bbbb02"}
    assert all("when" in c and "title" in c for c in reply["candidates"])


def test_unknown_id_is_a_clear_error(repo_history):
    reply = history(operation="session", session_id="19990101_nope")
    assert reply == {"success": False, "error": "no session matches '19990101_nope'", "code": "not_found"}
    assert history(operation="session")["code"] == "bad_argument"
    assert history(operation="session", session_id="%")["code"] == "not_found"  # LIKE wildcards are literal


def test_hidden_subagent_session_opens_by_id(repo_history):
    reply = history(operation="session", session_id="20260103_120000_dddd01")
    assert reply["session"]["hidden"] is True
    assert reply["parent"]["session_id"] == "20260101_100000_aaaa01" and reply["parent"]["relation"] == "delegate"


def test_long_session_is_head_and_tail_with_the_middle_elided(tmp_path):
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    h.session("long", repo, *[f"message number {i}" for i in range(45)])
    h.session("now", repo)
    reply = history(operation="session", session_id="long")
    assert reply["truncated"] is True and reply["entries_total"] == 45 and reply["elided"] == 15
    assert [e["text"] for e in reply["entries"]][:2] == ["message number 0", "message number 1"]
    assert len(reply["entries"]) == 20 and len(reply["tail"]) == 10
    assert reply["tail"][-1]["text"] == "message number 44"
    assert "elided" in reply["message"] and "around_message_id" in reply["message"]
    h.close()


def test_window_around_a_message(tmp_path):
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    ids = h.session("long", repo, *[f"message number {i}" for i in range(30)])
    h.session("now", repo)
    reply = history(operation="session", session_id="long", around_message_id=ids[12], window=3)
    assert reply["mode"] == "window" and reply["window"] == 3
    assert [e["text"] for e in reply["entries"]] == [f"message number {i}" for i in range(9, 16)]
    assert [e.get("anchor", False) for e in reply["entries"]].count(True) == 1
    assert reply["entries"][3]["anchor"] is True and reply["entries"][3]["message_id"] == ids[12]
    assert reply["more_before"] == 9 and reply["more_after"] == 14
    edge = history(operation="session", session_id="long", around_message_id=ids[0])
    assert edge["more_before"] == 0 and len(edge["entries"]) == 6
    missing = history(operation="session", session_id="long", around_message_id=999_999)
    assert missing["success"] is False and missing["code"] == "not_found"
    h.close()


def test_window_anchor_on_a_tool_result_and_in_a_child_session(tmp_path):
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    ids = h.session("parent", repo, "run the tests please",
                    ("assistant", "", {"tool_calls": [tool_call("c1", "terminal", {"command": "pytest -q"})]}),
                    ("tool", "3 passed", {"tool_call_id": "c1", "tool_name": "terminal"}),
                    "all green")
    h.db.end_session("parent", "compression")
    child_ids = h.session("child", repo, "continuing", "fine", parent="parent")
    h.session("now", repo)
    # The tool result has no entry of its own: Hermes's message order places it.
    reply = history(operation="session", session_id="parent", around_message_id=ids[2], window=1)
    assert [e["position"] for e in reply["entries"]] == [1, 3]
    assert reply["entries"][0]["tool_name"] == "terminal" and reply["entries"][0]["result"] == "3 passed"
    # A message that lives in a compression child of the named session: opened there, with a warning.
    rebound = history(operation="session", session_id="parent", around_message_id=child_ids[1])
    assert rebound["session"]["session_id"] == "child" and "same lineage" in rebound["warning"]
    h.close()


# -- timeline ------------------------------------------------------------------------------------


def test_timeline_is_newest_first_in_this_project(repo_history):
    reply = history(operation="timeline")
    assert reply["success"] and reply["scope"] == "project" and reply["project"]["name"] == "Repo"
    ids = [s["session_id"] for s in reply["sessions"]]
    assert "20260104_100000_eeee01" not in ids  # another project
    assert "20260103_120000_dddd01" not in ids  # a hidden subagent
    assert ids[0] == "now" and reply["sessions"][0]["current"] is True
    assert ids[1:] == ["20260103_100000_cccc01", "20260102_110000_bbbb02", "20260102_100000_bbbb01",
                       "20260101_100000_aaaa01"]
    by_id = {s["session_id"]: s for s in reply["sessions"]}
    assert by_id["20260101_100000_aaaa01"]["label"] == "Pelican deploy"
    assert by_id["20260102_100000_bbbb01"]["label"] == "start of a long talk"  # no title: the first user words
    assert by_id["20260102_110000_bbbb02"]["parent_session_id"] == "20260102_100000_bbbb01"
    assert all({"when", "message_count"} <= set(s) for s in reply["sessions"])
    assert reply["total"] == reply["shown"] == 5


def test_timeline_everywhere_after_before_and_limit(repo_history):
    assert history(operation="timeline", scope="all")["code"] == "cross_project_disabled"
    allow_cross_project(repo_history)
    everywhere = history(operation="timeline", scope="all")
    assert {s["project"]["name"] for s in everywhere["sessions"]} == {"Repo", "other"}
    limited = history(operation="timeline", scope="all", limit=2)
    assert limited["shown"] == 2 and limited["total"] == 6
    clock = repo_history.clock
    # Messages were written one minute apart ending at ``clock``; "now" has none (started = wall clock).
    recent = history(operation="timeline", scope="all", after=clock - 90)
    assert {s["session_id"] for s in recent["sessions"]} == {"20260104_100000_eeee01", "now"}
    old = history(operation="timeline", scope="all", before=clock - 10 * 365 * DAY)
    assert old["sessions"] == [] and old["total"] == 0
    bad = history(operation="timeline", after="last tuesday-ish")
    assert bad["success"] is False and bad["code"] == "bad_argument"


def test_timeline_from_home_says_there_is_no_project(tmp_path):
    h = History(tmp_path / "hermes")
    h.session("old", None, "anything")
    h.session("now", None)
    reply = history(operation="timeline")
    assert reply["success"] and reply["sessions"] == [] and "/recall sessions all" in reply["message"]
    allow_cross_project(h)
    reply = history(operation="timeline")
    assert reply["success"] and reply["sessions"] == [] and "scope 'all'" in reply["message"]
    assert [s["session_id"] for s in history(operation="timeline", scope="all")["sessions"]] == ["now", "old"]
    h.close()


# -- branch narrows every operation ---------------------------------------------------------


def test_branch_narrows_within_the_project_and_keeps_unknown_branches(tmp_path):
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    h.session("on-main", repo, "main work", branch="main")
    h.session("on-feature", repo, "feature work", branch="feature-x")
    h.db.create_session("unknown-branch", "cli")  # no cwd yet: no branch known
    h.db.update_session_cwd("unknown-branch", str(repo / "gone"), git_repo_root=str(repo))
    h.say("unknown-branch", "branchless work")
    h.session("now", repo, branch="feature-x")
    ids = {s["session_id"] for s in history(operation="timeline", branch="feature-x")["sessions"]}
    assert ids == {"on-feature", "unknown-branch", "now"}
    projects = history(operation="projects", branch="feature-x")["projects"]
    assert [p["sessions"] for p in projects if p.get("current")] == [3]
    assert history(operation="status", branch="feature-x")["sessions_in_project"] == 3
    assert history(operation="status")["sessions_in_project"] == 4
    assert history(operation="session", session_id="on-main", branch="feature-x")["success"]
    h.close()


# -- projects --------------------------------------------------------------------------------


def test_projects_lists_every_project_with_counts_and_marks_the_current(repo_history, tmp_path):
    empty = git_init(tmp_path / "empty")
    repo_history.project("Empty", empty)
    repo_history.session("homeless", None, "no cwd at all")
    reply = history(operation="projects")
    assert reply["success"] and reply["current"]["name"] == "Repo"
    by_name = {p["name"]: p for p in reply["projects"]}
    assert set(by_name) == {"Repo", "other", "Empty", "Home"}
    assert by_name["Repo"] == {**by_name["Repo"], "kind": "explicit", "sessions": 5, "messages": 8, "current": True}
    assert by_name["other"]["kind"] == "auto" and by_name["other"]["sessions"] == 1
    assert by_name["Empty"]["sessions"] == 0 and by_name["Empty"]["folders"] == [str(empty)]
    assert by_name["Home"]["kind"] == "home" and by_name["Home"]["sessions"] == 1
    assert all(p.get("current") is None for n, p in by_name.items() if n != "Repo")
    assert all(p["last_activity"] for n, p in by_name.items() if n != "Empty")


# -- status ----------------------------------------------------------------------------------


def test_status_without_an_index_answers_and_creates_no_file(tmp_path):
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    h.session("old", repo, "hello")
    h.session("now", repo)
    data_dir = h.root / "plugins"
    reply = history(operation="status")
    assert reply["success"] and reply["operation"] == "status"
    assert reply["index_exists"] is False and reply["index_status"] == "none"
    assert "No index yet" in reply["message"]
    assert reply["state_db_sessions"] == 2 and reply["sessions_pending"] == 2
    assert reply["project"]["kind"] == "auto" and reply["project"]["name"] == "repo"
    assert {"semantic_status", "semantic", "consent", "version"} <= set(reply)
    assert not data_dir.exists()
    h.close()


def test_status_with_no_hermes_home_database(tmp_path):
    (tmp_path / "hermes").mkdir()
    reply = history(operation="status")
    assert reply["success"] and reply["state_db_exists"] is False and reply["index_status"] == "none"
    assert not (tmp_path / "hermes" / "plugins").exists()


def test_status_with_an_index(repo_history):
    assert dispatch("project_history_index", {}, session_id="now")["success"]
    reply = history(operation="status")
    assert reply["index_status"] == "ready" and reply["sessions_indexed"] == 7
    assert reply["messages_indexed"] == 11 and reply["entries_indexed"] > 11
    assert reply["index_bytes"] > 0 and reply["last_index_at"]
    assert isinstance(reply["last_index_seconds"], float)
    assert reply["job"]["state"] == "done" and reply["sessions_pending"] == 0
    assert reply["sessions_in_project"] == 5 and reply["project"]["name"] == "Repo"


def test_unknown_operation(repo_history):
    reply = history(operation="delete-everything")
    assert reply["success"] is False and reply["code"] == "bad_argument"
    assert dispatch("project_history", {}, session_id="now")["code"] == "bad_argument"
