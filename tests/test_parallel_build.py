"""A large build has worker processes prepare sessions while this process writes, and a thread
copy its log into the database (issue 17, item 4): the index is the same whichever process
prepared a session, what is withheld stays out in the workers too, other agents' transcripts
are prepared here, and a worker that dies, a phase that fails in one or a checkpoint that fails
loses nothing. An empty transcript source holds no snapshot of the index that would keep its
log from being copied."""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import subprocess
import sys

import pytest

from agent_transcripts import Claude
from builders import History, git_init, tool_call
from project_history_recall.index import checkpoints, preparing
from project_history_recall.index.edit_phase import EditPhase
from project_history_recall.index.indexer import Indexer
from project_history_recall.index.store import WAL_LIMIT_BYTES
from project_history_recall.recall import Recall
from project_history_recall.services.withheld import Rules, save_rules
from project_history_recall.sources import claude_code

SESSIONS = 16
CLAUDE_UUID = "0b6a1c52-5555-4a5e-9c1e-eeeeeeeeeeee"


@pytest.fixture
def home(tmp_path, monkeypatch) -> History:
    """A repo with 16 Hermes sessions that each write a file and one Claude Code session; one
    Hermes session says something ``<private>``, another is forgotten. Workers take part from
    two sessions on, in chunks of two."""
    monkeypatch.setattr(preparing, "WORKERS", 1)
    monkeypatch.setattr(preparing, "PARALLEL_FROM_SESSIONS", 2)
    monkeypatch.setattr(preparing, "CHUNK_SESSIONS", 2)
    claude_dir = tmp_path / "claude"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude_dir))
    repo = git_init(tmp_path / "repo")
    h = History(tmp_path / "hermes")
    for n in range(SESSIONS):
        sid = f"s{n:02d}"
        words = f"tune the gadget{n} cache" + (" <private>the okapi password</private>" if n == 3 else "")
        h.session(sid, repo, words, title=f"gadget{n}")
        h.say(sid, ("assistant", "", {"tool_calls": [tool_call(
            f"c{n}", "write_file", {"path": str(repo / f"gadget{n}.py"), "content": f"SIZE_{n} = {n}\n"})]}))
        h.say(sid, ("tool", json.dumps({"bytes_written": 10}), {"tool_call_id": f"c{n}", "tool_name": "write_file"}))
    claude = Claude(claude_dir, CLAUDE_UUID, repo)
    claude.user("the claude gadget question")
    claude.say("answered in claude")
    save_rules(h.recall().index.data_dir, Rules(forgotten={"s07": 1.0}))
    yield h
    h.close()


def index_rows(recall: Recall) -> dict:
    """Everything a build writes, but the ids of edit rows (a rebuild numbers them anew)."""
    conn = sqlite3.connect(recall.index.path)
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, entries_fts, row)")
        return {
            "entries": conn.execute("SELECT * FROM entries ORDER BY id").fetchall(),
            "terms": conn.execute("SELECT term, doc, cnt FROM temp.vocab ORDER BY term").fetchall(),
            "sessions": conn.execute("SELECT id, source, cwd, repo_root, branch, title, message_count, entry_count, "
                                     "last_active, signature, content_signature FROM sessions ORDER BY id").fetchall(),
            "edits": conn.execute("SELECT session_id, message_id, seq, path, abs_path, form, new_text, said "
                                  "FROM edits ORDER BY session_id, seq").fetchall(),
        }
    finally:
        conn.close()


def test_sessions_prepared_in_a_worker_are_indexed_as_if_prepared_here(home, monkeypatch):
    recall = home.recall()
    report = recall.refresh()
    in_workers = index_rows(recall)
    # 15 Hermes sessions, in 8 chunks: the first is prepared here while the worker starts, the
    # worker is handed the other 7 at once (CHUNKS_AHEAD is 8), and only a failed worker's
    # chunks are taken back. The Claude session is read here.
    assert preparing.CHUNKS_AHEAD >= 7 and report.prepared_in_workers == SESSIONS - 1 - 2
    monkeypatch.setattr(preparing, "WORKERS", 0)
    assert recall.refresh(force=True).prepared_in_workers == 0
    assert index_rows(recall) == in_workers

    sessions = {row[0] for row in in_workers["sessions"]}
    assert f"claude-{CLAUDE_UUID}" in sessions and "s07" not in sessions and len(sessions) == SESSIONS
    texts = " ".join(str(row) for row in in_workers["entries"])
    assert "okapi" not in texts and "gadget3" in texts
    assert {row[3] for row in in_workers["edits"]} == {f"gadget{n}.py" for n in range(SESSIONS) if n != 7}


class DiesInWorkers:
    """A phase whose extract ends any process but the one that made it."""

    name = "dies"

    def __init__(self) -> None:
        self.made_in = os.getpid()

    def extract(self, session_id, cwd, repo_root, messages):
        if os.getpid() != self.made_in:
            os._exit(3)
        return None

    def store(self, conn, extracted):
        return len(extracted)

    def run(self, conn, reader, *, force=False):
        return 0


