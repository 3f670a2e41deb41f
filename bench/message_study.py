"""Offline study of the shown message (issue 14, item 4): which message of a result's session to show.

::

    python -m bench.message_study collect bench/out/real/realtalk-tune.json bench/out/message/realtalk-tune.json
    python -m bench.message_study collect bench/out/real/realtalk-heldout.json bench/out/message/realtalk-heldout.json
    python -m bench.message_study study bench/out/message/realtalk-tune.json bench/out/message/realtalk-heldout.json \
        --guard bench/out/message/swe-small-tune.json bench/out/message/swe-small-heldout.json
    python -m bench.message_study collect --mode semantic bench/out/real/realtalk-tune.json \
        bench/out/message/realtalk-tune-semantic.json      # (and the other three files)
    python -m bench.message_study study bench/out/message/realtalk-tune-semantic.json \
        bench/out/message/realtalk-heldout-semantic.json --guard bench/out/message/swe-small-tune-semantic.json \
        bench/out/message/swe-small-heldout-semantic.json

``collect`` builds the set's home as ``bench.eval_retrieval`` does, ranks every positive query in
hybrid (or, with ``--mode semantic``, in semantic mode) through the library
(``search.service.explain``, limit 10) and records, for the first five sessions, every
user/assistant candidate message (a keyword hit or one of the semantic
candidates) with its BM25, cosine, matched query units, the units the messages just before it do
not match (``new``, as :mod:`~project_history_recall.search.message_choice` counts them), length,
whether it is in the first person or announces a next step, and whether it is gold.

``study`` scores rules over those candidates: the library's old rule (0.8 · bm25/max + 0.2 ·
min-max cosine); a grid over ``bm25/max + a·cos + b·coverage + c·length prior + e·new units``
ranked on the FIRST file (tune) and reported on the second; the voice terms on top of the
library's weights (``+ s·first person − n·next step``; with ``--guard``, only the rules that keep
the guard set's tune figure); and, for the library's rule, what the message hit@5 would be
under other definitions (two or three messages shown per result; the best five
messages across the first five results) — figures for a decision, not what the harness counts.
A file collected in semantic mode has no BM25 and no new units: its grid is over the cosine's
weight beside the library's length and voice (``message_choice.SEMANTIC_ALONE``), chosen by the
hits over the tune file's and the guard's tune queries together, since neither set alone speaks
for both kinds of history.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import tempfile
from collections.abc import Callable
from pathlib import Path

from project_history_recall.search.message_choice import (
    LOOK_BACK,
    announces_next_step,
    in_first_person,
    length_prior,
)

from .eval_retrieval import Runner
from .evalset import EvalSet, build_home

TOP = 5


def collect(path: Path, out: Path, mode: str = "hybrid") -> int:
    from project_history_recall.index.entries import SPOKEN_KINDS, searchable_text
    from project_history_recall.search.scope import Filters
    from project_history_recall.search.service import Question, explain
    from project_history_recall.tokenizer import units_in_text

    evalset = EvalSet.load(path)
    queries = []
    with tempfile.TemporaryDirectory(prefix="phr-msg-") as tmp:
        built = build_home(evalset, Path(tmp) / "hermes")
        runner = Runner(built, baseline_scoped=False, semantic=True)
        with contextlib.closing(runner), runner.recall.fresh_reader() as conn:
            resolver = runner.recall.workspace.resolver()
            for q in evalset.queries:
                if q.negative:
                    continue
                asker = runner.recall.workspace.asker(conn, resolver, q.current_session, None)
                ranked = explain(conn, resolver, asker, Question(q.query, mode, 10, Filters(), False),
                                 runner.recall.semantic)
                if ranked is None:
                    continue
                gold = {(sid, built.message_ids[sid][i]) for sid, i in q.gold_messages or ()}
                kw: dict[int, float] = {}
                for h in ranked.keyword:
                    kw[h.message_id] = max(kw.get(h.message_id, 0.0), h.keyword_score)
                cos = {h.message_id: h.semantic_score for h in ranked.vector_hits}
                sessions = []
                for r in ranked.results[:TOP]:
                    rows = conn.execute("SELECT message_id, kind, text, position FROM entries WHERE session_id = ? "
                                        f"AND kind IN ({', '.join('?' * len(SPOKEN_KINDS))}) ORDER BY position",
                                        (r.session_id, *SPOKEN_KINDS)).fetchall()
                    matched = {row["position"]: {u.label for u in units_in_text(
                        ranked.plan.units, searchable_text(row["kind"], row["text"]))}
                        for row in rows if row["message_id"] in kw}
                    sessions.append({"shown": r.best.message_id, "messages": [
                        {"gold": (r.session_id, row["message_id"]) in gold, "kw": kw.get(row["message_id"], 0.0),
                         "cos": cos.get(row["message_id"]), "chars": len(row["text"]), "question": "?" in row["text"],
                         "first_person": in_first_person(row["text"]),
                         "next_step": announces_next_step(row["text"]),
                         "units": len(matched.get(row["position"], ())),
                         "new": len(matched.get(row["position"], set()).difference(
                             *(matched.get(row["position"] - d, ()) for d in range(1, LOOK_BACK + 1))))}
                        for row in rows if row["message_id"] in kw or row["message_id"] in cos]})
                queries.append({"id": q.id, "units": len(ranked.plan.units), "max_kw": max(kw.values(), default=0.0),
                                "cos_range": [min(cos.values(), default=0.0), max(cos.values(), default=1.0)],
                                "sessions": sessions})
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"set": evalset.name, "mode": mode, "queries": queries}), encoding="utf-8")
    return len(queries)


Features = tuple[float, float, float, float, float, float, float]


def features(query: dict, m: dict) -> Features:
    """bm25 / max, min-max cosine, coverage, length prior, new units, first person (0/1), next step (0/1)."""
    low, high = query["cos_range"]
    kw = m["kw"] / query["max_kw"] if query["max_kw"] > 0 else 0.0
    cos = (m["cos"] - low) / (high - low) if m["cos"] is not None and high > low else (1.0 if m["cos"] else 0.0)
    coverage = m["units"] / max(1, query["units"]) if m["kw"] > 0 else 0.0
    new = m["new"] / max(1, query["units"]) if m["kw"] > 0 else 0.0
    return kw, cos, coverage, length_prior(m["chars"]), new, float(m["first_person"]), float(m["next_step"])


Rule = Callable[[Features], float]


def scored(query: dict, rule: Rule) -> list[list[tuple[float, dict]]]:
    return [sorted(((rule(features(query, m)), m) for m in s["messages"]), key=lambda t: -t[0])
            for s in query["sessions"]]


def hits5(queries: list[dict], rule: Rule, per_session: int = 1) -> int:
    """Queries where one of the first ``per_session`` messages of one of the first five sessions is gold."""
    return sum(any(any(m["gold"] for _, m in s[:per_session]) for s in scored(q, rule)) for q in queries)


def hit5(queries: list[dict], rule: Rule, per_session: int = 1) -> float:
    """:func:`hits5` as a share of the queries."""
    return round(hits5(queries, rule, per_session) / len(queries), 3) if queries else 0.0


def across(queries: list[dict], rule: Rule, n: int = 5) -> float:
    """Best ``n`` candidate messages across the first five sessions, by the rule's score."""
    hits = 0
    for q in queries:
        pooled = sorted((t for s in scored(q, rule) for t in s), key=lambda t: -t[0])
        hits += any(m["gold"] for _, m in pooled[:n])
    return round(hits / len(queries), 3) if queries else 0.0


