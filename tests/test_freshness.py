"""Automatic freshness: nothing to do after install, and never a long wait.

First use builds the index, session start refreshes it in the background, every read runs
a bounded incremental check; a state.db locked by a writing Hermes process never hangs us.
All through Hermes's real tool registry and hook dispatch.

No test here reads a clock: "does not wait" is shown with a :class:`~builders.Gate` that
holds the slow step until the caller has answered (conftest lifts the read bounds so a loaded
machine cannot turn a finished build into "updating"; the tests of a bound set it back).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from builders import Gate, History, dispatch, git_init, session_ids
from project_history_recall.recall import Recall
from project_history_recall.services import freshness, jobs
from project_history_recall.services.workspace import Workspace

pytestmark = pytest.mark.usefixtures("registered_plugin")


@pytest.fixture()
def h(tmp_path):
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    h.repo = repo  # type: ignore[attr-defined]
    h.session("old", repo, "the puffin release checklist", "tag, build, publish puffin")
    h.session("now", repo)
    yield h
    h.close()


def search(query: str, **args) -> dict:
    return dispatch("project_history_search", {"query": query, "mode": "keyword", **args}, session_id="now")


def configure(root: Path, **plugin_settings) -> None:
    (root / "config.yaml").write_text(yaml.safe_dump(
        {"plugins": {"entries": {"project-history-recall": plugin_settings}}}))


def write_from_another_process(db_path: Path, sid: str, cwd: Path, text: str) -> None:
    code = (
        "import sys\nfrom pathlib import Path\nfrom hermes_state import SessionDB\n"
        "db = SessionDB(db_path=Path(sys.argv[1]))\n"
        "db.create_session(sys.argv[2], 'cli', cwd=sys.argv[3])\n"
        "db.append_message(sys.argv[2], 'user', sys.argv[4])\n"
        "db.close()\n"
    )
    subprocess.run([sys.executable, "-c", code, str(db_path), sid, str(cwd), text], check=True, timeout=60)


def join_background_threads() -> None:
    """Wait for the plugin's own threads (session-start kick, refresh worker) to end."""
    for thread in threading.enumerate():
        if thread.name.startswith("phr-"):
            thread.join(60)


# -- first use -------------------------------------------------------------------------------


def test_first_search_builds_a_small_index_and_answers(h):
    assert not (h.root / "plugins").exists()
    reply = search("puffin")
    assert session_ids(reply) == ["old"] and "index_status" not in reply
    job = dispatch("project_history", {"operation": "status"})["job"]
    assert job["reason"] == "auto_build" and job["state"] == "done" and job["detached"] is False


def test_first_use_of_a_large_history_answers_building_then_results(h, monkeypatch):
    monkeypatch.setattr(jobs, "LARGE_HISTORY", 0)  # every history is "large": a detached job builds it
    monkeypatch.setattr(freshness, "FIRST_BUILD_WAIT", 0.0)
    reply = search("puffin")
    assert reply == {**reply, "success": True, "results": [], "index_status": "building"}, reply
    assert reply["job"]["detached"] is True and "being built" in reply["message"]
    browse = dispatch("project_history", {"operation": "timeline"}, session_id="now")
    assert browse["index_status"] == "building" and browse["success"] is True
    state = jobs.wait(Recall(h.root).workspace, jobs.Job(reply["job_id"]), 60)
    assert state.state == "done"
    assert session_ids(search("puffin")) == ["old"]


def test_auto_build_off_means_no_index_until_asked(h):
    configure(h.root, auto_build=False)
    reply = search("puffin")
    assert reply["success"] is False and reply["code"] == "no_index"
    assert "automatic indexing is off" in reply["error"] and "project_history_index" in reply["error"]
    assert not (h.root / "plugins").exists()
    assert dispatch("project_history_index", {})["status"] == "done"
    write_from_another_process(h.root / "state.db", "newer", h.repo, "a puffin update")
    assert set(session_ids(search("puffin"))) == {"old", "newer"}  # increments still run


