"""Crash safety: SIGKILL the indexer at seeded points of a full build, an incremental
refresh, an embedding run and a ``phr index`` job, and kill writers of the small state
files in a loop.

After every kill:

* ``opens`` — the index file passes ``PRAGMA integrity_check`` and FTS5's own
  ``integrity-check``, has a known schema version, and the plugin's
  ``Index.connect()`` opens it without moving it aside;
* ``atomic`` — every indexed session is exactly its old or its new version (mirror
  row and entries), every entry has its FTS postings and no posting is orphaned;
  every message's vectors are all there or none;
* ``partial_search`` — a search over the interrupted index as it stands (automatic
  indexing off) answers, and only with sessions that really match in the asker's
  project (before or after the change);
* ``recovers`` — the next refresh (or embedding run) completes, and the index's
  digest (:mod:`.digest`) equals the one an uninterrupted run produced;
* ``search_after`` — the next searches answer exactly as after an uninterrupted run.
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
import sqlite3
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import digest as dg
from . import world
from .procs import Child, python_c, spawn

REFRESH_CODE = (
    "import sys\n"
    "from project_history_recall.recall import Recall\n"
    "r = Recall(sys.argv[1])\n"
    "print('READY', flush=True)\n"
    "r.refresh()\n"
    "print('DONE', flush=True)\n"
)
EMBED_CODE = (
    "import sys\n"
    "from project_history_recall.recall import Recall\n"
    "r = Recall(sys.argv[1])\n"
    "print('READY', flush=True)\n"
    "out = r.embed()\n"
    "assert out['semantic_status'] == 'ready', out\n"
    "print('DONE', out['embedded'], flush=True)\n"
)
STATE_FILES_CODE = (
    "import sys, random\n"
    "from pathlib import Path\n"
    "from project_history_recall.services import jobs\n"
    "from project_history_recall.services.consent import record_consent, record_sent\n"
    "d, rng = Path(sys.argv[1]), random.Random(int(sys.argv[2]))\n"
    "store = jobs.JobStore(d)\n"
    "job = jobs.Job('stress-job')\n"
    "def once(i):\n"
    "    n = rng.randint(1, 4000)\n"
    "    record_consent(d, profile='default', projects=[f'auto:/work/p{i}-{k}' for k in range(n)],\n"
    "                   provider='openai', endpoint='http://127.0.0.1:9/v1', model=f'm{i}')\n"
    "    record_sent(d, provider='openai', endpoint='http://127.0.0.1:9/v1', model='m', texts=n, chars=n)\n"
    "    jobs.record_refresh(d, {'iteration': i, 'pad': 'x' * n * 20}, 'stress')\n"
    "    job.done, job.total = i, n\n"
    "    store.write(job)\n"
    "once(0)\n"
    "print('READY', flush=True)\n"
    "i = 1\n"
    "while True:\n"
    "    once(i)\n"
    "    i += 1\n"
)


@dataclass
class Outcome:
    scenario: str
    delay: float
    landed: bool
    checks: dict[str, Any] = field(default_factory=dict)
    observed: str = ""

    @property
    def ok(self) -> bool:
        return all(v is True for v in self.checks.values())


@dataclass
class ScenarioResult:
    name: str
    duration: float = 0.0
    tried: int = 0
    survived: int = 0
    finished_before_kill: int = 0
    failures: list[dict] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def add(self, outcome: Outcome) -> None:
        if outcome.landed and outcome.observed:
            self.extra.setdefault("states_at_kill", {})
            states = self.extra["states_at_kill"]
            states[outcome.observed] = states.get(outcome.observed, 0) + 1
        if not outcome.landed:
            self.finished_before_kill += 1
            return
        self.tried += 1
        if outcome.ok:
            self.survived += 1
        elif len(self.failures) < 10:
            self.failures.append(dataclasses.asdict(outcome))

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def delays(rng: random.Random, n: int, duration: float, start: float = 0.0) -> list[float]:
    """``n`` kill delays spread over ``[start, duration)``: one per stratum, jittered (seeded)."""
    span = max(duration - start, 0.001)
    points = [start + (i + rng.random()) / n * span for i in range(n)]
    rng.shuffle(points)
    return points


# -- what a finished index says -------------------------------------------------------------


def _askers_queries(corpus, extra: tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
    askers = sorted(corpus.current.values())
    queries = [q["query"] for q in corpus.queries()[:10]] + list(extra)
    return askers, queries


def search_answers(home: Path, askers: list[str], queries: list[str], mode: str = "keyword",
                   auto_index: bool = True) -> dict[str, Any]:
    from project_history_recall.recall import Recall

    settings = world_settings(home, auto_index)
    recall = Recall(home, settings=settings)
    out: dict[str, Any] = {}
    for asker in askers:
        for query in queries:
            try:
                reply = recall.search(query, session_id=asker, mode=mode, limit=10)
            except Exception as exc:  # the check reports it; a crash here is a failure, not a stop
                out[f"{asker}|{query}"] = f"raised {type(exc).__name__}: {exc}"
                continue
            if reply.get("success"):
                out[f"{asker}|{query}"] = [r["session_id"] for r in reply["results"]]
            else:
                out[f"{asker}|{query}"] = f"error {reply.get('code')}"
    return out


def world_settings(home: Path, auto_index: bool = True):
    from project_history_recall.hermes_home import HermesHome

    settings = HermesHome(home).settings()
    return dataclasses.replace(settings, auto_index=auto_index)


def matching_sessions(home: Path, askers: list[str], queries: list[str]) -> dict[str, set[str]]:
    """Every session in each asker's project that has an entry matching each query (no limit)."""
    from project_history_recall.recall import Recall
    from project_history_recall.search.keyword import keyword_hits
    from project_history_recall.search.scope import Filters, compute_scope
    from project_history_recall.tokenizer import plan_query

    recall = Recall(home)
    conn = recall.index.connect_readonly()
    assert conn is not None
    out: dict[str, set[str]] = {}
    try:
        resolver = recall.workspace.resolver()
        for asker in askers:
            identity = recall.workspace.asker(conn, resolver, asker, None).identity
            scope = compute_scope(conn, resolver, identity, asker)
            for query in queries:
                hits = keyword_hits(conn, plan_query(query), scope.session_ids, Filters(), limit=10**7)
                out[f"{asker}|{query}"] = {h.session_id for h in hits}
    finally:
        conn.close()
    return out


