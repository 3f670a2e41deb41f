"""The performance benchmark: index build, incremental refresh, query latency, sizes.

``python -m bench.run --size S|M|L [--quick]`` prints the figures and writes
``bench/out/run-<size>.json``. It works on a copy of the cached corpus's
Hermes home (``bench/out/run-<size>/home``) because the incremental steps
write to ``state.db``, and the corpus must stay reusable.

What is measured, and why that way:

* full index — in a subprocess (``--child-index``), so its peak RSS is the
  build's own and not this process's leftovers; beside it the *floor*: one
  pass reading every active message's text from ``state.db``, the least any
  indexer has to do;
* incremental — ``Recall.refresh()`` with nothing changed, after one new
  20-message session, after a rewind, after a retitle;
* query latency — ``Recall.search`` (which runs the freshness check first, as
  every tool call does) per mode, from a session in the large project and from
  one in a small project, against Hermes's built-in ``session_search``
  (discovery shape, same ``state.db``);
* sizes — the index on disk against the raw text and against Hermes's own
  FTS tables (``dbstat`` when SQLite has it);
* embeddings — ``Recall.embed()`` (the full semantic index) before the latency
  runs, with chunks/s; on by default for a full S run only (``--embed`` /
  ``--no-embed``). Without it semantic and hybrid search a partial index.

* real tool-heavy corpus — latency on 435 real SWE-bench agent trajectories (``--real``, on unless
  ``--quick``; :func:`real_corpus`), skipped with a note when the snapshot is absent (CI has none).

``--quick`` (for CI) is size S with 40 queries and no semantic index build
(``--embed`` adds it); it prints figures and never fails on time.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from .corpus import DEFAULT_SEED, SIZES, Corpus, SessionPlan, ensure_corpus, plan_sessions, session_messages
from .evalset import hermes_history_only
from .machine import describe, machine
from .stats import best_of_rounds, latency_summary, ms
from .vocab import LARGE_PROJECT

OUT = Path(__file__).resolve().parent / "out"
MODES = ("keyword", "semantic", "hybrid")
INDEX_DIR = Path("plugins") / "project-history-recall"


# -- the home under test ------------------------------------------------------------------


def prepare_home(corpus: Corpus, run_dir: Path) -> Path:
    """A private copy of the corpus's Hermes home, without any index."""
    home = run_dir / "home"
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    for part in sorted(corpus.hermes_home.iterdir()):
        if part.is_file() and (part.name.startswith("state.db") or part.name.startswith("projects.db")):
            shutil.copy2(part, home / part.name)
    hermes_history_only(home)
    return home


def read_floor(state_db: Path) -> dict:
    """One pass over every active message's text: the least an indexer must read."""
    conn = sqlite3.connect(f"{state_db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        clock = time.perf_counter()
        count = chars = 0
        for content, tool_calls in conn.execute("SELECT content, tool_calls FROM messages WHERE active = 1"):
            count += 1
            chars += len(content or "") + len(tool_calls or "")
        seconds = time.perf_counter() - clock
    finally:
        conn.close()
    return {"seconds": round(seconds, 4), "messages": count, "chars": chars,
            "messages_per_s": round(count / seconds) if seconds else None}


# -- full index in a child process --------------------------------------------------------


def child_index(home: Path) -> dict:
    """Runs in the subprocess: build the index from nothing and report time, probes and RSS."""
    from project_history_recall.index.probes import git_probe
    from project_history_recall.recall import Recall

    probes = {"calls": 0, "seconds": 0.0}

    def timed_probe(cwd: str):
        clock = time.perf_counter()
        try:
            return git_probe(cwd)
        finally:
            probes["calls"] += 1
            probes["seconds"] += time.perf_counter() - clock

    baseline_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    recall = Recall(home, probe=timed_probe)
    clock = time.perf_counter()
    report = recall.refresh()
    seconds = time.perf_counter() - clock
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"report": report.as_dict(), "seconds": round(seconds, 4),
            "messages_per_s": round(report.messages_read / seconds) if seconds else None,
            "probe_calls": probes["calls"], "probe_seconds": round(probes["seconds"], 4),
            "peak_rss_mb": round(peak_kb / 1024, 1), "baseline_rss_mb": round(baseline_kb / 1024, 1)}