def test_auto_index_off_means_fully_manual(h):
    configure(h.root, auto_index=False)
    assert search("puffin")["code"] == "no_index"
    assert dispatch("project_history_index", {})["sessions_updated"] == 2
    write_from_another_process(h.root / "state.db", "newer", h.repo, "a puffin update")
    assert session_ids(search("puffin")) == ["old"]
    from hermes_cli.plugins import get_plugin_manager

    get_plugin_manager().invoke_hook("on_session_start", session_id="now", model="m", platform="cli")
    join_background_threads()
    assert session_ids(search("puffin")) == ["old"]
    dispatch("project_history_index", {})
    assert set(session_ids(search("puffin"))) == {"old", "newer"}


# -- every read ----------------------------------------------------------------------------------


def test_a_session_written_by_another_process_is_found_by_the_very_next_search(h):
    assert session_ids(search("puffin")) == ["old"]
    write_from_another_process(h.root / "state.db", "newer", h.repo, "the puffin hotfix")
    assert set(session_ids(search("puffin"))) == {"old", "newer"}
    write_from_another_process(h.root / "state.db", "newest", h.repo, "puffin again")
    timeline = dispatch("project_history", {"operation": "timeline"}, session_id="now")
    assert "newest" in {s["session_id"] for s in timeline["sessions"]}


def test_a_slow_refresh_never_holds_a_read_longer_than_the_bound(h, monkeypatch):
    monkeypatch.setattr(freshness, "FRESH_WAIT", 0.2)
    assert session_ids(search("puffin")) == ["old"]
    real = Workspace.refresh
    gate = Gate()

    def slow(self, **kwargs):
        gate.hold()
        return real(self, **kwargs)

    monkeypatch.setattr(Workspace, "refresh", slow)
    write_from_another_process(h.root / "state.db", "newer", h.repo, "puffin news")
    reply = search("puffin")
    assert session_ids(reply) == ["old"] and reply["index_status"] == "updating"
    assert gate.opened_in_time()  # the read answered while the refresh was still held
    monkeypatch.setattr(freshness, "FRESH_WAIT", 60.0)
    assert set(session_ids(search("puffin"))) == {"old", "newer"}


def test_reads_while_an_index_job_runs_use_the_index_as_it_stands(h, monkeypatch):
    assert session_ids(search("puffin")) == ["old"]
    monkeypatch.setattr(jobs, "LARGE_HISTORY", 0)
    monkeypatch.setattr(jobs, "BACKGROUND_GLANCE", 0.0)
    recall = Recall(h.root)
    with recall.index.writer(timeout=5):  # keeps the forced rebuild waiting, so running
        started = dispatch("project_history_index", {"force": True})
        assert started["status"] == "running"
        reply = search("puffin")
        assert session_ids(reply) == ["old"] and reply["index_status"] == "updating"
        assert reply["job_id"] == started["job_id"]
    assert jobs.wait(recall.workspace, jobs.Job(started["job_id"]), 60).state == "done"


# -- session start ---------------------------------------------------------------------------------


def test_session_start_refreshes_in_the_background(h, monkeypatch):
    from hermes_cli.plugins import get_plugin_manager

    manager = get_plugin_manager()
    gate = Gate()
    real_kick = freshness.kick

    def held_kick(recall):
        gate.hold()
        real_kick(recall)

    monkeypatch.setattr(freshness, "kick", held_kick)
    manager.invoke_hook("on_session_start", session_id="now", model="m", platform="cli")
    assert gate.opened_in_time()  # the hook returned while its work was still held: it only starts a thread
    index = Recall(h.root).index
    deadline = time.monotonic() + 30
    while not index.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert index.exists()  # the first build ran without any tool call
    write_from_another_process(h.root / "state.db", "newer", h.repo, "puffin news")
    manager.invoke_hook("on_session_start", session_id="newer", model="m", platform="cli")
    deadline = time.monotonic() + 30
    while dispatch("project_history", {"operation": "status"}).get("sessions_pending") and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    assert dispatch("project_history", {"operation": "status"})["sessions_indexed"] == 3


# -- a locked state.db -----------------------------------------------------------------------