def ceiling(queries: list[dict]) -> float:
    return round(sum(any(m["gold"] for s in q["sessions"] for m in s["messages"]) for q in queries)
                 / max(1, len(queries)), 3)


def _load(path: Path) -> tuple[str, list[dict]]:
    """The mode a file was collected in and its queries."""
    record = json.loads(path.read_text(encoding="utf-8"))
    return record.get("mode", "hybrid"), record["queries"]


def _load_all(paths: list[Path]) -> tuple[str, list[list[dict]]]:
    """The files' common mode and their queries: a rule chosen on one mode's candidates says
    nothing about another's."""
    loaded = [_load(path) for path in paths]
    modes = {mode for mode, _ in loaded}
    if len(modes) > 1:
        raise SystemExit(f"the files were collected in different modes ({', '.join(sorted(modes))})")
    return loaded[0][0], [queries for _, queries in loaded]


def study_semantic(tune: list[dict], held: list[dict], guard_tune: list[dict], guard_held: list[dict]) -> None:
    """Semantic mode's grid (module doc): ``a·cos + length + voice`` with the library's length
    and voice weights, against the bare best cosine."""
    from project_history_recall.search.message_choice import LENGTH, NEXT_STEP, SEMANTIC_ALONE, SPEAKER

    def with_cosine(a: float) -> Rule:
        def rule(f: Features) -> float:
            return a * f[1] + LENGTH * f[3] + SPEAKER * f[5] - NEXT_STEP * f[6]
        return rule

    def line(name: str, rule: Rule) -> str:
        return (f"  {name}: tune {hit5(tune, rule)}, held-out {hit5(held, rule)}"
                + (f"; guard tune {hit5(guard_tune, rule)}, held-out {hit5(guard_held, rule)}" if guard_tune else ""))

    print(f"ceiling: tune {ceiling(tune)}, held-out {ceiling(held)}")
    print(line("best cosine alone", lambda f: f[1]))
    grid = sorted(((hits5(tune + guard_tune, with_cosine(a)), a) for a in (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0)),
                  key=lambda t: (-t[0], abs(math.log(t[1]))))
    print(f"a·cos + {LENGTH}·length + voice, by the hits over both tune files together (ties to the a nearest 1,"
          " where the cosine takes BM25's place unweighted):")
    for pooled, a in grid:
        print(line(f"a={a}", with_cosine(a)) + f" ({pooled}/{len(tune) + len(guard_tune)} tune queries)")
    print(line(f"the library's (message_choice.SEMANTIC_ALONE = {SEMANTIC_ALONE})", with_cosine(SEMANTIC_ALONE)))