def index_in_subprocess(home: Path) -> dict:
    clock = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "bench.run", "--child-index", str(home)],
                          capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
    if proc.returncode != 0:
        raise RuntimeError(f"index build failed:\n{proc.stderr}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["process_wall_seconds"] = round(time.perf_counter() - clock, 4)
    return result


# -- incremental --------------------------------------------------------------------------


def _pick_session(corpus: Corpus, min_messages: int = 10) -> SessionPlan:
    """A deterministic, ordinary session of the large project to rewind and retitle."""
    for plan in plan_sessions(corpus.seed, corpus.size):
        if (plan.project == LARGE_PROJECT and plan.source == "cli" and not plan.archived and not plan.rewind
                and not plan.live and plan.n_messages >= min_messages):
            return plan
    raise RuntimeError("no session to rewind")


def incremental(home: Path, corpus: Corpus) -> dict:
    from hermes_state import SessionDB

    from project_history_recall.recall import Recall

    recall = Recall(home)
    figures: dict = {}
    noop = [recall.refresh().seconds for _ in range(5)]
    figures["nothing_changed"] = {"seconds": sorted(noop)[len(noop) // 2], "runs": noop}

    db = SessionDB(db_path=home / "state.db")
    try:
        template = _pick_session(corpus)
        sid = "bench_new_session_20"
        db.create_session(sid, "cli", cwd=str(corpus.work / "payments-api"))
        db.update_session_cwd(sid, str(corpus.work / "payments-api"), git_branch="main",
                              git_repo_root=str(corpus.work / "payments-api"))
        new = SessionPlan(sid, LARGE_PROJECT, "en", "cli", time.time(), 20)
        for m in session_messages(corpus.seed, new):
            db.append_message(sid, m["role"], m["content"], tool_name=m.get("tool_name"),
                              tool_calls=m.get("tool_calls"), tool_call_id=m.get("tool_call_id"),
                              timestamp=m["timestamp"])
        figures["new_session_20_messages"] = recall.refresh().as_dict()

        rows = db.get_messages(template.id)
        users = [m for i, m in enumerate(rows) if m["role"] == "user" and i >= len(rows) // 2]
        db.rewind_to_message(template.id, users[0]["id"])
        figures["rewind"] = {**recall.refresh().as_dict(), "session_messages_before": len(rows)}

        db.set_session_title(template.id, f"bench retitle {template.id}")
        figures["retitle"] = recall.refresh().as_dict()
    finally:
        db.close()
    return figures


# -- query latency ------------------------------------------------------------------------


def query_latency(home: Path, corpus: Corpus, queries: list[dict], modes: tuple[str, ...]) -> dict:
    from project_history_recall.recall import Recall

    recall = Recall(home)
    out: dict = {}
    for scope, current in sorted(corpus.current.items()):
        out[scope] = {}
        for mode in modes:
            clock = time.perf_counter()
            recall.search(queries[0]["query"], session_id=current, mode=mode, limit=10)
            first = time.perf_counter() - clock
            times: list[float] = []
            hit_times: list[float] = []
            status: Counter[str] = Counter()
            for q in queries:
                clock = time.perf_counter()
                response = recall.search(q["query"], session_id=current, mode=mode, limit=10)
                times.append(time.perf_counter() - clock)
                if response["results"]:
                    hit_times.append(times[-1])
                status[str(response.get("semantic_status"))] += 1
            out[scope][mode] = {**latency_summary(times), **_nonempty(hit_times, len(times)),
                                "first_query_ms": ms(first), "semantic_status": dict(status)}
    out["freshness_check"] = freshness_check(recall)
    return out


def _nonempty(hit_times: list[float], n: int) -> dict:
    """Latency over the queries that returned something: an empty answer is cheap for any engine."""
    summary = latency_summary(hit_times)
    return {"empty": n - len(hit_times), "p50_ms_nonempty": summary["p50_ms"], "p95_ms_nonempty": summary["p95_ms"]}


def freshness_check(recall, runs: int = 50) -> dict:
    """The incremental check every search runs first (``Recall.ensure_fresh``), alone."""
    times = []
    for _ in range(runs):
        clock = time.perf_counter()
        recall.ensure_fresh()
        times.append(time.perf_counter() - clock)
    return latency_summary(times)


def hermes_latency(home: Path, corpus: Corpus, queries: list[dict]) -> dict:
    """Hermes's built-in ``session_search`` (discovery shape, limit 10) on the same state.db."""
    from hermes_state import SessionDB
    from tools.session_search_tool import session_search

    db = SessionDB(db_path=home / "state.db")
    out: dict = {}
    try:
        for scope, current in sorted(corpus.current.items()):
            session_search(query=queries[0]["query"], limit=10, db=db, current_session_id=current)
            times, hit_times = [], []
            for q in queries:
                clock = time.perf_counter()
                response = json.loads(session_search(query=q["query"], limit=10, db=db, current_session_id=current))
                times.append(time.perf_counter() - clock)
                if response.get("results"):
                    hit_times.append(times[-1])
            out[scope] = {**latency_summary(times), **_nonempty(hit_times, len(times))}
    finally:
        db.close()
    return out


def ratios(ours: dict, hermes: dict) -> dict:
    """Hermes's latency over ours (above 1: ours is faster), per scope and mode."""
    out: dict = {}
    for scope, base in hermes.items():
        out[scope] = {}
        for mode, figures in ours[scope].items():
            out[scope][mode] = {
                key: round(base[key] / figures[key], 2) if base.get(key) and figures.get(key) else None
                for key in ("p50_ms", "p95_ms", "p50_ms_nonempty", "p95_ms_nonempty")
            }
    return out


# -- sizes --------------------------------------------------------------------------------


def _dbstat(path: Path) -> dict[str, int] | None:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
    except sqlite3.OperationalError:
        return None
    finally:
        conn.close()
    return {name: int(size) for name, size in rows}


def _checkpoint(path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def _files_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())


def _sum(stats: dict[str, int], *prefixes: str, exclude: tuple[str, ...] = ()) -> int:
    return sum(v for k, v in stats.items() if k.startswith(prefixes) and not k.startswith(exclude))


def sizes(home: Path) -> dict:
    index_db = home / INDEX_DIR / "index.db"
    state_db = home / "state.db"
    _checkpoint(index_db)
    _checkpoint(state_db)
    conn = sqlite3.connect(f"{state_db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        raw = conn.execute("SELECT COALESCE(SUM(LENGTH(CAST(content AS BLOB))), 0) + "
                           "COALESCE(SUM(LENGTH(CAST(tool_calls AS BLOB))), 0) FROM messages WHERE active = 1"
                           ).fetchone()[0]
    finally:
        conn.close()
    figures: dict = {"raw_text_bytes": raw, "index_file_bytes": _files_bytes(index_db),
                     "state_db_file_bytes": _files_bytes(state_db)}
    ours, theirs = _dbstat(index_db), _dbstat(state_db)
    if ours is None or theirs is None:
        figures["dbstat"] = "unavailable (SQLite built without SQLITE_ENABLE_DBSTAT_VTAB): file sizes only"
    else:
        figures["index_fts_bytes"] = _sum(ours, "entries_fts")
        figures["index_entries_bytes"] = _sum(ours, "entries", exclude=("entries_fts",))
        figures["index_chunks_bytes"] = _sum(ours, "chunks")
        figures["hermes_fts_bytes"] = _sum(theirs, "messages_fts", exclude=("messages_fts_trigram",))
        figures["hermes_fts_trigram_bytes"] = _sum(theirs, "messages_fts_trigram")
        figures["hermes_messages_bytes"] = _sum(theirs, "messages", "idx_messages", exclude=("messages_fts",))
        hermes_fts = figures["hermes_fts_bytes"] + figures["hermes_fts_trigram_bytes"]
        figures["index_over_hermes_fts"] = round(figures["index_file_bytes"] / hermes_fts, 3) if hermes_fts else None
    figures["index_over_raw"] = round(figures["index_file_bytes"] / raw, 3) if raw else None
    return figures


# -- embeddings ---------------------------------------------------------------------------


def _chunks(home: Path) -> tuple[int, int]:
    """(chunks with a vector, distinct chunk texts among them): identical chunks share one model call."""
    conn = sqlite3.connect(f"{(home / INDEX_DIR / 'index.db').resolve().as_uri()}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT COUNT(*), COUNT(DISTINCT content_hash) FROM chunks WHERE LENGTH(vector) > 0"
                           ).fetchone()
        return int(row[0]), int(row[1])
    except sqlite3.OperationalError:
        return 0, 0
    finally:
        conn.close()


def embedding_figures(home: Path) -> dict:
    """Time to a full semantic index (``Recall.embed``, what ``phr index`` runs) and chunks/s.

    HOOK(semantic): this follows ``Recall.embed() -> {"semantic_status", "embedded",
    "embed_seconds"}``; if that API changes, adapt here. Without it: ``n/a``."""
    from project_history_recall.recall import Recall

    recall = Recall(home)
    embed = getattr(recall, "embed", None)
    if embed is None:
        return {"status": "n/a", "note": "Recall has no embed() (HOOK(semantic) in bench/run.py)"}
    before, before_unique = _chunks(home)
    clock = time.perf_counter()
    result = embed()
    seconds = time.perf_counter() - clock
    after, after_unique = _chunks(home)
    chunks, unique = after - before, after_unique - before_unique
    status = result.get("semantic_status", "?") if isinstance(result, dict) else "?"
    return {"status": "ok" if status == "ready" else status, "seconds": round(seconds, 3), "chunks": chunks,
            "distinct_chunks": unique, "messages": result.get("embedded") if isinstance(result, dict) else None,
            "chunks_per_s": round(chunks / seconds, 1) if chunks and seconds else None,
            "distinct_chunks_per_s": round(unique / seconds, 1) if unique and seconds else None, "result": result}


# -- the real tool-heavy corpus -----------------------------------------------------------


#: Passes over the real corpus's queries per mode: the first is reported as it came, beside each
#: query's fastest pass (:func:`~bench.stats.best_of_rounds`).
REAL_ROUNDS = 3


def search_rounds(recall, session_id: str, queries: list[str], mode: str, rounds: int) -> list[list[float]]:
    """Each pass's search times (seconds) of ``queries`` from ``session_id``, after one untimed
    search (loading a model is not a query's latency)."""
    recall.search(queries[0], session_id=session_id, mode=mode, limit=10)
    passes = []
    for _ in range(rounds):
        times = []
        for query in queries:
            clock = time.perf_counter()
            recall.search(query, session_id=session_id, mode=mode, limit=10)
            times.append(time.perf_counter() - clock)
        passes.append(times)
    return passes


def real_corpus(run_dir: Path, embed: bool) -> dict:
    """Latency on real agent trajectories (issue 17.1): the 435 mini-swe-agent SWE-bench runs of
    :mod:`bench.datasets.swe_trajs` (34,761 messages, long shell outputs and heredocs), converted
    from the fetched snapshot when ``bench/out/real/swe-heldout.json`` is not there yet, written
    through Hermes's APIs (:mod:`bench.evalset`), indexed, then the set's own queries asked from
    its largest project (django, 203 sessions). Skipped, and said so, without the snapshot."""
    from project_history_recall.recall import Recall

    from .datasets import swe_trajs
    from .datasets.realcommon import OUT_DIR
    from .eval_retrieval import no_git
    from .evalset import EvalSet, build_home

    path = OUT_DIR / "swe-heldout.json"
    if not path.exists():
        if not swe_trajs.DEFAULT_SOURCE.exists():
            return {"status": "skipped", "note": f"no snapshot at {swe_trajs.DEFAULT_SOURCE} (and no {path})"}
        swe_trajs.convert(swe_trajs.DEFAULT_SOURCE, OUT_DIR, None, "swe")
    evalset = EvalSet.load(path)
    home = run_dir / "real-home"
    if home.exists():
        shutil.rmtree(home)
    build_home(evalset, home)
    recall = Recall(home, probe=no_git)
    clock = time.perf_counter()
    report = recall.refresh()
    seconds = time.perf_counter() - clock
    figures: dict = {"status": "ok", "set": str(path), "sessions": len(evalset.sessions),
                     "messages": report.messages_read, "index_seconds": round(seconds, 3),
                     "messages_per_s": round(report.messages_read / seconds) if seconds else None}
    modes = ("keyword", "semantic", "hybrid") if embed else ("keyword",)
    if embed:
        figures["embed"] = recall.embed()
    current = Counter(q.current_session for q in evalset.queries).most_common(1)[0][0]
    queries = [q.query for q in evalset.queries if q.current_session == current]
    figures["largest_project"] = {"current_session": current, "queries": len(queries)}
    for mode in modes:
        rounds = search_rounds(recall, current, queries, mode, REAL_ROUNDS)
        figures["largest_project"][mode] = {
            **latency_summary(rounds[0]),
            "rounds_p95_ms": [latency_summary(times)["p95_ms"] for times in rounds],
            "best_of_rounds": latency_summary(best_of_rounds(rounds))}
    return figures


# -- the run ------------------------------------------------------------------------------


def run(size_name: str, *, quick: bool, seed: int, n_queries: int, embed: bool, real: bool) -> dict:
    size = SIZES[size_name]
    started = time.perf_counter()
    corpus = ensure_corpus(OUT / f"corpus-{size.name}", seed, size)
    queries = corpus.queries()[:n_queries]
    run_dir = OUT / f"run-{size.name}{'-quick' if quick else ''}"
    home = prepare_home(corpus, run_dir)

    result: dict = {"size": size.name, "quick": quick, "seed": seed, "machine": machine(),
                    "command": "python -m bench.run " + " ".join(sys.argv[1:]),
                    "corpus": {"sessions": corpus.sessions, "messages_written": corpus.messages_written,
                               "messages_active": corpus.messages_active, "projects": corpus.projects,
                               "current": corpus.current, "write_seconds": corpus.seconds}}
    read_floor(home / "state.db")  # warm the page cache, so floor and build both read from memory
    result["floor"] = read_floor(home / "state.db")
    result["index"] = index_in_subprocess(home)
    result["sizes_keyword_index"] = sizes(home)  # before any vector exists
    result["incremental"] = incremental(home, corpus)
    # Before the latency runs, so semantic and hybrid search a complete vector index.
    result["embedding"] = (embedding_figures(home) if embed else
                           {"status": "skipped", "note": "semantic index not built (pass --embed); semantic and "
                            "hybrid latencies are over a partial index"})
    result["queries"] = {"n": len(queries), "by_lang": dict(Counter(q["lang"] for q in queries))}
    result["latency"] = query_latency(home, corpus, queries, MODES)
    result["hermes"] = hermes_latency(home, corpus, queries)
    result["hermes_over_ours"] = ratios(result["latency"], result["hermes"])
    result["sizes"] = sizes(home)
    if real:
        result["real"] = real_corpus(run_dir, embed)
    result["process_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    result["total_seconds"] = round(time.perf_counter() - started, 2)
    return result


def _fmt(value: object, unit: str = "") -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.2f}{unit}"
    if isinstance(value, int):
        return f"{value:,}{unit}"
    return f"{value}{unit}"


def print_summary(r: dict) -> None:
    index, floor, inc, sz = r["index"], r["floor"], r["incremental"], r["sizes"]
    print(f"\n== bench size {r['size']}{' (quick)' if r['quick'] else ''}: {r['corpus']['sessions']:,} sessions, "
          f"{r['corpus']['messages_active']:,} active messages (seed {r['seed']})")
    print(f"machine: {describe(r['machine'])}")
    print(f"full index: {_fmt(index['seconds'], ' s')} ({_fmt(index['messages_per_s'])} messages/s), "
          f"peak RSS {_fmt(index['peak_rss_mb'], ' MB')} "
          f"(interpreter+imports {_fmt(index['baseline_rss_mb'], ' MB')}), "
          f"git probes {index['probe_calls']} in {_fmt(index['probe_seconds'], ' s')}")
    print(f"floor (read every message once): {_fmt(floor['seconds'], ' s')} "
          f"({_fmt(floor['messages_per_s'])} messages/s); index/floor = "
          f"{_fmt(round(index['seconds'] / floor['seconds'], 1) if floor['seconds'] else None)}x")
    print(f"incremental: nothing changed {_fmt(inc['nothing_changed']['seconds'] * 1000, ' ms')}, "
          f"new 20-message session {_fmt(inc['new_session_20_messages']['seconds'] * 1000, ' ms')}, "
          f"rewind {_fmt(inc['rewind']['seconds'] * 1000, ' ms')}, "
          f"retitle {_fmt(inc['retitle']['seconds'] * 1000, ' ms')}")
    print(f"query latency over {r['queries']['n']} queries, ms p50/p95 (over queries with results in brackets), "
          "Hermes session_search beside:")
    for scope, hermes in r["hermes"].items():
        modes = r["latency"][scope]
        cells = [f"{m} {_fmt(f['p50_ms'])}/{_fmt(f['p95_ms'])} [{_fmt(f['p50_ms_nonempty'])}/"
                 f"{_fmt(f['p95_ms_nonempty'])}, {f['empty']} empty]" for m, f in modes.items()]
        ratio = r["hermes_over_ours"][scope].get("keyword", {})
        print(f"  {scope} project: " + ", ".join(cells))
        print(f"    hermes {_fmt(hermes['p50_ms'])}/{_fmt(hermes['p95_ms'])} [{_fmt(hermes['p50_ms_nonempty'])}/"
              f"{_fmt(hermes['p95_ms_nonempty'])}, {hermes['empty']} empty]; hermes/keyword p50 "
              f"{_fmt(ratio.get('p50_ms'))}x [{_fmt(ratio.get('p50_ms_nonempty'))}x]")
    fresh = r["latency"]["freshness_check"]
    print(f"  of which the freshness check every search runs first: p50 {_fmt(fresh['p50_ms'])} ms, "
          f"p95 {_fmt(fresh['p95_ms'])} ms")
    print(f"sizes: raw text {_fmt(sz['raw_text_bytes'] / 1e6, ' MB')}, "
          f"index {_fmt(sz['index_file_bytes'] / 1e6, ' MB')} "
          f"({_fmt(sz['index_over_raw'])}x raw)" + (
              f", Hermes FTS {_fmt(sz['hermes_fts_bytes'] / 1e6, ' MB')} + trigram "
              f"{_fmt(sz['hermes_fts_trigram_bytes'] / 1e6, ' MB')} "
              f"(index/Hermes FTS {_fmt(sz['index_over_hermes_fts'])}x)"
              if "hermes_fts_bytes" in sz else f", {sz.get('dbstat')}"))
    kw = r["sizes_keyword_index"]
    print(f"  keyword index alone (before vectors): {_fmt(kw['index_file_bytes'] / 1e6, ' MB')} "
          f"({_fmt(kw['index_over_raw'])}x raw, {_fmt(kw.get('index_over_hermes_fts'))}x Hermes FTS)")
    emb = r["embedding"]
    print(f"embeddings: {emb['status']}" + (
        f", full semantic index in {_fmt(emb.get('seconds'), ' s')}: {_fmt(emb.get('messages'))} messages, "
        f"{_fmt(emb.get('chunks'))} chunks ({_fmt(emb.get('chunks_per_s'))} chunks/s; "
        f"{_fmt(emb.get('distinct_chunks'))} distinct, {_fmt(emb.get('distinct_chunks_per_s'))}/s)"
        if emb["status"] == "ok" else f" ({emb.get('note') or emb.get('result')})"))
    real = r.get("real")
    if real and real["status"] == "ok":
        big = real["largest_project"]
        cells = [f"{m} {_fmt(big[m]['p50_ms'])}/{_fmt(big[m]['p95_ms'])} (p95 of each pass "
                 f"{'/'.join(_fmt(p) for p in big[m]['rounds_p95_ms'])}; fastest of {REAL_ROUNDS} per query "
                 f"{_fmt(big[m]['best_of_rounds']['p50_ms'])}/{_fmt(big[m]['best_of_rounds']['p95_ms'])})"
                 for m in MODES if m in big]
        print(f"real tool-heavy corpus (SWE-bench trajectories, {real['messages']:,} messages): keyword index "
              f"{_fmt(real['messages_per_s'])} messages/s; largest project, {big['queries']} queries, ms p50/p95 "
              "of the first pass: " + ", ".join(cells))
    elif real:
        print(f"real tool-heavy corpus: {real['status']} ({real['note']})")
    print(f"benchmark process peak RSS (embedding, vectors, queries): {_fmt(r.get('process_peak_rss_mb'), ' MB')}; "
          f"total {_fmt(r['total_seconds'], ' s')}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="S")
    parser.add_argument("--quick", action="store_true",
                        help="CI: size S, 40 queries, no embedding; never fails on time")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--queries", type=int, default=None, help="how many of the 200 queries (default all)")
    parser.add_argument("--embed", action=argparse.BooleanOptionalAction, default=None,
                        help="build and time the full semantic index first (default: only for a full S run)")
    parser.add_argument("--json", type=Path, default=None, help="where to write (default bench/out/run-<size>.json)")
    parser.add_argument("--real", action=argparse.BooleanOptionalAction, default=None,
                        help="also the real tool-heavy corpus (SWE-bench trajectories; default: on unless --quick; "
                             "skipped, and said so, without the fetched snapshot)")
    parser.add_argument("--child-index", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_index:
        print(json.dumps(child_index(args.child_index)))
        return 0
    size = "S" if args.quick else args.size
    n_queries = args.queries or (40 if args.quick else 200)
    embed = args.embed if args.embed is not None else (size == "S" and not args.quick)
    real = args.real if args.real is not None else not args.quick
    result = run(size, quick=args.quick, seed=args.seed, n_queries=n_queries, embed=embed, real=real)
    out = args.json or OUT / f"run-{size}{'-quick' if args.quick else ''}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")
    print_summary(result)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
