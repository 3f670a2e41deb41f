"""The index follows state.db without --force: new messages, rewinds, titles, moves, deletions."""

from __future__ import annotations

import sqlite3

import pytest

from builders import History, git_init, session_ids, tool_call
from project_history_recall.index.store import WAL_LIMIT_BYTES
from project_history_recall.sources.hermes import MESSAGES_AFTER_SQL


@pytest.fixture
def two_repos(tmp_path):
    h = History(tmp_path / "hermes")
    a, b = git_init(tmp_path / "a"), git_init(tmp_path / "b")
    h.session("a-1", a, "the walrus migration plan", "we keep the walrus table")
    h.session("a-ask", a)
    h.session("b-ask", b)
    h.recall().refresh()
    yield h, a, b
    h.close()


def search(h, query, asker="a-ask"):
    return session_ids(h.recall().search(query, session_id=asker, mode="keyword", limit=10))


def test_new_messages_and_sessions_appear(two_repos):
    h, a, _ = two_repos
    h.say("a-1", ("assistant", "also the narwhal index"))
    h.session("a-2", a, "narwhal question")
    assert set(search(h, "narwhal")) == {"a-1", "a-2"}


def test_rewind_hides_what_was_taken_back(two_repos):
    h, _, _ = two_repos
    ids = [h.say("a-1", ("user", "should we drop the okapi column")), h.say("a-1", ("assistant", "okapi dropped"))]
    assert search(h, "okapi") == ["a-1"]
    h.db.rewind_to_message("a-1", ids[0])
    assert search(h, "okapi") == []
    assert search(h, "walrus") == ["a-1"]


def test_title_change_is_searchable(two_repos):
    h, _, _ = two_repos
    h.db.set_session_title("a-1", "Capybara schema review")
    assert search(h, "capybara") == ["a-1"]
    h.db.set_session_title("a-1", "Renamed")
    assert search(h, "capybara") == []


def test_move_changes_scope_both_ways(two_repos):
    h, _, b = two_repos
    h.db.update_session_cwd("a-1", str(b))
    assert search(h, "walrus", "a-ask") == []
    assert search(h, "walrus", "b-ask") == ["a-1"]


def test_archive_and_unarchive(two_repos):
    h, _, _ = two_repos
    h.db.set_session_archived("a-1", True)
    assert search(h, "walrus") == []
    h.db.set_session_archived("a-1", False)
    assert search(h, "walrus") == ["a-1"]


def test_replaced_transcript_is_reindexed(two_repos):
    h, _, _ = two_repos
    h.db.replace_messages("a-1", [{"role": "user", "content": "the lemur plan"},
                                  {"role": "assistant", "content": "lemur it is"}])
    assert search(h, "lemur") == ["a-1"]
    assert search(h, "walrus") == []


def test_deleted_session_leaves_the_index(two_repos):
    h, _, _ = two_repos
    h.db.delete_session("a-1")
    assert search(h, "walrus") == []
    assert h.recall().status()["sessions_indexed"] == 2


def test_refresh_with_nothing_changed_writes_nothing(two_repos):
    h, _, _ = two_repos
    report = h.recall().refresh()
    assert not report.changed and report.messages_read == 0


def test_force_rebuild_gives_the_same_answers(two_repos):
    h, _, _ = two_repos
    before = search(h, "walrus")
    report = h.recall().refresh(force=True)
    assert report.full and report.sessions_updated == 3
    assert search(h, "walrus") == before


@pytest.mark.parametrize("writer", ["same connection", "another process"])
def test_right_after_a_write_sqlite_says_whether_anything_was_committed(two_repos, monkeypatch, writer):
    import subprocess
    import sys

    from project_history_recall.sources import hermes

    monkeypatch.setattr(hermes, "RACY_SECONDS", 3600.0)  # every check falls in the racy window
    h, _, _ = two_repos
    recall = h.recall()
    for _ in range(2):  # the fixture's refresh ran moments after the writes: nothing committed since
        report = recall.refresh()
        assert report.compared is False and report.sessions_total == 3
    if writer == "same connection":
        h.say("a-1", ("assistant", "the dugong shard"))
    else:
        code = ("import sys\nfrom pathlib import Path\nfrom hermes_state import SessionDB\n"
                "db = SessionDB(db_path=Path(sys.argv[1]))\n"
                "db.append_message('a-1', 'assistant', 'the dugong shard')\ndb.close()\n")
        subprocess.run([sys.executable, "-c", code, str(h.root / "state.db")], check=True, timeout=60)
    report = recall.refresh()
    assert report.compared is True and report.messages_read >= 1  # the commit was seen
    assert recall.refresh().compared is False
    assert search(h, "dugong") == ["a-1"]


