"""A real Hermes writing alongside: one process appends messages through ``SessionDB`` as fast
as it can, a second rewinds and retitles; meanwhile other processes search, refresh and embed
for a bounded time.

Figures: the writer's ``append_message`` latency (p50/p99/max) alone and under our load — our
processes only read ``state.db``, so nothing of ours should ever make it wait; the query
latency under load; whether every message committed before a search started was visible to
it; and that two index writers never overlapped (:mod:`.livechild` instruments the lock).
"""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path
from typing import Any

from . import world
from .procs import spawn


def build_home(root: Path, base_url: str, filler: int = 150) -> Path:
    from hermes_state import SessionDB

    if root.exists():
        shutil.rmtree(root)
    home = root / "hermes"
    repo = world.git_init(root / "work" / "app")
    db = SessionDB(db_path=home / "state.db")
    try:
        for n in range(filler):
            sid = f"live-f-{n:03d}"
            db.create_session(sid, "cli", cwd=str(repo))
            for k in range(6):
                db.append_message(sid, "user" if k % 2 == 0 else "assistant",
                                  f"filler {n}.{k} about the deploy pipeline and the retry budget", timestamp=1.7e9 + k)
        for n in range(4):
            db.create_session(f"live-w-{n}", "cli", cwd=str(repo))
            db.create_session(f"live-r-{n}", "cli", cwd=str(repo))
        db.create_session("live-ask", "cli", cwd=str(repo))
    finally:
        db.close()
    world.write_config(home, embedding=world.remote_embedding(base_url))
    world.consent_all(home, base_url)
    from project_history_recall.recall import Recall

    Recall(home).refresh()
    return home


def _q(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 5)


def _lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _overlaps(log: Path) -> dict[str, Any]:
    if not log.exists():
        return {"holds": 0, "overlaps": 0, "marker_collisions": 0, "processes": 0}
    holds = []
    stale = 0
    for line in log.read_text().splitlines():
        pid, start, end, overlap, *rest = line.split()
        holds.append((int(start), int(end), int(pid), int(overlap)))
        stale += int(rest[0]) if rest else 0
    holds.sort()
    overlaps = sum(1 for a, b in itertools.pairwise(holds) if b[0] < a[1])
    longest = max(((e - s) / 1e9 for s, e, _, _ in holds), default=0.0)
    return {"holds": len(holds), "overlaps": overlaps, "marker_collisions": sum(h[3] for h in holds),
            "markers_of_dead_holders": stale,
            "processes": len({h[2] for h in holds}), "longest_hold_s": round(longest, 4)}


def _writer_phase(home: Path, out: Path, seconds: float, seed: int) -> list[dict]:
    child = spawn(["-m", "bench.stress.livechild", "writer", str(home), str(out), str(seconds), str(seed)],
                  out.with_suffix(".err"))
    child.wait_line("READY", 60)
    child.finish(seconds + 60)
    return _lines(out)


def _committed(home: Path, rows: list[dict]) -> int:
    """How many of the writer's logged appends are in state.db afterwards."""
    from project_history_recall.sources.hermes import connect_readonly

    conn = connect_readonly(home / "state.db")
    try:
        ids = {row[0] for row in conn.execute("SELECT id FROM messages")}
    finally:
        conn.close()
    return sum(1 for r in rows if r["mid"] in ids)


