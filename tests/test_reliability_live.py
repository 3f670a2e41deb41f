"""A real Hermes alongside (issue 6 §3): a SessionDB writer appending as fast as it can and a
second one rewinding and retitling, while other processes search, refresh and embed. The
writer never waits on us, searches see what was committed before they started, and two index
writers never overlap."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.stress import live  # noqa: E402 - needs the repo root on sys.path
from bench.stress.fake import embedding_server  # noqa: E402


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    with embedding_server() as server:
        yield live.run(tmp_path_factory.mktemp("live"), server.base_url, seconds=6, baseline_seconds=2,
                       lock_seconds=3)


def test_the_writer_keeps_writing_under_our_load(report):
    # Its latency figures (p50/p99/max against Hermes's 1 s busy timeout) are in
    # docs/reliability.md from bench/stress; here only what cannot depend on the machine.
    load = report["writer_under_load"]
    assert load["appends"] > 100 and load["committed"] == load["appends"], load


def test_a_read_of_ours_never_holds_a_lock_a_hermes_writer_waits_for(tmp_path):
    import sqlite3

    from bench.stress import world
    from hermes_state import SessionDB

    from project_history_recall.recall import Recall

    home = tmp_path / "hermes"
    db = SessionDB(db_path=home / "state.db")
    db.create_session("old", "cli", cwd=str(world.git_init(tmp_path / "repo")))
    db.append_message("old", "user", "before the read", timestamp=1.7e9)
    db.close()
    recall = Recall(home)
    with recall.workspace.source.read() as reader:
        assert reader.signatures()  # our read transaction is open
        writer = sqlite3.connect(home / "state.db", timeout=0, isolation_level=None)  # no waiting at all
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("UPDATE sessions SET title = 'written during our read' WHERE id = 'old'")
        writer.execute("COMMIT")
        writer.close()


def test_searches_answer_and_see_what_was_committed_before_they_started(report):
    assert report["searches"] >= 3 and report["search_errors"] == 0
    assert report["visibility_checked"] >= 3
    assert report["missed_while_fresh"] == 0, report


def test_two_index_writers_never_overlap(report):
    for phase in ("writer_lock_under_load", "writer_lock_contention"):
        locks = report[phase]
        assert locks["holds"] > 0 and locks["processes"] >= 2, locks
        assert locks["overlaps"] == 0 and locks["marker_collisions"] == 0, locks


def test_embedding_waits_out_or_reports_a_busy_writer_lock(tmp_path):
    from bench.stress import world
    from bench.stress.procs import python_c

    from project_history_recall.recall import Recall

    with embedding_server() as server:
        home = live.build_home(tmp_path / "busy", server.base_url, filler=20)
        hold = python_c("import sys, time\nfrom pathlib import Path\n"
                        "from project_history_recall.index.store import Index\n"
                        "with Index(Path(sys.argv[1])).writer(5):\n    print('READY', flush=True)\n"
                        "    time.sleep(8)\n", str(world.data_dir(home)), log=tmp_path / "hold.log")
        try:
            assert hold.wait_line("READY", 30)
            result = Recall(home).embed()
            assert result["semantic_status"] in ("partial", "indexing", "ready"), result
        finally:
            hold.kill()


def test_a_fresh_answer_sees_what_was_committed_before_it_was_asked(tmp_path, monkeypatch):
    import time

    from bench.stress import world
    from hermes_state import SessionDB

    from project_history_recall.index.indexer import Indexer
    from project_history_recall.recall import Recall
    from project_history_recall.services import freshness

    home = tmp_path / "hermes"
    repo = world.git_init(tmp_path / "repo")
    db = SessionDB(db_path=home / "state.db")
    db.create_session("old", "cli", cwd=str(repo))
    db.create_session("now", "cli", cwd=str(repo))
    db.append_message("old", "user", "the first words", timestamp=1.7e9)
    world.write_config(home)
    recall = Recall(home)
    recall.refresh()

    original = Indexer._refresh

    def slow(self, *args, **kwargs):  # a refresh that reads its snapshot, then takes a while to write
        report = original(self, *args, **kwargs)
        time.sleep(1.0)
        return report

    monkeypatch.setattr(Indexer, "_refresh", slow)
    db.append_message("old", "assistant", "alpha token one", timestamp=1.7e9 + 1)
    assert freshness.ensure(recall.workspace, wait=0.1).state == "updating"  # a worker is now running
    db.append_message("old", "user", "zanzibar token two", timestamp=1.7e9 + 2)  # after that worker's snapshot
    # (SessionDB.close() would wait here: its WAL TRUNCATE waits for the worker's read transaction.)
    reply = recall.answer(lambda: recall.search("zanzibar", session_id="now", mode="keyword"))
    db.close()
    found = [r["session_id"] for r in reply["results"]]
    assert found == ["old"] or reply.get("index_status") == "updating", reply