def test_a_process_that_remembers_the_index_still_sees_another_writers_changes(two_repos):
    """A refresh keeps what it compared with (the index's signatures, its reader's view of
    state.db) for the next one: a change that another writer indexed in between, and that
    state.db then took back, must still reach this process's index."""
    h, _, _ = two_repos
    mine, other = h.recall(), h.recall()

    def found(recall, query):
        return session_ids(recall.search(query, session_id="a-ask", mode="keyword", limit=10))

    h.db.set_session_title("a-1", "Capybara schema review")
    assert found(mine, "capybara") == ["a-1"]
    with sqlite3.connect(h.root / "state.db") as side:  # a commit that changes no session
        side.execute("CREATE TABLE side_note (x)")
    assert found(mine, "capybara") == ["a-1"]
    h.db.set_session_title("a-1", "Tapir schema review")
    assert found(other, "tapir") == ["a-1"]
    h.db.set_session_title("a-1", "Capybara schema review")
    assert found(mine, "capybara") == ["a-1"]
    assert found(mine, "tapir") == []


def test_every_kind_of_session_change_is_seen_by_one_long_lived_process(two_repos):
    h, a, b = two_repos
    recall = h.recall()

    def found(query, asker="a-ask"):
        return session_ids(recall.search(query, session_id=asker, mode="keyword", limit=10))

    assert found("walrus") == ["a-1"]
    h.db.update_session_cwd("a-1", str(b))
    assert found("walrus") == [] and found("walrus", "b-ask") == ["a-1"]
    h.db.update_session_cwd("a-1", str(a))
    h.db.set_session_archived("a-1", True)
    assert found("walrus") == []
    h.db.set_session_archived("a-1", False)
    h.session("a-2", a, "the walrus sequel")
    assert set(found("walrus")) == {"a-1", "a-2"}
    h.db.delete_session("a-2")
    assert found("walrus") == ["a-1"]


def test_a_session_deleted_and_another_created_in_its_rowid_between_two_checks(two_repos):
    """SQLite gives a new last row the rowid of a deleted last row, and the reader remembers
    what it saw of ``sessions`` by rowid: the new session must be found and the deleted one
    must leave the index."""
    h, a, _ = two_repos
    recall = h.recall()

    def rowid(sid):
        with sqlite3.connect(h.root / "state.db") as conn:
            return conn.execute("SELECT rowid FROM sessions WHERE id = ?", (sid,)).fetchone()[0]

    h.session("a-2", a, "the pangolin notes")
    assert session_ids(recall.search("pangolin", session_id="a-ask", mode="keyword")) == ["a-2"]
    taken = rowid("a-2")
    h.db.delete_session("a-2")
    h.session("a-3", a, "the quokka notes")
    assert rowid("a-3") == taken
    assert session_ids(recall.search("pangolin", session_id="a-ask", mode="keyword")) == []
    assert session_ids(recall.search("quokka", session_id="a-ask", mode="keyword")) == ["a-3"]
    assert recall.status()["sessions_indexed"] == 4


def test_the_newest_messages_are_found_by_a_rowid_seek_not_a_scan(two_repos):
    """Every check after a turn asks which sessions have messages past the indexed id; on
    Hermes's own schema that must stay a seek into the rowid range (a scan of the messages
    index is 23 ms at M)."""
    h, _, _ = two_repos
    h.say("a-1", ("assistant", "the tapir note"))
    conn = sqlite3.connect(h.root / "state.db")
    try:
        plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {MESSAGES_AFTER_SQL}", (0,))]
    finally:
        conn.close()
    assert plan and all(step.startswith("SEARCH messages USING INTEGER PRIMARY KEY") for step in plan), plan
    assert search(h, "tapir") == ["a-1"]


