"""Index jobs: a build or refresh that can outlive the call that asked for it.

Every index *request* (the ``project_history_index`` tool, ``/recall index``,
``phr index``, the first automatic build) becomes a job with a record in
``<data_dir>/jobs/<id>.json``, written atomically, so any process can see what is
running and how far it got. A job runs either here (a thread, or the caller's own
thread) or as a detached subprocess (``python -m project_history_recall.services.jobs run
--home H --job ID``) that survives the tool call and the process that started it.

Two requests never start two writers: the check for a running job and the
creation of a new record happen under ``jobs/start.lock``, and a second request
gets the running job back. (The index's own writer lock still guards the file.)
A record is trusted as running only while its process is alive and its
heartbeat is fresh, so a killed job never blocks the next one for long.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from project_history_recall.errors import RecallError, no_db
from project_history_recall.index.indexer import pending_changes
from project_history_recall.index.vectors import background_running, start_background
from project_history_recall.locks import exclusive
from project_history_recall.services.semantic import SemanticService
from project_history_recall.services.workspace import Workspace
from project_history_recall.when import format_when

JOBS_DIR = "jobs"
LAST_REFRESH_FILE = "last_refresh.json"
EMBED_LOG = "embed.log"
HEARTBEAT_SECONDS = 2.0
STALE_SECONDS = 30.0  # a running record whose heartbeat is older than this is dead
KEEP_FINISHED = 20
START_LOCK_WAIT = 10.0
JOB_LOCK_WAIT = 120.0  # how long a job waits for the index writer lock (an increment is seconds at most)
TOOL_BUDGET = 300.0  # the index tool's own time budget
LARGE_HISTORY = 1000  # more unindexed sessions than this: the tool hands the work to a background job
BACKGROUND_GLANCE = 1.0  # how long a caller watches a large background job before answering
ACTIVE = ("starting", "running")

_children: dict[int, subprocess.Popen] = {}  # detached jobs this process started (reaped on poll)
_finished_here: dict[str, threading.Event] = {}  # jobs running in this process, set when they end


@dataclass
class Job:
    id: str
    force: bool = False
    reason: str = "tool"
    state: str = "starting"  # starting | running | done | failed
    detached: bool = False
    pid: int | None = None
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    done: int = 0
    total: int = 0
    report: dict | None = None
    error: dict | None = None

    @property
    def finished(self) -> bool:
        return self.state not in ACTIVE

    def as_dict(self) -> dict:
        """The shape the faces show: state, progress and readable times (the report rides separately)."""
        data = {
            "id": self.id,
            "state": self.state,
            "reason": self.reason,
            "force": self.force,
            "detached": self.detached,
            "pid": self.pid,
            "created": format_when(self.created_at),
            "finished": format_when(self.finished_at) if self.finished_at else "",
            "done": self.done,
            "total": self.total,
            "progress": f"{self.done}/{self.total} sessions" if self.total else "",
            "seconds": round((self.finished_at or time.time()) - (self.started_at or self.created_at), 2),
        }
        if self.error:
            data["error"] = self.error
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Job:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def new_job_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def write_json_atomic(path: Path, data: dict) -> None:
    """Write ``data`` so a reader sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, ensure_ascii=False, default=str)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _reap() -> None:
    """Collect detached children that ended, so none lingers as a zombie in a long-lived host."""
    for pid, child in list(_children.items()):
        if child.poll() is not None:
            _children.pop(pid, None)


def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    child = _children.get(pid)
    if child is not None:
        if child.poll() is None:
            return True
        _children.pop(pid, None)  # reaped: no zombie left behind
        return False
    if pid == os.getpid():
        return True
    if os.name == "nt":  # pragma: no cover - no cheap liveness probe; the heartbeat decides
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