LOCKER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)
conn.execute("BEGIN " + sys.argv[2])
conn.execute("UPDATE sessions SET title = 'locked' WHERE id = 'old'")
print("locked", flush=True)
sys.stdin.readline()  # holds the lock until the test is done
conn.execute("ROLLBACK")
"""


def hold_lock(db: Path, kind: str) -> subprocess.Popen:
    """Another process holding a write lock on ``db`` for as long as the test runs: a read that
    waited for the lock would never answer, and one that gave up says so."""
    proc = subprocess.Popen([sys.executable, "-c", LOCKER, str(db), kind], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


@pytest.mark.parametrize("kind", ["IMMEDIATE", "EXCLUSIVE"])
def test_a_writer_holding_state_db_does_not_block_a_search(h, kind):
    assert session_ids(search("puffin")) == ["old"]
    write_from_another_process(h.root / "state.db", "newer", h.repo, "puffin two")
    locker = hold_lock(h.root / "state.db", kind)
    try:
        reply = search("puffin")
        # WAL: readers are not blocked by a writer, so the increment itself succeeds.
        assert set(session_ids(reply)) == {"old", "newer"} and "index_status" not in reply
    finally:
        locker.communicate("\n", timeout=30)


def test_a_locked_rollback_journal_state_db_gives_a_stale_answer_or_a_clear_error(h):
    h.close()
    conn = sqlite3.connect(h.root / "state.db")
    assert conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0] == "delete"
    conn.close()
    assert session_ids(search("puffin")) == ["old"]
    locker = hold_lock(h.root / "state.db", "EXCLUSIVE")
    try:
        # An index exists: it answers, and says it may be behind.
        reply = search("puffin")
        assert session_ids(reply) == ["old"] and reply["index_status"] == "stale" and reply["warning"]
        # No index yet: a clear error code.
        for part in (h.root / "plugins").rglob("index.db*"):
            part.unlink()
        reply = search("puffin")
        assert reply["success"] is False and reply["code"] == "db_unreadable"
    finally:
        locker.communicate("\n", timeout=30)


# -- what a read's check costs ---------------------------------------------------------------------


def test_the_check_reads_only_what_changed(tmp_path):
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    for i in range(200):
        h.session(f"s{i:03d}", repo, f"note {i}", f"reply {i}")
    recall = Recall(h.root)
    recall.ensure_fresh()  # the first build
    for _ in range(3):
        recall.ensure_fresh()
        fresh = recall.last_freshness
        assert fresh is not None and fresh.state == "fresh" and fresh.report is not None
        assert fresh.report["messages_read"] == 0 and fresh.report["sessions_updated"] == 0
    h.session("one-more", repo, "a new one", "and its reply")
    recall.ensure_fresh()
    fresh = recall.last_freshness
    assert fresh is not None and fresh.report is not None
    assert fresh.report["sessions_total"] == 201
    assert fresh.report["sessions_updated"] == 1 and fresh.report["messages_read"] == 2
    h.close()


def test_a_process_that_served_many_homes_keeps_only_the_last_few_open(tmp_path):
    def open_files_under(folder: Path) -> list[str]:
        fds = Path("/proc/self/fd")
        targets = []
        for fd in fds.iterdir():
            try:
                targets.append(str(fd.readlink()))
            except OSError:
                continue
        return [t for t in targets if t.startswith(str(folder))]

    for n in range(8):
        h = History(tmp_path / f"home{n}")
        repo = git_init(tmp_path / f"repo{n}")
        h.session("said", repo, "the heron cache")
        h.session("ask", repo)
        h.close()
        assert session_ids(h.recall().search("heron", session_id="ask", mode="keyword")) == ["said"]
    assert open_files_under(tmp_path / "home0") == []
    assert open_files_under(tmp_path / "home7")  # the newest is still watched


def test_a_read_with_nothing_committed_starts_no_refresh_thread(h, monkeypatch):
    """The check before a read is a few ``stat`` calls when nothing changed: it is made in the
    reader's thread, and a refresh thread is started only when there is something to do."""
    recall = Recall(h.root)
    recall.refresh()
    started: list[str] = []
    start = threading.Thread.start

    def counted(thread: threading.Thread) -> None:
        started.append(thread.name)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", counted)
    response = recall.search("puffin", session_id="now", mode="keyword")
    assert session_ids(response) == ["old"] and recall.last_freshness.state == "fresh"
    assert started == []
    h.say("old", ("assistant", "the puffin tag is signed"))
    assert "signed" in recall.search("puffin tag signed", session_id="now", mode="keyword")["results"][0]["snippet"]
    assert started == ["phr-refresh"]
