"""Fit the confidence tables of ``search/confidence.py`` on tune sets; report held-out figures.

::

    python -m bench.fit_confidence TUNE.json [TUNE2.json ...] [--heldout SET.json ...]

For every set: the home built as ``bench.eval_retrieval`` builds it (indexed, embedded),
every query asked in each mode through the library's own ranking
(``search.service.explain``, ``limit=10``), and every returned result recorded with its
:class:`~project_history_recall.search.confidence.Signals` and whether its session is gold
(cached in ``bench/out/confidence/<set>.json``; ``--reuse`` reads the cache). Then per table
(hybrid / keyword / semantic: the one the library would pick for what ran) a logistic
regression over that table's features (standardised, gradient descent, L2 1e-3) on the rows
of the TUNE sets only, and its thresholds (see the module doc of ``confidence.py``).
Printed: the table to paste into ``MODELS``, and per set the share of negative controls
flagged ("every result low": the "no confident match" answer) by category, and the share of
queries whose first result is right that got flagged.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from .eval_retrieval import Runner
from .evalset import EvalSet, build_home

OUT = Path("bench/out/confidence")
MODES = ("hybrid", "keyword", "semantic")
#: Per table: its features and its rows ("first": each query's first result, label "it is
#: right"; "all": every returned result, label "its session is gold"; "contrast": negative
#: controls' first results against right first results, "contrast-all": every result of a
#: negative control against right first results, each then scaled to the first results, see
#: :func:`calibrated`). Chosen on the tune sets (mean share of negatives flagged at < 5 %
#: first-right flagged, among the tables that keep tests/test_confidence.py's clear match
#: ``high`` and its unknown topic "no confident match"): 2026-12-04 noon, the base features
#: with "first" rows, + ``missing``, + ``query_units``; evening, each row kind, + ``agree``,
#: - ``keyword_share``, - ``cosine_gap`` (and IDF-weighted coverage, the IDF share of the missing
#: units, rarest unit matched, missing × log length: none helped on tune; 2026-12-06, the best
#: single entry's coverage among a result's three strongest: hybrid tune 0.47 / 0.38 → 0.37 / 0.38,
#: keyword 0.37 / 0.43 → 0.40 / 0.43 flagged, not kept: see docs/benchmarks.md); 2026-12-07,
#: + ``elsewhere`` in both, hybrid - ``keyword_share`` (with it, the unknown topic's semantic-only
#: results rose above ``low``): hybrid tune 0.47 / 0.38 → 0.47 / 0.57, keyword 0.37 / 0.43 → 0.32 / 0.52;
#: then its words and code-like units apart: hybrid 0.44 / 0.71, keyword 0.32 / 0.62. Stop 38, other-project
#: controls from the same split: every refit of the hybrid table (these features, without ``missing``,
#: ``agree``, ``margin``, ``top_cosine`` or ``elsewhere_words``; rows "contrast-all", "first", "all"; signs held
#: to the evidence) loses the unknown topic; with "nowhere" copies of the other-project rows (``elsewhere`` 0)
#: it keeps it at 0.39 / 0.62; the tables of 2026-12-07 give 0.46 / 0.71 there and are kept.
TABLES = {
    "hybrid": (("coverage", "keyword_per_unit", "margin", "session_cosine", "top_cosine", "missing", "agree",
                "elsewhere_words", "elsewhere_code"), "contrast"),
    "keyword": (("coverage", "keyword_per_unit", "keyword_share", "margin", "missing", "elsewhere_words",
                 "elsewhere_code"), "contrast-all"),
    "semantic": (("session_cosine", "top_cosine", "cosine_gap"), "all"),
}
MAX_HIT_FLAG = 0.05
HIGH_PRECISION = 0.90


def collect(path: Path) -> dict:
    from project_history_recall.search.scope import Filters
    from project_history_recall.search.service import Question, explain
    from project_history_recall.search.temporal import said_within

    evalset = EvalSet.load(path)
    record: dict = {"set": evalset.name, "queries": []}
    with tempfile.TemporaryDirectory(prefix="phr-conf-") as tmp:
        built = build_home(evalset, Path(tmp) / "hermes")
        runner = Runner(built, baseline_scoped=False, semantic=True)
        recall = runner.recall
        with contextlib.closing(runner), recall.fresh_reader() as conn:
            resolver = recall.workspace.resolver()
            for q in evalset.queries:
                asker = recall.workspace.asker(conn, resolver, q.current_session, None)
                per_mode: dict[str, dict] = {}
                for mode in MODES:
                    ranked = explain(conn, resolver, asker, Question(q.query, mode, 10, Filters(), False),
                                     recall.semantic)
                    if ranked is None:
                        per_mode[mode] = {"table": None, "results": []}
                        continue
                    table = next(k for k, m in _models().items() if m is ranked.model)
                    per_mode[mode] = {"table": table, "results": [
                        [r.session_id, r.session_id in q.gold_sessions, asdict(s),
                         ranked.window is not None and said_within(r, ranked.window)]
                        for r, s in zip(ranked.results, ranked.signals, strict=True)]}
                record["queries"].append({"id": q.id, "category": q.category, "negative": q.negative,
                                          "modes": per_mode})
    return record


def _models() -> dict:
    from project_history_recall.search.confidence import MODELS

    return MODELS


# -- fitting -------------------------------------------------------------------------------


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


def fit(rows: list[tuple[dict, bool]], features: Sequence[str], steps: int = 4000, lr: float = 0.2,
        l2: float = 1e-3) -> dict:
    import numpy as np

    x = np.array([[r[f] for f in features] for r, _ in rows], dtype=float)
    y = np.array([1.0 if label else 0.0 for _, label in rows])
    mu, sd = x.mean(0), np.maximum(x.std(0), 1e-3)
    z = (x - mu) / sd
    w = np.zeros(z.shape[1])
    b = 0.0
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(z @ w + b)))
        g = p - y
        w -= lr * (z.T @ g / len(y) + l2 * w)
        b -= lr * float(g.mean())
    return {"features": tuple(features), "mean": [round(float(v), 5) for v in mu],
            "std": [round(float(v), 5) for v in sd], "weights": [round(float(v), 4) for v in w],
            "bias": round(float(b), 4)}


def calibrated(model: dict, rows: list[tuple[dict, bool]]) -> dict:
    """``model``'s linear score refitted to ``rows``' labels, ``σ(a · z + c)``, folded into its
    weights and bias: the order of the scores is kept, their level becomes a probability."""
    z = [_logit(model, sig) for sig, _ in rows]
    mean = sum(z) / len(z)
    sd = max(1e-3, (sum((v - mean) ** 2 for v in z) / len(z)) ** 0.5)
    platt = fit([({"z": v}, label) for v, (_, label) in zip(z, rows, strict=True)], ["z"])
    a = platt["weights"][0] / sd
    return model | {"weights": [round(w * a, 4) for w in model["weights"]],
                    "bias": round(platt["bias"] + a * (model["bias"] - mean), 4)}


def _logit(model: dict, signals: dict) -> float:
    return model["bias"] + sum(w * (signals[f] - m) / s for f, m, s, w in
                               zip(model["features"], model["mean"], model["std"], model["weights"], strict=True))


def probability(model: dict, signals: dict) -> float:
    return _sigmoid(_logit(model, signals))


def _queries(records: list[dict], mode: str, table: str) -> list[tuple[str, dict, list[tuple[bool, dict, bool]]]]:
    """(set, query, [(gold?, signals, said inside the question's time?)]) for the queries
    whose answer used ``table``."""
    out = []
    for rec in records:
        for q in rec["queries"]:
            m = q["modes"][mode]
            if m["table"] == table and m["results"]:
                out.append((rec["set"], q, [(gold, sig, inside) for _sid, gold, sig, inside in m["results"]]))
    return out


def flagged_rates(model: dict, low: float, queries: list) -> dict:
    """Negatives with every result below ``low`` (by category), and first-right queries flagged;
    a result said inside the question's time is never low (``temporal.vouch``), as in the product."""
    neg: dict[str, list[bool]] = defaultdict(list)
    hits: list[bool] = []
    for _set, q, results in queries:
        flag = all(probability(model, sig) < low and not inside for _g, sig, inside in results)
        if q["negative"]:
            neg[q["category"]].append(flag)
        elif results[0][0]:
            hits.append(flag)
    all_neg = [f for fs in neg.values() for f in fs]
    return {"negatives": len(all_neg), "negatives_flagged": _share(all_neg),
            "by_category": {c: f"{sum(fs)}/{len(fs)}" for c, fs in sorted(neg.items())},
            "true_first": len(hits), "true_first_flagged": _share(hits)}


def _share(flags: list[bool]) -> float | None:
    return round(sum(flags) / len(flags), 4) if flags else None


def thresholds(model: dict, queries: list) -> tuple[float, float]:
    """``low``: the largest threshold flagging < 5 % of first-right queries on every tune set;
    ``high``: the smallest with ≥ 90 % of first results right above it (pooled)."""
    sets = sorted({s for s, _q, _r in queries})
    low = 0.0
    for t in [i / 400 for i in range(401)]:
        ok = True
        for name in sets:
            rates = flagged_rates(model, t, [x for x in queries if x[0] == name])
            if rates["true_first"] and (rates["true_first_flagged"] or 0) >= MAX_HIT_FLAG:
                ok = False
        if not ok:
            break
        low = t
    firsts = [(probability(model, results[0][1]), results[0][0]) for _s, _q, results in queries]
    high = 1.0
    for t in sorted({round(p, 3) for p, _ in firsts}, reverse=True):
        above = [right for p, right in firsts if p >= t]
        if len(above) >= 10 and sum(above) / len(above) >= HIGH_PRECISION:
            high = t
        elif len(above) >= 10:
            break
    return round(low, 4), max(high, round(low, 4))


def _wrapped(values: Sequence[float]) -> str:
    """A tuple literal of ``values``, six to a line (the module's lines stay under 120 characters)."""
    rows = [", ".join(repr(v) for v in values[i:i + 6]) for i in range(0, len(values), 6)]
    return "(" + ",\n              ".join(rows) + ("," if len(values) == 1 else "") + ")"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fit_confidence", description=__doc__.split("\n\n")[0])
    parser.add_argument("tune", nargs="+", type=Path, metavar="TUNE.json")
    parser.add_argument("--heldout", nargs="*", type=Path, default=[], metavar="SET.json")
    parser.add_argument("--reuse", action="store_true", help="read the cached signals instead of re-running")
    parser.add_argument("--json", type=Path, help="write the fitted tables and the figures here")
    parser.add_argument("--keep-tables", action="store_true",
                        help="fit nothing: the library's tables with their thresholds on the TUNE sets "
                             "(how confidence.py's low_cjk was read off the Chinese tune set)")
    args = parser.parse_args(argv)

    records: dict[str, dict] = {}
    for path in [*args.tune, *args.heldout]:
        cache = OUT / f"{EvalSet.load(path).name}.json" if args.reuse else None
        if cache is not None and cache.exists():
            records[str(path)] = json.loads(cache.read_text(encoding="utf-8"))
            continue
        record = collect(path)
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / f"{record['set']}.json").write_text(json.dumps(record), encoding="utf-8")
        records[str(path)] = record
    tune = [records[str(p)] for p in args.tune]
    report: dict = {"tables": {}, "figures": {}}
    for table, (features, which) in TABLES.items():
        fit_queries = [x for mode in MODES for x in _queries(tune, mode, table)]
        firsts = [(results[0][1], results[0][0]) for _s, _q, results in fit_queries]
        if not firsts:
            continue
        if args.keep_tables:
            kept = _models()[table]
            model = {"features": kept.features, "mean": kept.mean, "std": kept.std, "weights": kept.weights,
                     "bias": kept.bias}
        elif which.startswith("contrast"):
            # which signals tell a negative control's results from right answers, then how
            # likely a first result with them is right: the same logistic form, scaled (Platt)
            right = [(results[0][1], True) for _s, q, results in fit_queries if not q["negative"] and results[0][0]]
            negative = [(sig, False) for _s, q, results in fit_queries if q["negative"]
                        for _g, sig, _in in (results if which == "contrast-all" else results[:1])]
            model = calibrated(fit(right + negative, features), firsts)
        else:
            model = fit(firsts if which == "first" else [(sig, gold) for _s, _q, results in fit_queries
                                                          for gold, sig, _in in results], features)
        model["low"], model["high"] = thresholds(model, fit_queries)
        report["tables"][table] = model
    for path, rec in records.items():
        split = "tune" if Path(path) in args.tune else "held-out"
        for mode in MODES:
            for table, model in report["tables"].items():
                queries = _queries([rec], mode, table)
                if queries:
                    report["figures"][f"{rec['set']} ({split}) / {mode} / {table}"] = flagged_rates(
                        model, model["low"], queries)
    print("MODELS: dict[str, Model] = {")
    for table, m in report["tables"].items():
        names = ",\n                  ".join(repr(f) for f in m["features"])
        print(f'    "{table}": Model(\n        features=({names}),\n        mean={_wrapped(m["mean"])},\n'
              f'        std={_wrapped(m["std"])},\n        weights={_wrapped(m["weights"])},\n'
              f'        bias={m["bias"]!r}, low={m["low"]!r}, high={m["high"]!r}),')
    print("}")
    for name, f in report["figures"].items():
        print(f"{name}: negatives flagged {f['negatives_flagged']} of {f['negatives']} {f['by_category']}; "
              f"first-right flagged {f['true_first_flagged']} of {f['true_first']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