def chunk_groups(path: Path) -> dict[tuple, list[tuple]]:
    groups: dict[tuple, list[tuple]] = defaultdict(list)
    for row in dg.chunk_rows(dg.open_plain(path)):
        groups[(row[0], row[1], row[4])].append(row)
    return groups


# -- checks after a kill ----------------------------------------------------------------------


@dataclass
class Expectation:
    """What any interrupted state may hold, and what the finished one must."""

    home: Path
    askers: list[str]
    queries: list[str]
    allowed_sessions: dict[str, set[str]]  # sid -> hashes of the versions it may have
    allowed_results: dict[str, set[str]]  # "asker|query" -> sessions that may be returned
    final_digest: dict[str, Any]
    final_answers: dict[str, Any]
    final_chunks: dict[tuple, list[tuple]] | None = None
    mode: str = "keyword"


def index_path(home: Path) -> Path:
    return world.data_dir(home) / "index.db"


def check_opens(home: Path) -> tuple[bool | str, bool]:
    """``(verdict, exists)``: the interrupted file is sound and the plugin opens it in place."""
    from project_history_recall.index.store import Index, schema_version

    path = index_path(home)
    if not path.exists() or path.stat().st_size == 0:
        return True, False
    conn = dg.open_plain(path)
    try:
        verdict = dg.integrity(conn)
        if verdict != "ok":
            return f"integrity_check: {verdict}", True
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, schema_version()):
            return f"user_version {version}", True
        if version and "entries_fts" in dg.tables(conn):
            fts = dg.fts_integrity(conn)
            if fts != "ok":
                return f"fts integrity-check: {fts}", True
    finally:
        conn.close()
    before = {p.name for p in path.parent.iterdir()}
    try:
        Index(path.parent).connect().close()
    except Exception as exc:
        return f"Index.connect raised {type(exc).__name__}: {exc}", True
    aside = [p.name for p in path.parent.iterdir() if p.name not in before and p.name.startswith("index.db.")]
    if aside:
        return f"Index.connect moved the file aside: {aside}", True
    return True, True


