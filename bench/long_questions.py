"""What a long question costs at M: Chinese chat lines and pasted tool output, asked of M's large project.

``python -m bench.long_questions [--home bench/out/run-M/home] [--rounds 3]``

M's own query set has no question of more than 24 units; each unit costs the keyword search
lookups. Two sets of 88 long questions, asked from the large project's asking session of the
home ``python -m bench.run --size M --embed`` leaves:

* ``chinese``: MADial-Bench's chat lines (the committed ``bench/datasets/madial-zh-heldout.json``),
  a median 58 units (every bigram is one); they find other topics' messages;
* ``pasted``: what a user pastes from a terminal: the first 1,500 characters of every fourth of
  the home's first 352 tool outputs of at least 1,000 characters (35 to 64 units).

What is measured is the cost, not the answers. Prints the first pass and each question's fastest
of ``--rounds`` passes (:func:`~bench.stats.best_of_rounds`), with the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sqlite3
import sys
from pathlib import Path

from .corpus import DEFAULT_SEED, SIZES, ensure_corpus
from .evalset import EvalSet
from .machine import machine
from .run import OUT, search_rounds
from .stats import best_of_rounds, latency_summary

CHINESE = Path(__file__).parent / "datasets" / "madial-zh-heldout.json"
PASTED_CHARS = 1_500


def pasted(state_db: Path, n: int = 88) -> list[str]:
    """Tool outputs as a user would paste them (the text of Hermes's ``{"content": ...}`` wrapper)."""
    with contextlib.closing(sqlite3.connect(f"file:{state_db}?mode=ro", uri=True)) as conn:
        rows = conn.execute("SELECT content FROM messages WHERE role = 'tool' AND length(content) >= 1000 "
                            "ORDER BY id LIMIT ?", (n * 4,)).fetchall()
    texts = []
    for (content,) in rows:
        with contextlib.suppress(ValueError, AttributeError):
            content = json.loads(content).get("content", content)
        texts.append(content[:PASTED_CHARS])
    return texts[::4]


def passes(home: Path, asker: str, questions: list[str], mode: str, rounds: int) -> dict:
    from project_history_recall.recall import Recall

    timings = search_rounds(Recall(home), asker, questions, mode, rounds)
    return {"first_pass": latency_summary(timings[0]), "fastest_of_rounds": latency_summary(best_of_rounds(timings))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.long_questions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, default=OUT / "run-M" / "home",
                        help="a home with a complete semantic index (bench.run --size M --embed)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if not (args.home / "state.db").exists():
        print(f"no home at {args.home}: run `python -m bench.run --size M --embed` first", file=sys.stderr)
        return 2
    corpus = ensure_corpus(OUT / "corpus-M", DEFAULT_SEED, SIZES["M"], progress=False)
    sets = {"chinese": [q.query for q in EvalSet.load(CHINESE).queries], "pasted": pasted(args.home / "state.db")}
    used = sys.argv[1:] if argv is None else argv
    result = {"command": " ".join(["python -m bench.long_questions", *used]), "machine": machine(),
              "rounds": args.rounds}
    for name, questions in sets.items():
        result[name] = {"questions": len(questions), **{
            mode: passes(args.home, corpus.current["large"], questions, mode, args.rounds)
            for mode in ("keyword", "hybrid")}}
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