def test_a_move_and_a_new_message_between_two_searches_of_one_process(two_repos):
    """The session is rewritten for its new message, and its move must reach the scope too
    (scope is cached until what attributes a session changes, which a turn alone does not)."""
    h, _, b = two_repos
    recall = h.recall()
    assert session_ids(recall.search("walrus", session_id="a-ask", mode="keyword")) == ["a-1"]
    h.say("a-1", ("assistant", "the walrus table moves too"))
    h.db.update_session_cwd("a-1", str(b))
    assert session_ids(recall.search("walrus", session_id="a-ask", mode="keyword")) == []
    assert session_ids(recall.search("walrus", session_id="b-ask", mode="keyword")) == ["a-1"]


def test_one_reader_serves_the_reads_of_a_process_and_sees_each_commit(two_repos):
    """Reads reuse one kept connection (a new one costs its schema and page cache), which sees
    what was committed since; an index file moved aside and rebuilt gets a new one."""
    h, _, _ = two_repos
    recall = h.recall()
    with recall.fresh_reader() as first:
        pass
    h.say("a-1", ("assistant", "the quokka column"))
    with recall.fresh_reader() as second:
        assert second is first
        assert second.execute("SELECT COUNT(*) FROM entries WHERE text LIKE '%quokka%'").fetchone()[0] == 1
    recall.workspace.index.move_aside("test")
    recall.refresh()
    with recall.fresh_reader() as third:
        assert third is not first
        assert third.execute("SELECT COUNT(*) FROM entries WHERE text LIKE '%quokka%'").fetchone()[0] == 1


def _entries(recall) -> list[tuple]:
    conn = sqlite3.connect(recall.workspace.index.path)
    try:
        return sorted(conn.execute("SELECT session_id, message_id, position, kind, role, tool_name, timestamp, text, "
                                   "IFNULL(context, '') FROM entries"))
    finally:
        conn.close()


def test_a_session_grown_turn_by_turn_holds_what_a_rebuild_writes(two_repos):
    """A turn rewrites only the entries that changed: the new message's, and a tool call's whose
    result came after it (its head rides along as the call's context). What the index then
    holds, and finds, is what a rebuild from scratch writes."""
    h, _, _ = two_repos
    recall = h.recall()
    h.say("a-1", ("assistant", "", {"tool_calls": [tool_call("c1", "terminal", {"command": "pytest -k tapir"})]}))
    recall.refresh()
    h.say("a-1", ("tool", "1 failed: tapir_index_test", {"tool_call_id": "c1", "tool_name": "terminal"}))
    h.say("a-1", ("assistant", "the tapir index test fails on the empty table"))
    recall.refresh()
    h.say("a-1", ("user", "fix the tapir test"))
    recall.refresh()
    grown = _entries(recall)
    assert any(row[3] == "tool_call" and row[8].startswith("1 failed") for row in grown)
    found = session_ids(recall.search("tapir empty table", session_id="a-ask", mode="keyword"))
    recall.refresh(force=True)
    assert _entries(recall) == grown
    assert session_ids(recall.search("tapir empty table", session_id="a-ask", mode="keyword")) == found == ["a-1"]


def test_a_first_build_leaves_no_large_write_ahead_log(tmp_path, monkeypatch):
    """Another agent's (empty) transcript folder makes the refresh read its parse in one long
    transaction, which keeps SQLite's own checkpoints from restarting the index's log: without
    the trim, this build left a 9 MB log beside the index for as long as the process lived."""
    (tmp_path / "claude" / "projects").mkdir(parents=True)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    for n in range(300):  # two batches of sessions, two commits
        words = " ".join(f"term{n}x{i} detail{(n * 31 + i) % 997}" for i in range(400))
        h.session(f"s-{n:03}", repo, f"question {n}: {words}", f"answer {n}: {words}")
    recall = h.recall()
    report = recall.refresh()
    assert report.sessions_updated == 300
    wal = recall.workspace.index.path.with_name("index.db-wal")
    assert not wal.exists() or wal.stat().st_size <= WAL_LIMIT_BYTES
    assert session_ids(recall.search("term123x7", session_id="s-000", mode="keyword")) == ["s-123"]
    h.close()