def check_atomic(exp: Expectation) -> bool | str:
    path = index_path(exp.home)
    conn = dg.open_plain(path)
    try:
        if "sessions" not in dg.tables(conn):
            return True
        bad = [sid for sid, h in dg.per_session(conn).items() if h not in exp.allowed_sessions.get(sid, set())]
        keys = dg._key_hashes(dg._entry_keys(conn))
        fts = dg.fts_postings(conn, keys)
    finally:
        conn.close()
    if bad:
        return f"{len(bad)} sessions neither old nor new, e.g. {bad[:3]}"
    if fts["orphans"] or fts["missing_docs"]:
        return f"fts orphans {fts['orphans']}, entries without postings {fts['missing_docs']}"
    if exp.final_chunks is not None:
        groups = chunk_groups(path)
        torn = [k for k, rows in groups.items() if rows != exp.final_chunks.get(k)]
        if torn:
            return f"{len(torn)} messages with partial or wrong vectors, e.g. {torn[:2]}"
    return True


def check_partial_search(exp: Expectation) -> bool | str:
    forget_process_caches()
    answers = search_answers(exp.home, exp.askers, exp.queries[:4], mode="keyword", auto_index=False)
    for key, value in answers.items():
        if isinstance(value, str):
            if value.startswith("raised"):
                return f"{key}: {value}"
            continue  # a clear error (no_index while nothing was committed yet)
        wrong = set(value) - exp.allowed_results.get(key, set())
        if wrong:
            return f"{key}: returned {sorted(wrong)[:3]} which do not match in the asker's project"
    return True


def forget_process_caches() -> None:
    """This process ran refreshes of the same index path before the file was put back to an
    older state behind its back: the indexer's in-process "unchanged" cache would skip the
    refresh (a real process after a crash is a new process; see the crash tests for the
    narrower case where this cache matters)."""
    from project_history_recall.index import indexer

    getattr(indexer, "_unchanged", {}).clear()


def check_recovers(exp: Expectation, embed: bool) -> bool | str:
    from project_history_recall.recall import Recall

    forget_process_caches()
    recall = Recall(exp.home)
    try:
        recall.refresh()
        if embed:
            out = recall.embed()
            if out.get("semantic_status") != "ready":
                return f"embed after the kill: {out}"
    except Exception as exc:
        return f"next run raised {type(exc).__name__}: {exc}"
    got = dg.digest(index_path(exp.home), exp.queries)
    diff = dg.differences(got, exp.final_digest)
    return True if not diff else f"digest differs in {diff}"


def check_search_after(exp: Expectation) -> bool | str:
    forget_process_caches()
    got = search_answers(exp.home, exp.askers, exp.queries, mode=exp.mode)
    diff = [k for k in exp.final_answers if got.get(k) != exp.final_answers[k]]
    return True if not diff else f"{len(diff)} answers differ, e.g. {diff[0]}: {got.get(diff[0])}"


def run_checks(exp: Expectation, embed: bool = False) -> dict[str, Any]:
    checks: dict[str, Any] = {}
    opens, exists = check_opens(exp.home)
    checks["opens"] = opens
    if opens is True and exists:
        checks["atomic"] = check_atomic(exp)
        checks["partial_search"] = check_partial_search(exp)
    checks["recovers"] = check_recovers(exp, embed)
    if checks["recovers"] is True:
        checks["search_after"] = check_search_after(exp)
    return checks


# -- scenarios ------------------------------------------------------------------------------------


def _measure(code: str, home: Path, log: Path, timeout: float = 300.0) -> float:
    child = python_c(code, str(home), log=log)
    if not child.wait_line("READY", 60):
        raise RuntimeError(f"child never got ready: {child.stderr()}")
    if not child.wait_line("DONE", timeout):
        child.kill()
        raise RuntimeError(f"uninterrupted run did not finish: {child.stderr()}")
    duration = time.monotonic() - (child.ready_at or child.started)
    child.finish(30)
    return duration


