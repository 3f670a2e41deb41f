"""The benchmark corpus generator: same seed, same content; written through Hermes's APIs as planned."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import corpus as bc  # noqa: E402 - needs the repo root on sys.path

TINY = bc.Size("tiny", 40, 800)


def test_plan_and_messages_are_deterministic():
    a, b = bc.plan_sessions(7, TINY), bc.plan_sessions(7, TINY)
    assert a == b
    assert [bc.session_messages(7, p) for p in a] == [bc.session_messages(7, p) for p in b]
    assert bc.make_queries(7) == bc.make_queries(7)
    assert bc.plan_sessions(8, TINY) != a


def test_plan_shape():
    plans = bc.plan_sessions(7, TINY)
    assert len(plans) == TINY.sessions
    assert sum(p.n_messages for p in plans) == TINY.messages
    assert {p.current for p in plans if p.current} == {"large", "small"}
    assert {"en", "zh", "mixed"} <= {p.lang for p in plans}
    by_project = {p.project for p in plans}
    assert {"payments", "docs-site", "home", "tinykv"} <= by_project
    titles = [p.title.lower() for p in plans if p.title]
    assert len(titles) == len(set(titles))
    queries = bc.make_queries(7)
    assert len(queries) == 200 and {q["lang"] for q in queries} == {"en", "zh", "code"}


def _dump(root: Path) -> list[tuple]:
    conn = sqlite3.connect(root / "hermes" / "state.db")
    try:
        rows = conn.execute(
            "SELECT s.id, s.source, s.title, replace(s.cwd, ?, ''), s.started_at, s.archived, s.parent_session_id, "
            "m.role, m.content, m.tool_calls, m.active FROM sessions s LEFT JOIN messages m ON m.session_id = s.id "
            "ORDER BY s.id, m.id", (str(root),)).fetchall()
    finally:
        conn.close()
    return rows


def test_written_corpus_is_deterministic_and_indexable(tmp_path):
    first = bc.write_corpus(tmp_path / "one", 7, TINY, progress=False)
    second = bc.write_corpus(tmp_path / "two", 7, TINY, progress=False)
    assert _dump(first.root) == _dump(second.root)
    assert first.sessions == TINY.sessions and first.current == second.current
    assert (first.work / "oss" / "tinykv-compaction" / ".git").is_file()  # a linked worktree

    from hermes_state import SessionDB

    db = SessionDB(db_path=first.hermes_home / "state.db", read_only=True)
    try:
        plan = next(p for p in bc.plan_sessions(7, TINY) if not p.rewind and not p.current and p.n_messages >= 4)
        stored = db.get_messages(plan.id)
        assert [(m["role"], m["content"]) for m in stored] == [
            (m["role"], m["content"]) for m in bc.session_messages(7, plan)]
    finally:
        db.close()

    from project_history_recall.recall import Recall

    recall = Recall(first.hermes_home)
    report = recall.refresh()
    assert report.sessions_total == TINY.sessions
    response = recall.search("invoice", session_id=first.current["large"], mode="keyword", limit=10)
    assert response["project"]["kind"] == "explicit"


def test_ensure_reuses_a_matching_corpus(tmp_path):
    root = tmp_path / "c"
    made = bc.ensure_corpus(root, 7, TINY, progress=False)
    marker = (root / bc.MARKER).stat().st_mtime_ns
    again = bc.ensure_corpus(root, 7, TINY, progress=False)
    assert again.current == made.current and (root / bc.MARKER).stat().st_mtime_ns == marker
    other = bc.ensure_corpus(root, 8, TINY, progress=False)
    assert other.seed == 8