class JobStore:
    """The job records of one data dir. Reading never creates anything."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.dir = data_dir / JOBS_DIR

    def path(self, job_id: str) -> Path:
        return self.dir / f"{job_id}.json"

    def write(self, job: Job) -> None:
        job.updated_at = time.time()
        write_json_atomic(self.path(job.id), asdict(job))

    def read(self, job_id: str) -> Job | None:
        if not job_id or "/" in job_id or "\\" in job_id:
            return None
        data = read_json(self.path(job_id))
        return Job.from_dict(data) if data else None

    def all(self) -> list[Job]:
        """Every record, newest first."""
        if not self.dir.is_dir():
            return []
        jobs = []
        for path in self.dir.glob("*.json"):
            data = read_json(path)
            if data and data.get("id"):
                jobs.append(Job.from_dict(data))
        jobs.sort(key=lambda j: (j.created_at, j.id), reverse=True)
        return jobs

    def is_alive(self, job: Job) -> bool:
        if job.finished:
            return False
        if time.time() - job.updated_at > STALE_SECONDS:
            return False
        if job.pid is None:  # a starter is still spawning it (it holds the start lock meanwhile)
            return True
        return _pid_alive(job.pid)

    def active(self) -> Job | None:
        return next((j for j in self.all() if self.is_alive(j)), None)

    def latest(self) -> Job | None:
        jobs = self.all()
        return jobs[0] if jobs else None

    def mark_dead(self, job: Job, *, save: bool = True) -> Job:
        """A record left ``running`` by a process that died says so (from now on, with ``save``)."""
        if not job.finished and not self.is_alive(job):
            job.state = "failed"
            job.error = {"success": False, "error": "the job's process ended before it finished", "code": "job_died"}
            job.finished_at = job.finished_at or job.updated_at
            if save:
                with contextlib.suppress(OSError):
                    self.write(job)
        return job

    def prune(self) -> None:
        finished = [j for j in self.all() if j.finished]
        for job in finished[KEEP_FINISHED:]:
            for suffix in (".json", ".log"):
                with contextlib.suppress(OSError):
                    (self.dir / f"{job.id}{suffix}").unlink()

    def start_lock(self) -> contextlib.AbstractContextManager[None]:
        return exclusive(self.dir / "start.lock", START_LOCK_WAIT, "another process is starting an index job")


def record_refresh(data_dir: Path, report: dict, reason: str) -> None:
    """Remember the last refresh that changed something (status shows its time and duration)."""
    if not data_dir.is_dir():
        return
    with contextlib.suppress(OSError):
        write_json_atomic(data_dir / LAST_REFRESH_FILE, {"at": time.time(), "reason": reason, **report})


def last_refresh(data_dir: Path) -> dict | None:
    return read_json(data_dir / LAST_REFRESH_FILE)


# -- running a job -----------------------------------------------------------------


class _Runner:
    """Runs one job's refresh and keeps its record current (progress, heartbeat)."""

    def __init__(self, workspace: Workspace, store: JobStore, job: Job,
                 progress: Callable[[int, int], None] | None = None,
                 embed_progress: Callable[[int, int], None] | None = None) -> None:
        self.workspace, self.store, self.job, self.progress = workspace, store, job, progress
        self.embed_progress = embed_progress
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._last_write = 0.0

    def _save(self) -> None:
        with self._lock, contextlib.suppress(OSError):
            self.store.write(self.job)
            self._last_write = time.monotonic()

    def _on_progress(self, done: int, total: int) -> None:
        self.job.done, self.job.total = done, total
        if time.monotonic() - self._last_write > 0.25 or done == total:
            self._save()
        if self.progress:
            self.progress(done, total)

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            self._save()

    def run(self) -> Job:
        job = self.job
        job.state, job.started_at = "running", job.started_at or time.time()
        self._save()
        beat = threading.Thread(target=self._heartbeat, name=f"phr-job-heartbeat-{job.id}", daemon=True)
        beat.start()
        try:
            report = self.workspace.refresh(force=job.force, progress=self._on_progress, lock_timeout=JOB_LOCK_WAIT)
            job.report = report.as_dict()
            job.done = job.total = max(job.total, report.sessions_updated)
            record_refresh(self.store.data_dir, job.report, job.reason)
            # Vectors after the keyword index, so search is useful from the first phase on. The
            # automatic first build stops at keywords: searches start the embedding worker.
            if job.reason != "auto_build":
                job.report["embedding"] = SemanticService(self.workspace).embed(progress=self.embed_progress)
            job.state = "done"
        except RecallError as exc:
            job.state, job.error = "failed", exc.as_dict()
        except Exception as exc:  # the record must say it failed, whatever happened
            job.state = "failed"
            job.error = {"success": False, "error": f"internal error: {type(exc).__name__}: {exc}", "code": "internal"}
        finally:
            self._stop.set()
            job.finished_at = time.time()
            self._save()
            event = _finished_here.pop(job.id, None)
            if event:
                event.set()
        return job