def _kill_at(code: str, home: Path, delay: float, log: Path) -> tuple[bool, Child]:
    child = python_c(code, str(home), log=log)
    if not child.wait_line("READY", 60):
        child.kill()
        raise RuntimeError(f"child never got ready: {child.stderr()}")
    time.sleep(delay)
    landed = child.kill() and not any(line.startswith("DONE") for line in child.lines)
    return landed, child


def _final_hashes(home: Path) -> dict[str, str]:
    conn = dg.open_plain(index_path(home))
    try:
        return dg.per_session(conn)
    finally:
        conn.close()


def _union(*maps: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for mapping in maps:
        for key, value in mapping.items():
            out[key] |= value
    return dict(out)


def _kill_loop(name: str, code: str, exp: Expectation, reset, duration: float, kills: int, rng: random.Random,
               logs: Path, embed: bool = False) -> ScenarioResult:
    result = ScenarioResult(name, duration=round(duration, 3))
    for i, delay in enumerate(delays(rng, kills, duration * 0.95)):
        for _attempt in range(3):  # a kill that came after the run finished is retried earlier
            reset()
            landed, _ = _kill_at(code, exp.home, delay, logs / f"{name}-{i}.log")
            outcome = Outcome(name, round(delay, 4), landed)
            if landed:
                outcome.observed = observed_state(exp.home)
                outcome.checks = run_checks(exp, embed=embed)
            result.add(outcome)
            if landed:
                break
            delay *= 0.6
    return result


def observed_state(home: Path) -> str:
    """Where the kill landed, as the index shows it: sessions committed, vectors committed."""
    path = index_path(home)
    if not path.exists() or path.stat().st_size == 0:
        return "no index file yet"
    try:
        conn = dg.open_plain(path)
        try:
            names = dg.tables(conn)
            sessions = conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] if "sessions" in names else 0
            chunks = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] if "chunks" in names else 0
        finally:
            conn.close()
    except Exception as exc:
        return f"unreadable: {exc}"
    return f"{sessions} sessions, {chunks} vectors"


def scenario_full_build(corpus, kills: int, rng: random.Random, work: Path) -> ScenarioResult:
    home = corpus.hermes_home
    askers, queries = _askers_queries(corpus)
    world.restore_index(home, None)
    duration = _measure(REFRESH_CODE, home, work / "logs" / "full-reference.log")
    final = dg.digest(index_path(home), queries)
    exp = Expectation(home, askers, queries, {sid: {h} for sid, h in _final_hashes(home).items()},
                      matching_sessions(home, askers, queries), final, search_answers(home, askers, queries))
    return _kill_loop("full_build", REFRESH_CODE, exp, lambda: world.restore_index(home, None), duration, kills, rng,
                      work / "logs")


def scenario_incremental(corpus, kills: int, rng: random.Random, work: Path) -> ScenarioResult:
    from project_history_recall.recall import Recall

    home = world.clone_home(corpus.hermes_home, work / "incremental" / "hermes")
    askers, queries = _askers_queries(corpus, ("quokka deploy", "follow-up rollout", "Retitled"))
    Recall(home).refresh()
    before_hashes = _final_hashes(home)
    before_results = matching_sessions(home, askers, queries)
    snapshot = world.snapshot_index(home, work / "incremental" / "index-before.db")
    counts = world.mutate(home, rng.randrange(10**6), corpus.work)
    world.restore_index(home, snapshot)
    duration = _measure(REFRESH_CODE, home, work / "logs" / "incremental-reference.log")
    final = dg.digest(index_path(home), queries)
    after_hashes = _final_hashes(home)
    allowed = {sid: {before_hashes.get(sid), after_hashes.get(sid)} - {None}
               for sid in set(before_hashes) | set(after_hashes)}
    exp = Expectation(home, askers, queries, allowed, _union(before_results, matching_sessions(home, askers, queries)),
                      final, search_answers(home, askers, queries))
    result = _kill_loop("incremental_refresh", REFRESH_CODE, exp, lambda: world.restore_index(home, snapshot), duration,
                        kills, rng, work / "logs")
    result.extra["changes"] = counts
    return result


