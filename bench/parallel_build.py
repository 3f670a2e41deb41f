"""Would two cores give the keyword index 50,000 messages/s? A measurement, not the product's build.

``python -m bench.parallel_build --size M [--workers 2] [--start spawn] [--ship-messages]``

Times the build's per-message path: Hermes's messages read (``HermesReader.messages``), their
entries (``session_entries``) and tokens (``entry_tokens``), then the two ``executemany`` per session
the indexer runs, into a fresh index of the product's schema, committing every 200 sessions. It runs
once in this process (``--workers 0``), or with worker processes doing the reading, entries and tokens
for chunks of 50 sessions while this process only writes (in order, as ``Pool.imap`` hands them back).
``--ship-messages`` also sends each session's messages back to the writer, as the edit phase would
need them there. The session rows, the edit phase, withholding and other agents' transcripts are
left out of both, so the figures compare the two like for like, and neither is the product's build
time (``bench.run`` and ``bench.index_profile`` time that).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sqlite3
import time
from pathlib import Path

from .corpus import DEFAULT_SEED, SIZES, ensure_corpus
from .machine import machine
from .run import OUT, prepare_home

CHUNK_SESSIONS = 50
CHUNKS_PER_COMMIT = 4
INSERT_ENTRIES = ("INSERT INTO entries(id, session_id, message_id, position, kind, role, tool_name, timestamp, "
                  "text, context) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
INSERT_TOKENS = "INSERT INTO entries_fts(rowid, tokens) VALUES (?, ?)"

_state_db: Path | None = None
_ship = False


def _init(state_db: Path, ship: bool) -> None:
    global _state_db, _ship
    _state_db, _ship = state_db, ship


def prepare(session_ids: list[str]) -> list[tuple]:
    """(session id, its messages as tuples when shipped, entry rows, tokens) for each session."""
    from project_history_recall.index.entries import entry_tokens, session_entries
    from project_history_recall.sources.hermes import HermesSource

    assert _state_db is not None
    out = []
    with HermesSource(_state_db).read() as reader:
        sessions = reader.sessions(session_ids)
        for sid in session_ids:
            messages = reader.messages(sid)
            entries = session_entries(sessions[sid], messages)
            shipped = [(m.id, m.role, m.content, m.timestamp, tuple((c.id, c.name, c.arguments) for c in m.tool_calls),
                        m.tool_name, m.tool_call_id) for m in messages] if _ship else None
            out.append((sid, shipped,
                        [(sid, e.message_id, e.position, e.kind, e.role, e.tool_name, e.timestamp, e.text, e.context)
                         for e in entries],
                        [entry_tokens(e.kind, e.text) for e in entries]))
    return out


def write(conn: sqlite3.Connection, prepared: list[tuple], next_id: int) -> int:
    from project_history_recall.sources import SourceMessage, ToolCall

    for _sid, shipped, rows, tokens in prepared:
        if shipped is not None:  # rebuilt as the edit phase would be given them
            assert len([SourceMessage(i, role, content, ts, tuple(ToolCall(*c) for c in calls), name, call_id)
                        for i, role, content, ts, calls, name, call_id in shipped]) == len(shipped)
        conn.executemany(INSERT_ENTRIES, [(next_id + i, *row) for i, row in enumerate(rows)])
        conn.executemany(INSERT_TOKENS, [(next_id + i, t) for i, t in enumerate(tokens)])
        next_id += len(rows)
    return next_id


def run(home: Path, workers: int, start: str, ship: bool) -> dict:
    from project_history_recall.recall import Recall
    from project_history_recall.sources.hermes import HermesSource

    state_db = home / "state.db"
    with HermesSource(state_db).read() as reader:
        ids = sorted(reader.signatures())
    chunks = [ids[i:i + CHUNK_SESSIONS] for i in range(0, len(ids), CHUNK_SESSIONS)]
    index = Recall(home).workspace.index
    index.connect().close()  # the product's schema, empty
    conn = sqlite3.connect(index.path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    _init(state_db, ship)
    wall, cpu = time.perf_counter(), time.process_time()
    next_id = 1

    def written(i: int, prepared: list[tuple]) -> None:
        nonlocal next_id
        if i % CHUNKS_PER_COMMIT == 0:
            conn.execute("BEGIN")
        next_id = write(conn, prepared, next_id)
        if i % CHUNKS_PER_COMMIT == CHUNKS_PER_COMMIT - 1 or i == len(chunks) - 1:
            conn.execute("COMMIT")

    if workers:
        with multiprocessing.get_context(start).Pool(workers, _init, (state_db, ship)) as pool:
            for i, prepared in enumerate(pool.imap(prepare, chunks)):
                written(i, prepared)
    else:
        for i, chunk in enumerate(chunks):
            written(i, prepare(chunk))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    messages = sqlite3.connect(f"{state_db.resolve().as_uri()}?mode=ro", uri=True).execute(
        "SELECT COUNT(*) FROM messages WHERE active = 1").fetchone()[0]
    entries = conn.execute("SELECT COUNT(*) FROM entries").fetchone()[0]
    conn.close()
    return {"workers": workers, "start": start if workers else None, "ship_messages": ship,
            "sessions": len(ids), "messages": messages, "entries": entries, "wall_seconds": round(wall, 3),
            "writer_cpu_seconds": round(cpu, 3), "messages_per_s": round(messages / wall)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.parallel_build", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="M")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--workers", type=int, default=2, help="worker processes (0: all in this one)")
    parser.add_argument("--start", choices=("spawn", "fork", "forkserver"), default="spawn")
    parser.add_argument("--ship-messages", action="store_true", help="send each session's messages to the writer")
    args = parser.parse_args(argv)
    corpus = ensure_corpus(OUT / f"corpus-{args.size}", args.seed, SIZES[args.size])
    home = prepare_home(corpus, OUT / f"parallel-build-{args.size}")
    result = run(home, args.workers, args.start, args.ship_messages)
    print(json.dumps({"machine": machine(), **result}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