def _spawn(workspace: Workspace, command: list[str], log_name: str) -> int:
    """Start a detached child of this module; it outlives this call and this process."""
    env = dict(os.environ, HERMES_HOME=str(workspace.home.root))
    log_dir = workspace.home.data_dir / JOBS_DIR
    log_dir.mkdir(parents=True, exist_ok=True)
    log = open(log_dir / log_name, "ab")  # noqa: SIM115 - handed to the child
    try:
        kwargs: dict = {"start_new_session": True} if os.name != "nt" else {
            "creationflags": getattr(subprocess, "DETACHED_PROCESS", 0) | getattr(
                subprocess, "CREATE_NEW_PROCESS_GROUP", 0)}
        child = subprocess.Popen(
            [sys.executable, "-m", "project_history_recall.services.jobs", *command,
             "--home", str(workspace.home.root)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, cwd=str(workspace.home.root),
            env=env, close_fds=True, **kwargs,
        )
    finally:
        log.close()
    _children[child.pid] = child
    return child.pid


def embed_in_background(workspace: Workspace) -> int | None:
    """Hand the vector backlog to a detached process (for one-shot callers such as ``phr``,
    which exit right after answering); its pid, or None when one is already embedding or no
    process can be started. It holds the same embedding lock as the plugin's worker thread,
    so ``semantic_status`` says ``indexing`` while it runs, in every process."""
    _reap()
    if background_running(workspace.index):
        return None
    try:
        return _spawn(workspace, ["embed"], EMBED_LOG)
    except OSError:
        return None


def start(workspace: Workspace, *, force: bool = False, reason: str = "tool", detach: bool = False,
          run_in_thread: bool = True) -> tuple[Job, bool]:
    """Start an index job unless one is running; returns ``(job, started)``.

    ``detach`` runs it in a subprocess of its own; otherwise it runs here, in a
    daemon thread (``run_in_thread``) or not at all yet (the caller then calls
    :func:`run_here` itself, as ``phr index`` does to show a progress bar).
    """
    store = JobStore(workspace.home.data_dir)
    _reap()
    with store.start_lock():
        running = store.active()
        if running is not None:
            return running, False
        job = Job(new_job_id(), force=force, reason=reason, detached=detach)
        if not detach:
            job.pid = os.getpid()
            _finished_here[job.id] = threading.Event()
        store.write(job)
        store.prune()
        if detach:
            try:
                job.pid = _spawn(workspace, ["run", "--job", job.id], f"{job.id}.log")
            except OSError:
                # No way to start a process here (a frozen host?): run it in this one instead.
                job.detached, job.pid = False, os.getpid()
                _finished_here[job.id] = threading.Event()
                store.write(job)
                runner = _Runner(workspace, store, job)
                threading.Thread(target=runner.run, name=f"phr-job-{job.id}", daemon=True).start()
                return job, True
            store.write(job)  # the child waits for the start lock before it writes, so this is not lost
        elif run_in_thread:
            threading.Thread(target=_Runner(workspace, store, job).run, name=f"phr-job-{job.id}", daemon=True).start()
    return job, True


def run_here(workspace: Workspace, job: Job, progress: Callable[[int, int], None] | None = None,
             embed_progress: Callable[[int, int], None] | None = None) -> Job:
    """Run a started (not threaded, not detached) job in the caller's thread."""
    return _Runner(workspace, JobStore(workspace.home.data_dir), job, progress, embed_progress).run()


def wait(workspace: Workspace, job: Job, timeout: float) -> Job:
    """The job's record once it finished, or as it stands after ``timeout`` seconds."""
    store = JobStore(workspace.home.data_dir)
    deadline = time.monotonic() + max(0.0, timeout)
    event = _finished_here.get(job.id)
    if event is not None:
        event.wait(max(0.0, timeout))
        return store.read(job.id) or job
    while True:
        current = store.read(job.id) or job
        if current.finished:
            return current
        if not store.is_alive(current):
            return store.mark_dead(current)
        left = deadline - time.monotonic()
        if left <= 0:
            return current
        time.sleep(min(0.05, left))


def pending_sessions(workspace: Workspace, force: bool = False) -> tuple[int, int]:
    """Sessions in the sources, and how many a refresh would change: all with ``force``, else
    the new ones, those that changed and those gone (:func:`~..indexer.pending_changes`, the
    indexer's own comparison, so ``status`` and ``phr index`` count the same)."""
    conn = None if force else workspace.index.connect_readonly()
    if conn is None:
        total = workspace.sessions_to_index()
        return total, total
    try:
        with workspace.source.read() as reader:
            changes = pending_changes(conn, reader)
    finally:
        conn.close()
    return len(changes.signatures), len(changes)


def request_index(workspace: Workspace, *, force: bool = False, reason: str = "tool", budget: float | None = None,
                  large: int | None = None) -> dict:
    """The index tool and ``/recall index``: build or refresh within ``budget`` seconds.

    A large backlog goes to a detached job at once (the answer carries its id);
    a small one runs in this process and is usually done before the answer.
    Either way a job still running when the budget ends keeps going, and
    ``status`` reports its progress. A request while a job runs reports that job.
    """
    if not workspace.source.exists():
        raise no_db(workspace.home.state_db)
    store = JobStore(workspace.home.data_dir)
    running = store.active()
    if running is not None:
        return job_payload(running, already_running=True)
    budget = TOOL_BUDGET if budget is None else budget
    _, pending = pending_sessions(workspace, force)
    background = pending > (LARGE_HISTORY if large is None else large)
    job, started = start(workspace, force=force, reason=reason, detach=background)
    if not started:
        return job_payload(job, already_running=True)
    job = wait(workspace, job, min(budget, BACKGROUND_GLANCE) if background else budget)
    payload = job_payload(job)
    payload["pending_sessions"] = pending
    return payload


def run_in_foreground(workspace: Workspace, *, force: bool = False, reason: str = "cli",
                      progress: Callable[[int, int], None] | None = None,
                      embed_progress: Callable[[int, int], None] | None = None) -> dict:
    """``phr index``: run the job in this thread (a progress bar can follow it); a job
    already running elsewhere is reported instead."""
    if not workspace.source.exists():
        raise no_db(workspace.home.state_db)
    job, started = start(workspace, force=force, reason=reason, run_in_thread=False)
    if not started:
        return job_payload(job, already_running=True)
    return job_payload(run_here(workspace, job, progress, embed_progress))


def job_payload(job: Job, *, already_running: bool = False) -> dict:
    """What a face says about a job: the report when done, progress while running."""
    if job.state == "failed" and job.error:
        return {**job.error, "job_id": job.id, "job": job.as_dict()}
    payload: dict = {"success": True, "status": job.state if job.finished else "running", "job_id": job.id,
                     "job": job.as_dict()}
    if job.finished and job.report:
        payload.update(job.report)
    else:
        payload["already_running"] = already_running
        payload["message"] = (
            f"{'An index job is already running' if already_running else 'Indexing continues in the background'} "
            f"(job {job.id}{', ' + job.as_dict()['progress'] if job.total else ''}); "
            "project_history operation=status (or /recall status) reports its progress.")
    return payload


# -- the detached child ---------------------------------------------------------------


def _run_child(home_path: str, job_id: str) -> int:
    from project_history_recall.hermes_home import HermesHome

    workspace = Workspace(HermesHome(Path(home_path)))
    store = JobStore(workspace.home.data_dir)
    with store.start_lock():  # the starter holds it until it has written our pid
        job = store.read(job_id)
        if job is None or job.finished:
            return 2
        job.pid = os.getpid()
        store.write(job)
    return 0 if _Runner(workspace, store, job).run().state == "done" else 1


def _embed_child(home_path: str) -> int:
    """Embed everything pending, under the embedding lock (a second embedder leaves at once)."""
    from project_history_recall.hermes_home import HermesHome

    semantic = SemanticService(Workspace(HermesHome(Path(home_path))))
    if semantic.configured_state(None) is not None:  # disabled, unusable, or no consent
        return 0
    worker = start_background(semantic.embedder(semantic.provider()))
    worker.join()
    if worker.error:
        print(f"project-history-recall: embedding failed: {worker.error}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m project_history_recall.services.jobs")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one index job (started by the plugin)")
    run.add_argument("--home", required=True)
    run.add_argument("--job", required=True)
    embed = sub.add_parser("embed", help="embed the vector backlog (started by phr)")
    embed.add_argument("--home", required=True)
    args = parser.parse_args(argv)
    if args.command == "embed":
        return _embed_child(args.home)
    return _run_child(args.home, args.job)


if __name__ == "__main__":  # pragma: no cover - the detached child
    sys.exit(main())