def run(work: Path, server_url: str, *, seconds: float, baseline_seconds: float, lock_seconds: float) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    home = build_home(work / "live", server_url)
    logs = work / "live-logs"
    if logs.exists():
        shutil.rmtree(logs)
    logs.mkdir()
    baseline_rows = _writer_phase(home, logs / "baseline-writer.jsonl", baseline_seconds, 1)
    baseline = [r for r in baseline_rows if "dt" in r]
    baseline_close = [r["close_s"] for r in baseline_rows if "close_s" in r]

    lock_log = logs / "writer-lock.log"
    env = {"PHR_LOCK_LOG": str(lock_log)}
    writer_log = logs / "writer.jsonl"
    roles = [("writer", [str(writer_log), "2"]), ("rewinder", [str(logs / "rewinder.json"), "3"]),
             ("searcher", [str(logs / "searcher.jsonl"), "4", str(writer_log)]),
             ("refresher", [str(logs / "refresher.json"), "5"]), ("embedder", [str(logs / "embedder.json"), "6"])]
    children = []
    for role, (out, *rest) in roles:
        args = ["-m", "bench.stress.livechild", role, str(home), out, str(seconds), *rest]
        children.append((role, spawn(args, logs / f"{role}.err", env=env)))
    for _, child in children:
        child.wait_line("READY", 60)
    for role, child in children:
        code = child.finish(seconds + 120)
        if code != 0:
            raise RuntimeError(f"live {role} failed ({code}): {child.stderr()}")
    loaded = [r for r in _lines(writer_log) if "dt" in r]
    closes = [r["close_s"] for r in _lines(writer_log) if "close_s" in r]
    searches = _lines(logs / "searcher.jsonl")
    load_locks = _overlaps(lock_log)

    # The lock alone: three rebuilders (one long transaction each) and an embedder at once.
    contention_log = logs / "contention-lock.log"
    env = {"PHR_LOCK_LOG": str(contention_log)}
    contenders = [spawn(["-m", "bench.stress.livechild", role, str(home), str(logs / f"c-{i}.json"),
                         str(lock_seconds), str(i)], logs / f"c-{i}.err", env=env)
                  for i, role in enumerate(["rebuilder", "rebuilder", "rebuilder", "embedder", "refresher"])]
    for child in contenders:
        child.wait_line("READY", 60)
    for child in contenders:
        if child.finish(lock_seconds + 180) != 0:
            raise RuntimeError(f"lock contender failed: {child.stderr()}")
    contention = _overlaps(contention_log)

    checked = [s for s in searches if s.get("success") and s["target_at"] < s["at"]]
    fresh_misses = [s for s in checked if not s["found"] and s["status"] == "fresh"]
    honest_misses = [s for s in checked if not s["found"] and s["status"] != "fresh"]
    base_dt = [r["dt"] for r in baseline]
    load_dt = [r["dt"] for r in loaded]
    return {
        "seconds": seconds,
        "writer_baseline": {"appends": len(base_dt), "p50_s": _q(base_dt, 0.5), "p99_s": _q(base_dt, 0.99),
                            "max_s": round(max(base_dt, default=0.0), 5),
                            "close_s": round(baseline_close[0], 4) if baseline_close else None},
        "writer_under_load": {"appends": len(load_dt), "p50_s": _q(load_dt, 0.5), "p99_s": _q(load_dt, 0.99),
                              "max_s": round(max(load_dt, default=0.0), 5),
                              "appends_per_s": round(len(load_dt) / max(seconds, 1e-9), 1),
                              "committed": _committed(home, loaded),
                              "close_s": round(closes[0], 4) if closes else None},
        "hermes_busy_timeout_s": 1.0,
        "rewinder": json.loads((logs / "rewinder.json").read_text()) if (logs / "rewinder.json").exists() else {},
        "refresher": json.loads((logs / "refresher.json").read_text()) if (logs / "refresher.json").exists() else {},
        "embedder": json.loads((logs / "embedder.json").read_text()) if (logs / "embedder.json").exists() else {},
        "searches": len(searches),
        "search_errors": sum(1 for s in searches if not s.get("success")),
        "query_p50_s": _q([s["dt"] for s in searches], 0.5),
        "query_p95_s": _q([s["dt"] for s in searches], 0.95),
        "query_max_s": round(max((s["dt"] for s in searches), default=0.0), 4),
        "visibility_checked": len(checked),
        "visible": sum(1 for s in checked if s["found"]),
        "missed_while_fresh": len(fresh_misses),
        "missed_while_saying_updating": len(honest_misses),
        "statuses": {k: sum(1 for s in searches if s["status"] == k) for k in {s["status"] for s in searches}},
        "writer_lock_under_load": load_locks,
        "writer_lock_contention": contention,
    }