def scenario_embed(corpus, server_url: str, kills: int, rng: random.Random, work: Path) -> ScenarioResult:
    from project_history_recall.recall import Recall

    home = world.clone_home(corpus.hermes_home, work / "embed" / "hermes")
    world.write_config(home, embedding=world.remote_embedding(server_url))
    world.consent_all(home, server_url)
    askers, queries = _askers_queries(corpus)
    Recall(home).refresh()
    hashes = _final_hashes(home)
    results = matching_sessions(home, askers, queries)
    snapshot = world.snapshot_index(home, work / "embed" / "index-before.db")
    world.restore_index(home, snapshot)
    duration = _measure(EMBED_CODE, home, work / "logs" / "embed-reference.log")
    final = dg.digest(index_path(home), queries)
    exp = Expectation(home, askers, queries, {sid: {h} for sid, h in hashes.items()}, results, final,
                      search_answers(home, askers, queries, mode="semantic"), chunk_groups(index_path(home)),
                      mode="semantic")
    result = _kill_loop("embedding_run", EMBED_CODE, exp, lambda: world.restore_index(home, snapshot), duration, kills,
                        rng, work / "logs", embed=True)
    result.extra["chunks"] = final["chunk_count"]
    return result


def scenario_phr_index(corpus, kills: int, rng: random.Random, work: Path) -> ScenarioResult:
    """``phr index`` (an index job with its record) killed: the next request is not blocked by
    the dead job's record, status says it failed, and the index completes."""
    from project_history_recall.recall import Recall

    home = world.clone_home(corpus.hermes_home, work / "phr-index" / "hermes")
    askers, queries = _askers_queries(corpus)
    args = ["-m", "project_history_recall.faces.cli", "--home", str(home), "index", "--json"]
    world.restore_index(home, None)
    started = time.monotonic()
    child = spawn(args, work / "logs" / "phr-reference.log")
    if child.finish(300) != 0:
        raise RuntimeError(f"phr index failed: {child.stderr()}")
    duration = time.monotonic() - started
    final = dg.digest(index_path(home), queries)
    exp = Expectation(home, askers, queries, {sid: {h} for sid, h in _final_hashes(home).items()},
                      matching_sessions(home, askers, queries), final, search_answers(home, askers, queries))
    result = ScenarioResult("phr_index_job", duration=round(duration, 3))
    for i, delay in enumerate(delays(rng, kills, duration, start=min(0.25, duration / 3))):
        world.restore_index(home, None)
        child = spawn(args, work / "logs" / f"phr-{i}.log")
        time.sleep(delay)
        outcome = Outcome("phr_index_job", round(delay, 4), child.kill())
        if outcome.landed:
            outcome.observed = observed_state(home)
            opens, exists = check_opens(home)
            outcome.checks["opens"] = opens
            if opens is True and exists:
                outcome.checks["atomic"] = check_atomic(exp)
            forget_process_caches()
            recall = Recall(home)
            status = recall.status()
            job = status.get("job")
            outcome.checks["status_not_stuck"] = (
                True if job is None or job["state"] in ("failed", "done") else f"job left {job['state']}")
            reply = Recall(home).index_in_foreground(reason="stress")
            outcome.checks["next_job_runs"] = (
                True if reply.get("success") and not reply.get("already_running") else f"next index: {reply}")
            got = dg.digest(index_path(home), queries)
            diff = dg.differences(got, final)
            outcome.checks["recovers"] = True if not diff else f"digest differs in {diff}"
            if outcome.checks["recovers"] is True:
                outcome.checks["search_after"] = check_search_after(exp)
        result.add(outcome)
    return result


