"""Keeping the index fresh with nothing to do after install, without holding anyone up.

Three moments, all automatic (``auto_index: false`` turns all off, ``auto_build:
false`` only the first build):

- first use with no index: the build starts as a job. A history of up to
  :data:`~project_history_recall.services.jobs.LARGE_HISTORY` sessions builds in this
  process (a thread), a larger one in a detached job; the caller waits at most
  :data:`FIRST_BUILD_WAIT` seconds. A small history is normally done by then and
  the search answers; otherwise the face says honestly that the index is being
  built (:func:`building_payload`).
- session start: :func:`kick` starts the same work in the background and
  returns at once.
- before every search and browse: :func:`ensure` runs the incremental refresh in
  a worker thread and waits at most :data:`FRESH_WAIT` seconds for it; a refresh
  that takes longer keeps going and the read uses the index as it stands
  (``index_status: "updating"``). One worker per index per process.

Nothing here raises for being slow: only the errors a refresh itself has
(``no_db``, an unreadable state.db) reach the caller.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from project_history_recall.errors import RecallError, no_db
from project_history_recall.locks import READ_ONLY
from project_history_recall.services import jobs
from project_history_recall.workers import Workers

if TYPE_CHECKING:
    from project_history_recall.index.indexer import RefreshReport
    from project_history_recall.services.workspace import Workspace

logger = logging.getLogger(__name__)

FRESH_WAIT = 1.5  # seconds an incremental check may hold up a read
FIRST_BUILD_WAIT = 5.0  # seconds a first use waits for the initial build
WORKER_LOCK_WAIT = 2.0  # the worker's wait for the writer lock (a job may hold it)
#: Refresh failures after which a read still answers from the index as it stands, marked stale.
STALE_READ_CODES = ("db_unreadable", READ_ONLY)


@dataclass
class Freshness:
    """How current the index was for the read that just ran."""

    state: str = "fresh"  # fresh | updating | building | stale | manual
    waited: float = 0.0
    job: dict | None = None
    report: dict | None = None
    warning: str | None = None

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


class _RefreshWorker(threading.Thread):
    """One incremental refresh; whoever waits for it reads its report or its error."""

    def __init__(self, workspace: Workspace) -> None:
        super().__init__(name="phr-refresh", daemon=True)
        self.workspace = workspace
        self.report: RefreshReport | None = None
        self.error: BaseException | None = None
        self.started = time.monotonic()

    def run(self) -> None:
        try:
            self.report = self.workspace.refresh(lock_timeout=WORKER_LOCK_WAIT)
            if self.report.changed:
                jobs.record_refresh(self.workspace.home.data_dir, self.report.as_dict(), "incremental")
        except BaseException as exc:  # handed to whoever waits
            self.error = exc


_workers: Workers[_RefreshWorker] = Workers()


def _refresh_worker(workspace: Workspace) -> _RefreshWorker:
    """The running incremental refresh of this index, or a new one."""
    return _workers.start(str(workspace.index.path), lambda: _RefreshWorker(workspace))


def _first_build(workspace: Workspace, wait: float) -> Freshness:
    store = jobs.JobStore(workspace.home.data_dir)
    job = store.active()
    if job is None:
        total = workspace.sessions_to_index()
        job, _ = jobs.start(workspace, reason="auto_build", detach=total > jobs.LARGE_HISTORY)
    job = jobs.wait(workspace, job, wait)
    if job.state == "done" and workspace.index.exists():
        return Freshness("fresh", job=job.as_dict(), report=job.report)
    if job.state == "failed" and job.error:
        raise RecallError(job.error.get("error", "the index build failed"), job.error.get("code", "internal"))
    return Freshness("building", job=job.as_dict())


def ensure(workspace: Workspace, *, wait: float | None = None, first_wait: float | None = None) -> Freshness:
    """The check before every read; bounded by ``wait`` (``first_wait`` with no index yet)."""
    started = time.monotonic()
    wait = FRESH_WAIT if wait is None else wait
    first_wait = FIRST_BUILD_WAIT if first_wait is None else first_wait
    if not workspace.source.exists():
        raise no_db(workspace.home.state_db)
    settings = workspace.settings
    if not settings.auto_index:
        return Freshness("manual")
    if not workspace.index.exists():
        if not settings.auto_build:
            return Freshness("manual")
        fresh = _first_build(workspace, first_wait)
    else:
        store = jobs.JobStore(workspace.home.data_dir)
        running = store.active()
        refreshing = _workers.running(str(workspace.index.path))
        unchanged = None if running is not None or refreshing else workspace.indexer.unchanged()
        if running is not None:  # a job holds the writer: read what is there
            fresh = Freshness("updating", job=running.as_dict())
        elif unchanged is not None:  # nothing to do: no thread to start and wait for
            fresh = Freshness("fresh", report=unchanged.as_dict())
        else:
            worker = _refresh_worker(workspace)
            if worker.started < started:
                # It read state.db before this read began and may miss what was committed since:
                # let it finish, then run one that starts after the question was asked.
                worker.join(max(0.0, wait))
                if not worker.is_alive():
                    worker = _refresh_worker(workspace)
            worker.join(max(0.0, wait - (time.monotonic() - started)))
            busy = isinstance(worker.error, RecallError) and worker.error.code == "index_busy"
            if worker.is_alive() or busy:  # still running, or a writer elsewhere holds the lock
                fresh = Freshness("updating")
            elif isinstance(worker.error, RecallError) and worker.error.code in STALE_READ_CODES:
                # Hermes's database could not be read just now (locked, mid-migration), or our
                # index cannot be written (a read-only home): the index still answers, and says
                # it may be behind.
                fresh = Freshness("stale", warning=worker.error.message)
            elif worker.error is not None:
                raise worker.error
            else:
                fresh = Freshness("fresh", report=worker.report.as_dict() if worker.report else None)
    fresh.waited = round(time.monotonic() - started, 4)
    return fresh


def kick(workspace: Workspace) -> None:
    """Start the background refresh (or first build) and return at once: the session-start hook."""
    try:
        ensure(workspace, wait=0.0, first_wait=0.0)
    except Exception:
        logger.debug("project-history-recall: background refresh did not start", exc_info=True)


def building_payload(fresh: Freshness | None) -> dict:
    """The honest answer of a read while the first build is still running."""
    job = (fresh.job if fresh else None) or {}
    progress = f" ({job['progress']})" if job.get("progress") else ""
    payload: dict = {
        "success": True,
        "results": [],
        "index_status": "building",
        "message": f"The history index is being built{progress}; ask again in a moment "
                   "(project_history operation=status shows progress).",
    }
    if job:
        payload["job_id"] = job.get("id")
        payload["job"] = job
    return payload
