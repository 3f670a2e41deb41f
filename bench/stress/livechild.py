"""The processes of the live run (``python -m bench.stress.livechild ROLE HOME OUT SECONDS [SEED]``).

Plugin roles run with :func:`instrument_writer_lock`: while a process holds the index's
writer lock it appends ``pid start end overlap stale`` to ``$PHR_LOCK_LOG`` (monotonic ns) and
holds a marker file created with ``O_EXCL`` holding its pid — a second holder at the same time
finds the marker of a live process and records an overlap (a marker whose process is gone was
left by a holder that died holding the lock, and is taken over).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sys
import time
from pathlib import Path


def _alive(pid: int) -> bool:
    """Running, not a zombie (a process that exited, e.g. with a daemon refresh thread still
    holding the lock, stays a zombie until the test harness reaps it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def instrument_writer_lock() -> None:
    log = os.environ.get("PHR_LOCK_LOG")
    if not log:
        return
    from project_history_recall.index import store as index_module

    original = index_module.Index.writer

    def claim(marker: Path) -> str:
        """Create the marker with our pid: "ok", "overlap" (a live holder has it) or "stale" (its
        holder died holding the lock — a daemon refresh thread at interpreter exit — so it is ours)."""
        for _ in range(2):
            try:
                fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                try:
                    holder = int(marker.read_text() or "0")
                except (OSError, ValueError):
                    holder = 0
                if holder and holder != os.getpid() and _alive(holder):
                    return "overlap"
                with contextlib.suppress(OSError):
                    marker.unlink()
                continue
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            return "ok"
        return "overlap"

    @contextlib.contextmanager
    def writer(self, timeout):  # type: ignore[no-untyped-def]
        with original(self, timeout):
            marker = self.data_dir / ".stress-writer-held"
            start = time.monotonic_ns()
            state = claim(marker)
            try:
                yield
            finally:
                end = time.monotonic_ns()
                if state != "overlap":
                    with contextlib.suppress(OSError):
                        marker.unlink()
                fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    os.write(fd, f"{os.getpid()} {start} {end} {int(state == 'overlap')} {int(state == 'stale')}\n"
                             .encode())
                finally:
                    os.close(fd)

    index_module.Index.writer = writer  # type: ignore[method-assign]


def _out(path: Path):
    return open(path, "a", buffering=1, encoding="utf-8")


def writer(home: Path, out: Path, seconds: float, seed: int) -> None:
    from hermes_state import SessionDB

    rng = random.Random(seed)
    db = SessionDB(db_path=home / "state.db")
    sessions = [r["id"] for r in db._conn.execute("SELECT id FROM sessions WHERE id LIKE 'live-w-%'")]
    deadline = time.monotonic() + seconds
    n = 0
    print("READY", flush=True)
    with _out(out) as fh:
        while time.monotonic() < deadline:
            sid = rng.choice(sessions)
            token = f"livetok{seed:02d}x{n:06d}q"
            started = time.perf_counter()
            mid = db.append_message(sid, "user" if n % 2 == 0 else "assistant", f"{token} live note {n}",
                                    timestamp=time.time())
            took = time.perf_counter() - started
            fh.write(json.dumps({"n": n, "sid": sid, "mid": mid, "token": token, "at": time.time(), "dt": took})
                     + "\n")
            n += 1
        started = time.perf_counter()
        db.close()  # a WAL TRUNCATE checkpoint: it waits (up to Hermes's 1 s) for readers such as our refresh
        fh.write(json.dumps({"close_s": time.perf_counter() - started}) + "\n")


def rewinder(home: Path, out: Path, seconds: float, seed: int) -> None:
    from hermes_state import SessionDB

    rng = random.Random(seed)
    db = SessionDB(db_path=home / "state.db")
    sessions = [r["id"] for r in db._conn.execute("SELECT id FROM sessions WHERE id LIKE 'live-r-%'")]
    deadline = time.monotonic() + seconds
    ops = 0
    print("READY", flush=True)
    while time.monotonic() < deadline:
        sid = rng.choice(sessions)
        first = db.append_message(sid, "user", f"rewind candidate {ops}", timestamp=time.time())
        db.append_message(sid, "assistant", f"an answer that will be rewound {ops}", timestamp=time.time())
        if ops % 3 == 0:
            db.rewind_to_message(sid, first)
        if ops % 4 == 0:
            db.set_session_title(sid, f"Live title {ops} {rng.randrange(10**6)}")
        ops += 1
        time.sleep(0.01)
    db.close()
    out.write_text(json.dumps({"ops": ops}))


def searcher(home: Path, out: Path, seconds: float, seed: int, writer_log: Path) -> None:
    from project_history_recall.recall import Recall

    instrument_writer_lock()
    rng = random.Random(seed)
    recall = Recall(home, background_embedding=False)
    committed: list[dict] = []
    offset = 0
    deadline = time.monotonic() + seconds
    print("READY", flush=True)
    with _out(out) as fh:
        while time.monotonic() < deadline:
            try:
                with open(writer_log, encoding="utf-8") as log:
                    log.seek(offset)
                    chunk = log.read()
            except OSError:
                chunk = ""
            complete, _, _rest = chunk.rpartition("\n")
            offset += len(complete.encode("utf-8")) + (1 if complete else 0)
            rows = [json.loads(line) for line in complete.splitlines() if line.strip()]
            committed += [r for r in rows if "token" in r]  # (the writer's last line is its close() time)
            if not committed:
                time.sleep(0.02)
                continue
            started_at = time.time()
            target = committed[-1] if rng.random() < 0.7 else rng.choice(committed)
            t0 = time.perf_counter()
            reply = recall.answer(lambda t=target: recall.search(t["token"], session_id="live-ask",
                                                                            mode="keyword", limit=10))
            took = time.perf_counter() - t0
            found = any(r.get("message_id") == target["mid"] for r in reply.get("results", []))
            fh.write(json.dumps({"at": started_at, "dt": took, "target_at": target["at"], "found": found,
                                 "status": reply.get("index_status", "fresh"), "success": reply.get("success"),
                                 "code": reply.get("code")}) + "\n")


def refresher(home: Path, out: Path, seconds: float, seed: int, force: bool = False) -> None:
    from project_history_recall.recall import Recall

    instrument_writer_lock()
    deadline = time.monotonic() + seconds
    runs = busy = 0
    print("READY", flush=True)
    while time.monotonic() < deadline:
        try:
            Recall(home).refresh(force=force, lock_timeout=10)
            runs += 1
        except Exception as exc:
            if getattr(exc, "code", None) != "index_busy":
                raise
            busy += 1
        time.sleep(0.05)  # a loop that re-takes the lock at once would starve the others (filelock is not FIFO)
    out.write_text(json.dumps({"runs": runs, "busy": busy}))


def embedder(home: Path, out: Path, seconds: float, seed: int) -> None:
    from project_history_recall.recall import Recall

    instrument_writer_lock()
    deadline = time.monotonic() + seconds
    runs = embedded = busy = 0
    print("READY", flush=True)
    while time.monotonic() < deadline:
        try:
            result = Recall(home).embed()
        except Exception as exc:  # the writer lock held longer than the embedder waits (see the live tests)
            if getattr(exc, "code", None) != "index_busy":
                raise
            busy += 1
            continue
        embedded += int(result.get("embedded", 0))
        runs += 1
        time.sleep(0.1)
    out.write_text(json.dumps({"runs": runs, "embedded": embedded, "index_busy": busy}))


def main(argv: list[str]) -> int:
    role, home, out, seconds = argv[0], Path(argv[1]), Path(argv[2]), float(argv[3])
    seed = int(argv[4]) if len(argv) > 4 else 0
    if role == "writer":
        writer(home, out, seconds, seed)
    elif role == "rewinder":
        rewinder(home, out, seconds, seed)
    elif role == "searcher":
        searcher(home, out, seconds, seed, Path(argv[5]))
    elif role == "refresher":
        refresher(home, out, seconds, seed)
    elif role == "rebuilder":
        refresher(home, out, seconds, seed, force=True)
    elif role == "embedder":
        embedder(home, out, seconds, seed)
    else:
        raise SystemExit(f"unknown role {role}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