def study(tune_path: Path, heldout_path: Path, guard: list[Path] | None = None) -> None:
    """The grids of the module doc. With ``guard`` (a second set's tune and held-out files), a
    voice rule is a candidate only if it keeps the guard's tune figure at least where the rule
    without the voice term has it: the conversation set must not buy its gain from the coding set."""
    from project_history_recall.search.message_choice import DENSE, LENGTH, NEW_UNITS, NEXT_STEP, SPEAKER

    mode, (tune, held, *guards) = _load_all([tune_path, heldout_path, *(guard or [])])
    guard_tune, guard_held = guards if guards else ([], [])
    if mode == "semantic":
        study_semantic(tune, held, guard_tune, guard_held)
        return

    def old(f: Features) -> float:
        return 0.8 * f[0] + 0.2 * f[1]

    print(f"ceiling (a gold message among the candidates of the first five sessions): tune {ceiling(tune)}, "
          f"held-out {ceiling(held)}")
    print(f"old rule 0.8 kw + 0.2 cos: tune {hit5(tune, old)}, held-out {hit5(held, old)}")
    grid = []
    for a, b, c, e in itertools.product((0.1, 0.25, 0.5, 0.75), (0.0, 0.25, 0.5), (0.0, 1.0, 1.5, 2.0, 3.0),
                                        (0.0, 0.25, 0.5, 0.75)):
        def rule(f: Features, a: float = a, b: float = b, c: float = c, e: float = e) -> float:
            return f[0] + a * f[1] + b * f[2] + c * f[3] + e * f[4]
        grid.append((hit5(tune, rule), -c, a, b, e, rule))
    grid.sort(key=lambda t: (t[0], t[1]), reverse=True)
    print("best on tune (kw + a·cos + b·coverage + c·length + e·new units), ties to the smaller length weight:")
    for score, neg_c, a, b, e, rule in grid[:8]:
        print(f"  a={a} b={b} c={-neg_c} e={e}: tune {score}, held-out {hit5(held, rule)}")

    def with_voice(speaker: float, next_step: float) -> Rule:
        def rule(f: Features) -> float:
            return f[0] + DENSE * f[1] + LENGTH * f[3] + NEW_UNITS * f[4] + speaker * f[5] - next_step * f[6]
        return rule

    weights = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
    floor = hit5(guard_tune, with_voice(0.0, 0.0))
    voices = []
    for speaker, next_step in itertools.product(weights, weights):
        rule = with_voice(speaker, next_step)
        guarded = hit5(guard_tune, rule)
        if guarded >= floor:
            voices.append((hit5(tune, rule), guarded, -speaker - next_step, speaker, next_step, rule))
    voices.sort(key=lambda t: t[:3], reverse=True)
    print("the library's a, c, e + s·first person − n·next step, best on tune"
          + (f" among those keeping the guard's tune at {floor} or above" if guard else "")
          + " (ties to the better guard, then the smaller weights):")
    for score, guarded, _, speaker, next_step, rule in voices[:8]:
        print(f"  s={speaker} n={next_step}: tune {score}, held-out {hit5(held, rule)}"
              + (f"; guard tune {guarded}, held-out {hit5(guard_held, rule)}" if guard else ""))

    chosen = with_voice(SPEAKER, NEXT_STEP)
    print(f"the library's rule (search/message_choice.py: a={DENSE} b=0 c={LENGTH} e={NEW_UNITS} s={SPEAKER} "
          f"n={NEXT_STEP}): tune {hit5(tune, chosen)}, held-out {hit5(held, chosen)}")
    for name, queries in (("tune", tune), ("held-out", held)):
        print(f"library rule, {name}: 1 message a result {hit5(queries, chosen)}, 2 {hit5(queries, chosen, 2)}, "
              f"3 {hit5(queries, chosen, 3)}; best 5 across the first five results {across(queries, chosen)}, "
              f"best 10 {across(queries, chosen, 10)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.message_study", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect")
    c.add_argument("set", type=Path)
    c.add_argument("out", type=Path)
    c.add_argument("--mode", choices=("hybrid", "semantic"), default="hybrid",
                   help="the mode whose ranking and candidates are recorded")
    s = sub.add_parser("study")
    s.add_argument("tune", type=Path)
    s.add_argument("heldout", type=Path)
    s.add_argument("--guard", nargs=2, type=Path, metavar=("TUNE", "HELDOUT"),
                   help="a second set's collected tune and held-out files that a voice rule must not lower")
    args = parser.parse_args(argv)
    if args.command == "collect":
        print(f"{collect(args.set, args.out, args.mode)} queries → {args.out}")
    else:
        study(args.tune, args.heldout, args.guard)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
