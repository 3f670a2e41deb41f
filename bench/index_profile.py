"""The keyword index build and the first check after a commit, timed by CPU as well as wall.

``python -m bench.index_profile --size M [--profile] [--checks 9] [--turns 15] [--digest] [--run-dir NAME]
[--workers N]``

``bench.run`` times the same build in wall seconds, which a shared machine skews; this
reports ``time.process_time`` beside it (and the CPU time of the build's worker processes), so figures taken while
other work runs stay comparable, and ``--profile`` prints where the build's time goes
(cProfile, by own time). The first check after a commit is timed after a commit to
``state.db`` that changes no session (a row in a side table): every session is compared and
nothing is rewritten, which is the cost each search pays right after Hermes writes a turn
that touches no indexed session. ``--turns`` then times the check after a Hermes turn (a
message appended to the large project's asking session through Hermes's own
``SessionDB.append_message``, which also updates its session's row: one session is found
changed and rewritten), and a keyword search right after a turn and again: the common case,
Hermes writes the turn that asks, then the agent's tool call searches. ``--digest`` prints a
hash of what the build wrote (the entries table and every FTS5 term's per-row counts) and of
the edit chain, so two versions of the indexer can be shown to write the same index.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import json
import pstats
import resource
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from .corpus import DEFAULT_SEED, SIZES, ensure_corpus
from .run import INDEX_DIR, OUT, prepare_home


def build(home: Path, profile: bool) -> dict:
    from project_history_recall.recall import Recall

    recall = Recall(home)
    profiler = cProfile.Profile() if profile else None
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu, wall = time.process_time(), time.perf_counter()
    if profiler:
        profiler.enable()
    report = recall.refresh()
    if profiler:
        profiler.disable()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    ended = resource.getrusage(resource.RUSAGE_CHILDREN)
    workers_cpu = ended.ru_utime + ended.ru_stime - children.ru_utime - children.ru_stime
    result = {"messages": report.messages_read, "entries": report.entries_written,
              "cpu_seconds": round(cpu, 3), "wall_seconds": round(wall, 3),
              # getattr: the same script times older versions of the indexer too (A/B runs)
              "prepared_in_workers": getattr(report, "prepared_in_workers", 0),
              "workers_cpu_seconds": round(workers_cpu, 3),
              "keyword_wall_seconds": report.keyword_seconds, "phases": report.phases,
              "messages_per_cpu_s": round(report.messages_read / cpu),
              "messages_per_s": round(report.messages_read / wall)}
    if profiler:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(30)
        result["profile"] = out.getvalue()
    return result


def _touch(state_db: Path) -> None:
    """A commit to state.db that changes no session."""
    conn = sqlite3.connect(state_db)
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_touch (at REAL)")
        conn.execute("INSERT INTO bench_touch VALUES (?)", (time.time(),))
        conn.commit()
    finally:
        conn.close()


def first_checks(home: Path, runs: int) -> dict:
    from project_history_recall.recall import Recall

    recall = Recall(home)
    recall.refresh()
    pairs = []
    for _ in range(runs):
        _touch(home / "state.db")
        cpu, wall = time.process_time(), time.perf_counter()
        report = recall.refresh()
        pairs.append((time.process_time() - cpu, time.perf_counter() - wall))
        if not report.compared or report.changed:
            raise RuntimeError(f"the check after a side-table commit should compare and change nothing: {report}")
    return _summary(pairs)


def _summary(pairs: list[tuple[float, float]]) -> dict:
    """(CPU, wall) seconds per run → median, slowest and fastest, in ms."""
    walls = [w for _, w in pairs]
    return {"runs": len(pairs), "p50_ms": round(statistics.median(walls) * 1000, 2),
            "cpu_p50_ms": round(statistics.median(c for c, _ in pairs) * 1000, 2),
            "max_ms": round(max(walls) * 1000, 2), "min_ms": round(min(walls) * 1000, 2)}


def after_turns(home: Path, asker: str, runs: int) -> dict:
    """In one long-lived process, ``runs`` Hermes turns (a user message appended to the asking
    session through ``SessionDB.append_message``), each followed by a ``refresh()`` (the
    check), then ``runs`` more, each followed by a keyword search from that session (what the
    agent's tool call pays right after Hermes wrote the turn) and the same search again."""
    from hermes_state import SessionDB

    from project_history_recall.recall import Recall

    recall = Recall(home)
    recall.refresh()
    db = SessionDB(db_path=home / "state.db")
    timings: dict[str, list[tuple[float, float]]] = {"check": [], "search": [], "search_again": []}

    def timed(name: str, call: Callable[..., object], *args: object, **kwargs: object) -> object:
        cpu, wall = time.process_time(), time.perf_counter()
        result = call(*args, **kwargs)
        timings[name].append((time.process_time() - cpu, time.perf_counter() - wall))
        return result

    try:
        for turn in range(runs):
            db.append_message(asker, "user", f"turn {turn}: what did we decide about the retry budget?")
            report = timed("check", recall.refresh)
            if getattr(report, "sessions_updated", None) != 1:
                raise RuntimeError(f"a turn should rewrite its one session: {report}")
        for turn in range(runs):
            query = f"retry budget decision {turn}"
            db.append_message(asker, "user", f"turn {turn}: {query}?")
            for name in ("search", "search_again"):
                timed(name, recall.search, query, session_id=asker, mode="keyword", limit=10)
    finally:
        db.close()
    return {name: _summary(pairs) for name, pairs in timings.items()}


def _hash_rows(home: Path, *queries: str, setup: tuple[str, ...] = ()) -> str:
    """A sha256 over every row of ``queries``, in order, on the home's index."""
    conn = sqlite3.connect(home / INDEX_DIR / "index.db")
    try:
        for statement in setup:
            conn.execute(statement)
        h = hashlib.sha256()
        for query in queries:
            for row in conn.execute(query):
                h.update(repr(row).encode())
        return h.hexdigest()
    finally:
        conn.close()


def digest(home: Path) -> str:
    """A hash of the entries table and of every FTS5 term's document and occurrence counts."""
    return _hash_rows(home,
                      "SELECT id, session_id, message_id, position, kind, role, tool_name, timestamp, "
                      "text, context FROM entries ORDER BY id",
                      "SELECT term, doc, cnt FROM temp.vocab ORDER BY term",
                      "SELECT id, signature, content_signature, message_count, entry_count, repo_root "
                      "FROM sessions ORDER BY id",
                      setup=("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, entries_fts, row)",))


def edits_digest(home: Path) -> str:
    """A hash of the edit chain the build wrote (every row of ``edits``, ids included, and the
    content signature each session's edits were extracted from): apart from :func:`digest`,
    whose figures the keyword index's history quotes."""
    return _hash_rows(home,
                      "SELECT id, session_id, message_id, seq, timestamp, path, abs_path, form, old_text, "
                      "new_text, raw, said, said_message_id FROM edits ORDER BY id",
                      "SELECT session_id, content_signature FROM edit_state ORDER BY session_id")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.index_profile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="M")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--profile", action="store_true", help="print the build's cProfile, by own time")
    parser.add_argument("--checks", type=int, default=9, help="first checks after a commit to time (0: none)")
    parser.add_argument("--turns", type=int, default=15, help="checks after a Hermes turn to time (0: none)")
    parser.add_argument("--digest", action="store_true",
                        help="print hashes of what the build wrote (keyword index, edit chain)")
    parser.add_argument("--run-dir", default=None,
                        help="folder under bench/out for the home (default index-profile-<size>); two builds "
                             "run side by side, so that both see the same load, need two")
    parser.add_argument("--workers", type=int, default=None,
                        help="worker processes preparing sessions in a large build (default: the product's, "
                             "one per core beyond the first, at most two; 0: none)")
    args = parser.parse_args(argv)
    if args.workers is not None:
        from project_history_recall.index import preparing

        preparing.WORKERS = args.workers
    corpus = ensure_corpus(OUT / f"corpus-{args.size}", args.seed, SIZES[args.size])
    home = prepare_home(corpus, OUT / (args.run_dir or f"index-profile-{args.size}"))
    result = build(home, args.profile)
    profile = result.pop("profile", None)
    if args.checks:
        result["first_check_after_commit"] = first_checks(home, args.checks)
    if args.digest:
        result["digest"] = digest(home)
        result["edits_digest"] = edits_digest(home)
    if args.turns:  # after the digests: the turns add messages to the home
        result["after_turn"] = after_turns(home, corpus.current["large"], args.turns)
    print(json.dumps(result, indent=1))
    if profile:
        print(profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
