"""Retrieval evaluation: hit@k, MRR and latency per mode, language and category.

The harness's contract (``/work/shared/eval/FORMAT.md``)::

    python -m bench.eval_retrieval SET.json [SET2.json ...] --modes keyword,semantic,hybrid,hermes \\
        --json OUT.json [--baseline-scoped] [--regression BASELINE.json]

For every set: a fresh Hermes home in a temp dir (Hermes's own APIs, see
:mod:`bench.evalset`), indexed with the normal path (``Recall.refresh``);
every query runs through ``Recall.search(limit=10)`` from its current session,
and through Hermes's built-in ``session_search`` (discovery shape,
``limit=10``) as the ``hermes`` column — filtered to the query's project only
with ``--baseline-scoped``, by the same attribution our scope uses.

Attribution runs with a probe that finds no git repo: a set's paths "need not
exist", and when one happens to exist on the machine running the eval its real
git state must not change the answer. Recorded ``git_repo_root`` values decide,
exactly as for a cwd that is gone.

Exit status: 0; 1 when ``--regression`` finds a mode's hit@5 on a set more
than 0.02 below the baseline's; else 2 when one of our modes returned a
session of another project (that must never happen).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from project_history_recall.search.service import NO_CONFIDENT

from .evalset import BuiltHome, EvalSet, Query, build_home
from .stats import ms, percentile

OUR_MODES = ("keyword", "semantic", "hybrid")
ALL_MODES = (*OUR_MODES, "hermes")
KS = (1, 5, 10)
REGRESSION_TOLERANCE = 0.02


def no_git(cwd: str) -> tuple[None, None]:
    return None, None


@dataclass
class Outcome:
    """One query in one mode: the distinct sessions returned (in order) and what they say."""

    query: Query
    seconds: float
    sessions: list[str]
    messages: list[tuple[str, int | None]]
    in_project: int = 0
    other_project: int = 0
    error: str | None = None
    replies: list[tuple[str, int | None] | None] = field(default_factory=list)
    #: each result's ``also`` message (hybrid), None where it shows none
    also: list[tuple[str, int | None] | None] = field(default_factory=list)
    #: the answer said "no confident match" (every result low confidence)
    flagged: bool = False

    def rank(self) -> int | None:
        gold = set(self.query.gold_sessions)
        return next((i for i, sid in enumerate(self.sessions[:10], start=1) if sid in gold), None)

    def message_rank(self, message_ids: dict[str, list[int]], with_reply: bool = False,
                     with_also: bool = False) -> int | None:
        """Rank of the first result whose shown message (or, ``with_reply``, the reply shown
        with it; ``with_also``, its ``also`` message too) is a gold message."""
        gold = {(sid, message_ids[sid][i]) for sid, i in self.query.gold_messages or ()}
        extra = [self.replies] if with_reply else []
        extra += [self.also] if with_also else []
        return next((i for i, pair in enumerate(self.messages[:10], start=1)
                     if pair in gold or any(i <= len(shown) and shown[i - 1] in gold for shown in extra)), None)


@dataclass
class SetRun:
    evalset: EvalSet
    built: BuiltHome
    outcomes: dict[str, list[Outcome]] = field(default_factory=dict)
    index_seconds: float = 0.0
    embed_seconds: float | None = None


# -- running --------------------------------------------------------------------------------


def _distinct(pairs: list[tuple[str, int | None]]) -> list[str]:
    return list(dict.fromkeys(sid for sid, _ in pairs))


class Runner:
    """Runs one set's queries in each mode against the home built from it."""

    def __init__(self, built: BuiltHome, baseline_scoped: bool, semantic: bool) -> None:
        from project_history_recall.recall import Recall

        self.built = built
        self.baseline_scoped = baseline_scoped
        self.recall = Recall(built.root, probe=no_git)
        clock = time.perf_counter()
        self.recall.refresh()
        self.index_seconds = time.perf_counter() - clock
        self.embed_seconds: float | None = None
        self.embed_result: dict | None = None
        if semantic:
            self._embed()
        self.scopes = self._scope_keys()
        self._db = None

    def _embed(self) -> None:
        """The semantic index in full, as ``phr index`` builds it, so no query sees a partial one.

        HOOK(semantic): follows ``Recall.embed()``; without it, semantic modes run as they are."""
        embed = getattr(self.recall, "embed", None)
        if embed is None:
            return
        clock = time.perf_counter()
        self.embed_result = embed()
        self.embed_seconds = time.perf_counter() - clock

    def _scope_keys(self) -> dict[str, str]:
        """Every session's project (as our scope sees it): the resolver over the index's rows."""
        from project_history_recall.search.scope import session_identities

        conn = self.recall.index.connect_readonly()
        if conn is None:
            raise RuntimeError("the index was not built")
        try:
            return {sid: ident.scope_key for sid, (ident, _row) in
                    session_identities(conn, self.recall.workspace.resolver()).items()}
        finally:
            conn.close()

    def project_of(self, sid: str) -> str | None:
        key = self.scopes.get(sid)
        return None if key in (None, "home") else key

    def warm_up(self, mode: str, query: Query) -> None:
        """One untimed query per mode: loading a model is not query latency."""
        self.run(mode, query)

    def run(self, mode: str, query: Query) -> Outcome:
        search: Callable[[Query], dict] = self._hermes if mode == "hermes" else (lambda q: self._ours(q, mode))
        clock = time.perf_counter()
        error = None
        try:
            response = search(query)
        except Exception as exc:  # a failing query counts as a miss, and is reported
            response, error = {"results": []}, f"{type(exc).__name__}: {exc}"
        results = response["results"]
        seconds = time.perf_counter() - clock
        home = self.project_of(query.current_session)
        if mode == "hermes" and self.baseline_scoped:
            results = [r for r in results if home is not None and self.project_of(r["session_id"]) == home]
        pairs = [(r["session_id"], r.get("message_id")) for r in results]
        replies = [(r["session_id"], r["reply"]["message_id"]) if r.get("reply") else None for r in results]
        also = [(r["session_id"], r["also"]["message_id"]) if r.get("also") else None for r in results]
        outcome = Outcome(query, seconds, _distinct(pairs), pairs, error=error, replies=replies, also=also,
                          flagged=bool(results) and response.get("message") == NO_CONFIDENT)
        for sid in outcome.sessions:
            if home is not None and self.project_of(sid) == home:
                outcome.in_project += 1
            else:
                outcome.other_project += 1
        return outcome

    def _ours(self, query: Query, mode: str) -> dict:
        return self.recall.search(query.query, session_id=query.current_session, mode=mode, limit=10)

    def _hermes(self, query: Query) -> dict:
        from hermes_state import SessionDB
        from tools.session_search_tool import session_search

        if self._db is None:
            self._db = SessionDB(db_path=self.built.state_db)
        response = json.loads(session_search(query=query.query, limit=10, db=self._db,
                                             current_session_id=query.current_session))
        if not response.get("success", False):
            raise RuntimeError(response.get("error") or "session_search failed")
        return {"results": [{"session_id": r["session_id"], "message_id": r.get("match_message_id")}
                            for r in response.get("results", [])]}

    def close(self) -> None:
        if self._db is not None:
            self._db.close()


