"""What a long Chinese question costs at M: MADial-Bench's chat lines asked of M's large project.

``python -m bench.long_questions [--home bench/out/run-M/home] [--rounds 3]``

M's own query set has no question of more than 24 units; a Chinese chat line is a median 58
(every bigram is one), and each unit costs the keyword search lookups. The questions are the
committed held-out set's (``bench/datasets/madial-zh-heldout.json``), asked from the large
project's asking session of the home ``python -m bench.run --size M --embed`` leaves, so they
find other topics' messages: what is measured is the cost, not the answers. Prints the first
pass and each question's fastest of ``--rounds`` passes (:func:`~bench.stats.best_of_rounds`),
with the machine.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .corpus import DEFAULT_SEED, SIZES, ensure_corpus
from .evalset import EvalSet
from .machine import machine
from .run import OUT, search_rounds
from .stats import best_of_rounds, latency_summary

QUESTIONS = Path(__file__).parent / "datasets" / "madial-zh-heldout.json"


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
    questions = [q.query for q in EvalSet.load(QUESTIONS).queries]
    used = sys.argv[1:] if argv is None else argv
    result = {"command": " ".join(["python -m bench.long_questions", *used]), "machine": machine(),
              "questions": len(questions), "rounds": args.rounds,
              **{mode: passes(args.home, corpus.current["large"], questions, mode, args.rounds)
                 for mode in ("keyword", "hybrid")}}
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
