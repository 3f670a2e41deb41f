"""What a search costs right after a Hermes turn, when every older message has its vector.

``python -m bench.turn_search [--home bench/out/run-M/home] [--turns 12] [--mode hybrid]``

Starts from a copy of the home ``python -m bench.run --size M --embed`` leaves (its index has
every vector). In one long-lived process, as in Hermes (a ``/new`` keeps the process): each
turn is a new session in the large project's folder, a user message and the assistant's reply
written through Hermes's own ``SessionDB``, then a search from the project's asking session
(its own messages are never searched, so a turn written to it leaves the vectors as they are).
That first search finds the turn unindexed, indexes it, embeds its two messages on the spot (a
small backlog) and searches the vectors that now include them; the same search again pays
none of that. Wall and CPU time of both are printed with the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sqlite3
import sys
import time
from collections import Counter
from pathlib import Path

from .corpus import DEFAULT_SEED, SIZES, ensure_corpus
from .machine import machine
from .run import OUT
from .stats import latency_summary


def copy_home(source: Path, target: Path) -> Path:
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target)
    return target


def turns(home: Path, asker: str, runs: int, mode: str) -> dict:
    from hermes_state import SessionDB

    from project_history_recall.recall import Recall

    recall = Recall(home)
    recall.search("warm up", session_id=asker, mode=mode, limit=10)
    db = SessionDB(db_path=home / "state.db")
    timings: dict[str, list[float]] = {"first_search": [], "first_search_cpu": [], "search_again": []}
    statuses = []
    folder = (db.get_session(asker) or {}).get("cwd")
    try:
        for turn in range(runs):
            query = f"retry budget for the upload worker, turn {turn}"
            worked = db.create_session(f"bench_turn_{turn:03d}", "cli", cwd=folder)
            db.append_message(worked, "user", f"what did we decide about the {query}?")
            db.append_message(worked, "assistant", f"we kept the {query} at three attempts with backoff")
            cpu, wall = time.process_time(), time.perf_counter()
            response = recall.search(query, session_id=asker, mode=mode, limit=10)
            timings["first_search"].append(time.perf_counter() - wall)
            timings["first_search_cpu"].append(time.process_time() - cpu)
            statuses.append(response.get("semantic_status"))
            wall = time.perf_counter()
            recall.search(query, session_id=asker, mode=mode, limit=10)
            timings["search_again"].append(time.perf_counter() - wall)
    finally:
        db.close()
    out: dict = {name: {**latency_summary(times), "max_ms": round(max(times) * 1000, 2)}
                 for name, times in timings.items()}
    out["semantic_status"] = dict(Counter(map(str, statuses)))
    out["vectors_of_the_turns"] = _turn_vectors(recall.index.path)
    return out


def _turn_vectors(index_path: Path) -> int:
    """Messages of the bench's turns that got vectors: each turn's two, or the figure is not the one described."""
    with contextlib.closing(sqlite3.connect(index_path)) as conn:
        return conn.execute("SELECT COUNT(DISTINCT message_id) FROM chunks WHERE session_id LIKE 'bench_turn_%' "
                            "AND length(vector) > 0").fetchone()[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.turn_search", description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, default=OUT / "run-M" / "home",
                        help="a home with a complete semantic index (bench.run --size M --embed)")
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--mode", default="hybrid", choices=["hybrid", "semantic", "keyword"])
    args = parser.parse_args(argv)
    if not (args.home / "state.db").exists():
        print(f"no home at {args.home}: run `python -m bench.run --size M --embed` first", file=sys.stderr)
        return 2
    corpus = ensure_corpus(OUT / "corpus-M", DEFAULT_SEED, SIZES["M"], progress=False)
    home = copy_home(args.home, OUT / "turn-search-M" / "home")
    used = sys.argv[1:] if argv is None else argv
    result = {"command": " ".join(["python -m bench.turn_search", *used]),
              "machine": machine(), "mode": args.mode, "turns": args.turns,
              **turns(home, corpus.current["large"], args.turns, args.mode)}
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