def run_set(evalset: EvalSet, modes: Sequence[str], workdir: Path, baseline_scoped: bool) -> SetRun:
    built = build_home(evalset, workdir / "hermes")
    runner = Runner(built, baseline_scoped, semantic=any(m in ("semantic", "hybrid") for m in modes))
    result = SetRun(evalset, built, index_seconds=runner.index_seconds, embed_seconds=runner.embed_seconds)
    try:
        for mode in modes:
            if evalset.queries:
                runner.warm_up(mode, evalset.queries[0])
            result.outcomes[mode] = [runner.run(mode, q) for q in evalset.queries]
    finally:
        runner.close()
    return result


# -- metrics --------------------------------------------------------------------------------


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def hit_figures(outcomes: list[Outcome]) -> dict:
    """hit@1/5/10, MRR over the first 10 sessions, latency and n, over the positive queries."""
    positives = [o for o in outcomes if not o.query.negative]
    ranks = [o.rank() for o in positives]
    seconds = [o.seconds for o in outcomes]
    n = len(positives)
    figures: dict = {f"hit@{k}": _r(sum(1 for r in ranks if r is not None and r <= k) / n) if n else None for k in KS}
    figures["mrr"] = _r(sum(1 / r for r in ranks if r is not None) / n) if n else None
    figures["p50_ms"] = ms(percentile(seconds, 50))
    figures["p95_ms"] = ms(percentile(seconds, 95))
    figures["n"] = n
    return figures