def scenario_state_files(kills: int, rng: random.Random, work: Path) -> ScenarioResult:
    """Writers of consent.json, embedding_usage.json, last_refresh.json and a job record,
    killed in a loop: every file always parses, and the usage counters never go back."""
    from project_history_recall.services import jobs
    from project_history_recall.services.consent import load_consent, load_sent

    folder = work / "state-files"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    result = ScenarioResult("state_files")
    requests_seen = 0
    for _ in range(kills):
        child = python_c(STATE_FILES_CODE, str(folder), str(rng.randrange(10**9)), log=work / "logs" / "state.log")
        if not child.wait_line("READY", 60):
            raise RuntimeError(f"state-file writer never got ready: {child.stderr()}")
        delay = rng.uniform(0.0, 0.4)
        time.sleep(delay)
        outcome = Outcome("state_files", round(delay, 4), child.kill())
        if outcome.landed:
            checks = outcome.checks
            for name in ("consent.json", "embedding_usage.json", "last_refresh.json", "jobs/stress-job.json"):
                try:
                    data = json.loads((folder / name).read_text(encoding="utf-8"))
                    checks[name] = True if isinstance(data, dict) else f"{name} is not an object"
                except (OSError, ValueError) as exc:
                    checks[name] = f"{name}: {type(exc).__name__}: {exc}"
            consent = load_consent(folder)
            checks["consent_loads"] = True if consent is not None and consent.projects else "no consent after a kill"
            usage = load_sent(folder)
            checks["usage_monotonic"] = (True if usage.total.requests >= max(requests_seen, 1)
                                         else f"requests {usage.total.requests} < {requests_seen}")
            requests_seen = max(requests_seen, usage.total.requests)
            job = jobs.JobStore(folder).read("stress-job")
            checks["job_record_loads"] = True if job is not None else "job record unreadable"
        result.add(outcome)
    strays = [p.name for p in folder.rglob("*.tmp")]
    result.extra["stray_temp_files"] = len(strays)
    result.extra["usage_requests_counted"] = requests_seen
    return result


def run(work: Path, *, sessions: int, messages: int, embed_sessions: int, embed_messages: int,
        kills: dict[str, int], seed: int = 6, server_url: str | None = None) -> dict[str, Any]:
    """Every crash scenario; ``kills`` maps scenario name to the number of kill points."""
    rng = random.Random(seed)
    work.mkdir(parents=True, exist_ok=True)
    corpus = world.corpus_home(work / "corpus", sessions, messages, seed=seed)
    results: list[ScenarioResult] = []
    started = time.monotonic()
    if kills.get("full_build"):
        results.append(scenario_full_build(corpus, kills["full_build"], rng, work))
    if kills.get("incremental_refresh"):
        results.append(scenario_incremental(corpus, kills["incremental_refresh"], rng, work))
    if kills.get("phr_index_job"):
        results.append(scenario_phr_index(corpus, kills["phr_index_job"], rng, work))
    if kills.get("embedding_run"):
        small = world.corpus_home(work / "embed-corpus", embed_sessions, embed_messages, seed=seed + 1)
        if server_url is None:
            from .fake import embedding_server

            with embedding_server() as server:
                results.append(scenario_embed(small, server.base_url, kills["embedding_run"], rng, work))
        else:
            results.append(scenario_embed(small, server_url, kills["embedding_run"], rng, work))
    if kills.get("state_files"):
        results.append(scenario_state_files(kills["state_files"], rng, work))
    index_kills = [r for r in results if r.name != "state_files"]
    return {
        "seconds": round(time.monotonic() - started, 1),
        "corpus": {"sessions": sessions, "messages": messages, "embed_sessions": embed_sessions,
                   "embed_messages": embed_messages},
        "kill_points_tried": sum(r.tried for r in index_kills),
        "kill_points_survived": sum(r.survived for r in index_kills),
        "state_file_kills_tried": sum(r.tried for r in results if r.name == "state_files"),
        "state_file_kills_survived": sum(r.survived for r in results if r.name == "state_files"),
        "scenarios": [r.as_dict() for r in results],
    }


def failures(report: dict[str, Any]) -> list[dict]:
    return [f for s in report["scenarios"] for f in s["failures"]]


def sqlite_version() -> str:
    return sqlite3.sqlite_version