def test_a_worker_that_dies_leaves_its_sessions_to_this_process(home, caplog):
    recall = home.recall()
    report = Indexer(recall.index, recall.workspace.source, phases=[EditPhase(), DiesInWorkers()]).refresh()
    assert "a worker process preparing sessions failed" in caplog.text
    assert report.prepared_in_workers == 0 and report.sessions_updated == SESSIONS
    assert report.phases["dies"]["sessions"] == SESSIONS
    rows = index_rows(recall)
    assert len({row[0] for row in rows["edits"]}) == SESSIONS - 1  # every Hermes session's edit


def test_a_worker_that_cannot_start_leaves_its_sessions_to_this_process(home, monkeypatch, caplog):
    started = subprocess.Popen

    def no_worker(args, *rest, **options):
        if args[:2] == [sys.executable, "-c"]:
            raise OSError(errno.EAGAIN, "Resource temporarily unavailable")
        return started(args, *rest, **options)

    monkeypatch.setattr(subprocess, "Popen", no_worker)
    recall = home.recall()
    report = recall.refresh()
    assert "could not start a worker process" in caplog.text
    assert report.prepared_in_workers == 0 and report.sessions_updated == SESSIONS
    assert len({row[0] for row in index_rows(recall)["edits"]}) == SESSIONS - 1
    # its socket and its error file are closed, though the logged traceback keeps its frame
    opened = len(os.listdir("/proc/self/fd"))
    assert recall.refresh(force=True).sessions_updated == SESSIONS
    assert len(os.listdir("/proc/self/fd")) == opened


class EditsFailInWorkers(EditPhase):
    """The edit phase, but its extract raises in any process but the one that made it."""

    def __init__(self) -> None:
        super().__init__()
        self.made_in = os.getpid()

    def __getstate__(self) -> dict:
        return {**super().__getstate__(), "made_in": self.made_in}

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self.made_in = state["made_in"]

    def extract(self, session_id, cwd, repo_root, messages):
        if os.getpid() != self.made_in:
            raise RuntimeError("the edit phase broke in a worker")
        return super().extract(session_id, cwd, repo_root, messages)


def test_a_phase_that_fails_in_a_worker_is_done_after_the_keyword_phase(home, caplog):
    recall = home.recall()
    report = Indexer(recall.index, recall.workspace.source, phases=[EditsFailInWorkers()]).refresh()
    assert report.prepared_in_workers > 0 and report.sessions_updated == SESSIONS
    assert "index phase edits failed on a batch" in caplog.text
    assert "the edit phase broke in a worker" in caplog.text
    rows = index_rows(recall)
    assert len({row[0] for row in rows["edits"]}) == SESSIONS - 1


def test_a_failing_checkpoint_beside_the_build_loses_nothing(home, monkeypatch, caplog):
    recall = home.recall()
    recall.refresh()
    expected = index_rows(recall)
    recall.index.path.unlink()

    def failing(conn: sqlite3.Connection) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(checkpoints, "checkpoint", failing)
    recall = home.recall()
    assert recall.refresh().sessions_updated == SESSIONS  # 15 Hermes sessions and the Claude one
    assert "checkpoint beside the build failed" in caplog.text
    assert index_rows(recall) == expected
    assert recall.index.path.with_name("index.db-wal").stat().st_size <= WAL_LIMIT_BYTES


@pytest.mark.parametrize("transcripts", [0, 1])
def test_a_transcript_source_holds_a_snapshot_of_the_index_only_when_it_has_sessions(tmp_path, monkeypatch,
                                                                                     transcripts):
    claude_dir = tmp_path / "claude"
    (claude_dir / "projects").mkdir(parents=True)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude_dir))
    repo = git_init(tmp_path / "repo")
    h = History(tmp_path / "hermes")
    h.session("s1", repo, "tune the gadget cache")
    if transcripts:
        Claude(claude_dir, CLAUDE_UUID, repo).user("the claude gadget question")
    recall = h.recall()
    recall.refresh()
    source = next(s for s in recall.workspace.sources if s.name == claude_code.NAME)
    with source.read() as reader:
        assert len(reader.signatures()) == transcripts
        other = sqlite3.connect(recall.index.path, timeout=0.1)
        with other:
            other.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('written', 'after the read')")
        busy = other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        other.close()
    h.close()
    assert busy == transcripts


class CannotBeRebuiltInWorkers(EditPhase):
    """The edit phase, but a worker cannot unpickle it."""

    def __setstate__(self, state: dict) -> None:
        raise RuntimeError("this phase cannot be rebuilt in a worker")


def test_what_a_failing_worker_says_goes_to_the_log_not_to_the_hosts_terminal(home, caplog, capfd):
    recall = home.recall()
    report = Indexer(recall.index, recall.workspace.source, phases=[CannotBeRebuiltInWorkers()]).refresh()
    assert report.prepared_in_workers == 0 and report.sessions_updated == SESSIONS
    assert "this phase cannot be rebuilt in a worker" in caplog.text  # the worker's own traceback
    assert "cannot be rebuilt" not in capfd.readouterr().err