def mode_figures(outcomes: list[Outcome], message_ids: dict[str, list[int]]) -> dict:
    figures = hit_figures(outcomes)
    for attr, key in (("lang", "by_lang"), ("category", "by_category")):
        groups: dict[str, list[Outcome]] = defaultdict(list)
        for o in outcomes:
            groups[getattr(o.query, attr)].append(o)
        figures[key] = {name: hit_figures(group) for name, group in sorted(groups.items())}
    with_messages = [o for o in outcomes if o.query.gold_messages and not o.query.negative]
    if with_messages:
        ranks = [o.message_rank(message_ids) for o in with_messages]
        figures["messages"] = {f"hit@{k}": _r(sum(1 for r in ranks if r is not None and r <= k) / len(ranks))
                               for k in KS} | {"n": len(ranks)}
        for key, also in (("messages_with_reply", False), ("messages_shown", True)):
            ranks = [o.message_rank(message_ids, with_reply=True, with_also=also) for o in with_messages]
            figures[key] = {f"hit@{k}": _r(sum(1 for r in ranks if r is not None and r <= k) / len(ranks))
                            for k in KS}
    negatives = [o for o in outcomes if o.query.negative]
    first_right = [o for o in outcomes if not o.query.negative and o.rank() == 1]
    figures["negatives"] = {"n": len(negatives),
                            "empty_in_project": sum(1 for o in negatives if o.in_project == 0),
                            "with_other_project": sum(1 for o in negatives if o.other_project > 0),
                            "flagged": sum(1 for o in negatives if o.flagged),
                            "by_category": {c: f"{sum(o.flagged for o in negatives if o.query.category == c)}/"
                                               f"{sum(1 for o in negatives if o.query.category == c)}"
                                            for c in sorted({o.query.category for o in negatives})},
                            "first_right": len(first_right),
                            "first_right_flagged": sum(1 for o in first_right if o.flagged)}
    figures["other_project_queries"] = sum(1 for o in outcomes if o.other_project > 0)
    errors = [f"{o.query.id}: {o.error}" for o in outcomes if o.error]
    if errors:
        figures["errors"] = errors
    return figures


def set_figures(run: SetRun) -> dict:
    return {mode: mode_figures(outcomes, run.built.message_ids) for mode, outcomes in run.outcomes.items()}


# -- printing -------------------------------------------------------------------------------


def _cell(value: object) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _table(headers: list[str], rows: list[list[object]]) -> str:
    cells = [headers, *[[_cell(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


METRICS = ["hit@1", "hit@5", "hit@10", "mrr", "p50_ms", "p95_ms", "n"]


def print_set(name: str, run: SetRun, figures: dict, baseline_scoped: bool) -> None:
    queries = run.evalset.queries
    negatives = sum(q.negative for q in queries)
    print(f"\n=== {name}: {len(run.evalset.sessions)} sessions, {len(queries)} queries "
          f"({len(queries) - negatives} with gold, {negatives} negative controls); index built in "
          f"{run.index_seconds:.2f} s" + (f", semantic index in {run.embed_seconds:.2f} s" if run.embed_seconds else "")
          + ("; hermes scoped to the query's project" if baseline_scoped else "") + "; latency after one warm-up query")
    print(_table(["mode", *METRICS], [[mode, *(f[m] for m in METRICS)] for mode, f in figures.items()]))
    for key, label in (("by_lang", "lang"), ("by_category", "category")):
        rows = [[f"{mode} / {group}", *(g[m] for m in METRICS)]
                for mode, f in figures.items() for group, g in f[key].items()]
        print(f"\nby {label}:")
        print(_table([f"mode / {label}", *METRICS], rows))
    if any("messages" in f for f in figures.values()):
        print("\nmessage level (gold_messages):")
        ks = ("hit@1", "hit@5", "hit@10")
        print(_table(["mode", *ks, "with reply: hit@1", "hit@5", "hit@10", "every shown (+ also): hit@1", "hit@5",
                      "hit@10", "n"],
                     [[mode, *(f[key][m] for key in ("messages", "messages_with_reply", "messages_shown") for m in ks),
                       f["messages"]["n"]] for mode, f in figures.items() if "messages" in f]))
    print("\nno confident match: " + "; ".join(
        f"{mode}: negatives {f['negatives']['flagged']}/{f['negatives']['n']} {f['negatives']['by_category']}, "
        f"first-right {f['negatives']['first_right_flagged']}/{f['negatives']['first_right']}"
        for mode, f in figures.items() if mode in OUR_MODES))
    print("\nscope: " + "; ".join(
        f"{mode}: negatives {f['negatives']['empty_in_project']}/{f['negatives']['n']} empty in project, "
        f"{f['negatives']['with_other_project']} with other-project results; "
        f"{f['other_project_queries']} queries returned another project's sessions"
        for mode, f in figures.items()))
    for mode, f in figures.items():
        for error in f.get("errors", [])[:5]:
            print(f"  {mode} error: {error}")


# -- regression -----------------------------------------------------------------------------


def regression(current: dict, baseline: dict, tolerance: float = REGRESSION_TOLERANCE) -> tuple[bool, str]:
    """Compare hit@5 per set and mode; fails when one drops more than ``tolerance`` below the baseline."""
    rows, failed = [], False
    for set_name, modes in baseline.items():
        for mode, base in modes.items():
            now = current.get(set_name, {}).get(mode)
            if now is None:
                rows.append([set_name, mode, base.get("hit@5"), None, None, "not run"])
                continue
            before, after = base.get("hit@5"), now.get("hit@5")
            if before is None or after is None:
                rows.append([set_name, mode, before, after, None, "no data"])
                continue
            delta = round(after - before, 4)
            bad = delta < -tolerance - 1e-9
            failed |= bad
            rows.append([set_name, mode, before, after, delta, "REGRESSION" if bad else "ok"])
    text = _table(["set", "mode", "baseline hit@5", "hit@5", "delta", "status"], rows)
    return failed, text


# -- command line ---------------------------------------------------------------------------


def _modes(text: str) -> list[str]:
    modes = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in modes if m not in ALL_MODES]
    if unknown or not modes:
        raise argparse.ArgumentTypeError(f"modes must be among {', '.join(ALL_MODES)}")
    return list(dict.fromkeys(modes))


def evaluate(paths: Sequence[Path], modes: Sequence[str], *, baseline_scoped: bool = False,
             quiet: bool = False) -> tuple[dict, dict[str, SetRun]]:
    results: dict = {}
    runs: dict[str, SetRun] = {}
    for path in paths:
        evalset = EvalSet.load(path)
        name = evalset.name
        k = 2
        while name in results:
            name, k = f"{evalset.name} ({k})", k + 1
        with tempfile.TemporaryDirectory(prefix="phr-eval-") as tmp:
            run = run_set(evalset, modes, Path(tmp), baseline_scoped)
        results[name] = set_figures(run)
        runs[name] = run
        if not quiet:
            print_set(name, run, results[name], baseline_scoped)
            for note in run.built.notes:
                print(f"  note: {note}")
    return results, runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.eval_retrieval", description=__doc__.split("\n\n")[0])
    parser.add_argument("sets", nargs="+", type=Path, metavar="SET.json")
    parser.add_argument("--modes", type=_modes, default=list(ALL_MODES), help="comma-separated: " + ",".join(ALL_MODES))
    parser.add_argument("--json", type=Path, help="write all figures here")
    parser.add_argument("--baseline-scoped", action="store_true",
                        help="filter Hermes's results to the query's project")
    parser.add_argument("--regression", type=Path, metavar="BASELINE.json",
                        help=f"fail when a mode's hit@5 drops more than {REGRESSION_TOLERANCE} below this file's")
    args = parser.parse_args(argv)

    results, _ = evaluate(args.sets, args.modes, baseline_scoped=args.baseline_scoped)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False), encoding="utf-8")
        print(f"\nwrote {args.json}")

    status = 0
    leaks = [(s, m, f["other_project_queries"]) for s, modes in results.items() for m, f in modes.items()
             if m in OUR_MODES and f["other_project_queries"]]
    if leaks:
        for set_name, mode, count in leaks:
            print(f"ERROR: {set_name} / {mode}: {count} queries returned sessions of another project", file=sys.stderr)
        status = 2
    if args.regression:
        baseline = json.loads(args.regression.read_text(encoding="utf-8"))
        failed, text = regression(results, baseline)
        print(f"\nregression check against {args.regression} (hit@5, tolerance {REGRESSION_TOLERANCE}):")
        print(text)
        if failed:
            print("REGRESSION: hit@5 dropped beyond tolerance", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
