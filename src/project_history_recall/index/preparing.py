"""What a session becomes in the index, computed from its messages alone: here, or in worker
processes during a large build.

A build is two kinds of work: preparing each session (reading its messages, splitting them
into entries, tokenizing those, and what the later phases extract from the messages) and
writing the rows. Only one process writes the index; the preparing can happen anywhere. So
when a refresh has many sessions to read (a first build, ``--force``), worker processes
prepare chunks of them, a few chunks ahead, while this process writes: on two cores one
worker halves an M build (issue 17, docs/benchmarks.md).

Workers read the source in snapshots of their own, taken after this refresh's, so a session
may be stored with messages newer than its signature says. The next refresh sees that the
signature changed and reads the session again, so the index converges. Only sessions that
the reader can hand out (:meth:`~project_history_recall.sources.SourceReader.portable`) go to
workers; a worker that fails or dies leaves the rest of the build to this process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import queue
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from project_history_recall.index.entries import entry_tokens, session_entries
from project_history_recall.sources import Source, SourceMessage, SourceReader, SourceSession

if TYPE_CHECKING:  # loaded by a large build only
    from multiprocessing.connection import Connection

logger = logging.getLogger(__name__)

#: Worker processes for a large build: one per core beyond this one's, at most two (beyond
#: that, this process's writing is the limit).
WORKERS = max(0, min(2, (os.cpu_count() or 1) - 1))
#: Fewer sessions than this are prepared here: starting a worker costs about 0.1 s.
PARALLEL_FROM_SESSIONS = 500
CHUNK_SESSIONS = 50
#: Chunks handed to each worker ahead of the writer: enough to keep it busy, few enough that
#: prepared chunks do not pile up in memory when the writer is the slower.
CHUNKS_AHEAD = 8
#: Bytes of a failed worker's standard error kept for the log.
ERRORS_KEPT = 8192


def large_build(jobs: Sequence[object]) -> bool:
    """Whether a refresh of these jobs is large enough for worker processes and the log's
    checkpoints beside it (:mod:`.checkpoints`)."""
    return len(jobs) >= PARALLEL_FROM_SESSIONS


class IndexPhase(Protocol):
    """Work derived from what the keyword phase wrote (the edit chain is one), with the same
    consistent read of the source. A phase keeps its own bookkeeping, so an interrupted one
    resumes.

    What a phase has to do is decided by the index alone (which sessions the keyword phase
    rewrote since the phase's bookkeeping says it ran): so a refresh that finds the index
    exactly as a refresh that ran every phase to the end left it does not run them when it
    writes nothing itself (the first check after a commit to ``state.db``), nor those that
    took all its batches when it removed no session (the check after a Hermes turn).

    A phase is pickled into the worker processes of a large build."""

    name: str

    def extract(self, session_id: str, cwd: str | None, repo_root: str | None,
                messages: list[SourceMessage]) -> object:
        """What the phase would write for one session, from its messages alone (and where it
        is: its cwd and attributed repo root). Runs wherever the session is prepared, in a
        worker process too, so its result must pickle."""
        ...

    def store(self, conn: sqlite3.Connection, extracted: Mapping[str, object]) -> int:
        """Called after each batch of the keyword phase has committed, with what :meth:`extract`
        gave for its sessions: the phase writes from these instead of reading the sessions from
        the source again in :meth:`run` (a sixth of a full build). Returns how many sessions it
        looked at. When it raises, or an extract did, the keyword phase carries on without it
        and :meth:`run` does the rest, so keyword search is still whole."""
        ...

    def run(self, conn: sqlite3.Connection, reader: SourceReader, *, force: bool = False) -> int:
        """After the keyword phase has committed: whatever the batches did not do. Returns how
        many sessions it looked at."""
        ...


@dataclass(frozen=True)
class Job:
    """A session to prepare, with what attribution made of its folder (the edit phase places
    edits under that repo root). ``known``: the index holds an older copy, whose entries the
    writer compares, so its tokens are not made ahead."""

    session: SourceSession
    git: tuple[str | None, str | None]
    known: bool


@dataclass
class Prepared:
    session_id: str
    git: tuple[str | None, str | None]
    message_count: int
    last_active: float
    #: Each an :class:`~.entries.Entry`, or the same fields as a plain tuple when it came from a
    #: worker: pickling named tuples (or dataclasses) costs six times as much, and rebuilding
    #: them here a tenth of the writer's time.
    entries: Sequence[tuple]
    #: The FTS text of each entry, when made ahead (in a worker); else made as entries are inserted.
    tokens: list[str] | None
    #: What each phase's ``extract`` gave, by phase name.
    extracted: dict[str, object] = field(default_factory=dict)
    #: The traceback of each phase whose ``extract`` raised, by phase name.
    failed: dict[str, str] = field(default_factory=dict)
    in_worker: bool = False

    def __getstate__(self) -> dict:
        return {**self.__dict__, "entries": [tuple(e) for e in self.entries]}


def prepare(job: Job, messages: list[SourceMessage], phases: Sequence[IndexPhase], *,
            tokens: bool = False) -> Prepared:
    session = job.session
    entries = session_entries(session, messages)
    prepared = Prepared(session.id, job.git, len(messages),
                        max((m.timestamp for m in messages), default=session.started_at), entries,
                        [entry_tokens(e.kind, e.text) for e in entries] if tokens else None)
    for phase in phases:
        try:
            prepared.extracted[phase.name] = phase.extract(session.id, session.cwd, job.git[0], messages)
        except Exception:
            prepared.failed[phase.name] = traceback.format_exc()
    return prepared


def prepare_all(reader: SourceReader, jobs: Sequence[Job],
                phases: Sequence[IndexPhase]) -> Generator[Prepared, None, None]:
    """Every job's :class:`Prepared`, in order. With :data:`WORKERS` and at least
    :data:`PARALLEL_FROM_SESSIONS` jobs, the sessions the reader can hand out are prepared in
    chunks by worker processes and by this one (:func:`_balanced`); the others here, in turn."""
    portable = reader.portable() if WORKERS and sys.executable and large_build(jobs) else None
    ids = set(portable[1]) if portable is not None else set()
    handed = [job for job in jobs if job.session.id in ids]

    def here(chunk: Sequence[Job]) -> list[Prepared]:
        return [prepare(job, reader.messages(job.session.id), phases) for job in chunk]

    if portable is None or not handed:
        for job in jobs:
            yield from here([job])
        return
    workers: list[_Worker] = []
    try:
        workers = _started(portable[0], phases, handed)
        chunks = [range(i, min(i + CHUNK_SESSIONS, len(handed))) for i in range(0, len(handed), CHUNK_SESSIONS)]
        prepared = _balanced(chunks, workers, lambda chunk: here([handed[i] for i in chunk]))
        for job in jobs:
            yield next(prepared) if job.session.id in ids else here([job])[0]
    finally:
        for worker in workers:
            worker.close()


def _started(source: Source, phases: Sequence[IndexPhase], jobs: Sequence[Job]) -> list[_Worker]:
    """The :data:`WORKERS` that start; one that cannot (no process or file left to the host) is
    logged and its work left to this process."""
    workers = []
    for _ in range(WORKERS):
        try:
            workers.append(_Worker(source, phases, jobs))
        except (OSError, subprocess.SubprocessError):
            logger.warning("could not start a worker process preparing sessions; this process prepares them",
                           exc_info=True)
    return workers


def _balanced(chunks: list[range], workers: list[_Worker],
              here: Callable[[range], list[Prepared]]) -> Iterator[Prepared]:
    """The chunks' sessions, in order. This process prepares the first chunk while the workers
    start; then each worker holds up to :data:`CHUNKS_AHEAD` chunks, handed out in order. The
    time this process waits for them it spends preparing chunks itself: when the chunk it
    needs next has not come within the time its own last chunk took, it prepares the next
    chunk nobody holds instead of waiting on (a worker takes a fifth of a second to start). So
    neither side idles for long, whichever is faster, and a chunk a worker holds is only
    prepared here when that worker failed."""
    started = time.perf_counter()
    ready = {0: here(chunks[0])}
    took = time.perf_counter() - started
    handed_out = 1
    for i in range(len(chunks)):
        while i not in ready:
            for worker in workers:
                while worker.alive and len(worker.holding) < CHUNKS_AHEAD and handed_out < len(chunks):
                    worker.send(handed_out, chunks[handed_out])
                    handed_out += 1
            holder = next((w for w in workers if i in w.holding), None)
            if holder is None:  # its worker failed
                ready[i] = here(chunks[i])
            elif handed_out < len(chunks) and not holder.answered(within=took):
                started = time.perf_counter()
                ready[handed_out] = here(chunks[handed_out])
                handed_out += 1
                took = time.perf_counter() - started
            else:
                ready.update(holder.receive())
        yield from ready.pop(i)


class _Worker:
    """A worker process (``python -c`` calling :func:`serve`: never the host's main module, which
    :mod:`multiprocessing`'s spawn would import again), given the source, the phases and every
    job, then asked for chunks, each answered with its prepared sessions, in the order asked.
    Anything that goes wrong with it leaves its chunks to this process."""

    def __init__(self, source: Source, phases: Sequence[IndexPhase], jobs: Sequence[Job]) -> None:
        from multiprocessing.connection import Connection

        ours, theirs = socket.socketpair()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        # What the worker says on its standard error (a traceback) goes to this process's log when
        # it fails, not to a terminal the host owns (Hermes's TUI).
        self.errors = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", f"from {__name__} import serve; serve({theirs.fileno()})"],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=self.errors, env=env)
        except BaseException:
            ours.close()
            self.errors.close()
            raise
        finally:
            theirs.close()
        self.conn = Connection(ours.detach())
        #: The chunks asked for and not received yet, oldest first.
        self.holding: deque[int] = deque()
        self.alive = True
        # Sent with the first chunk asked for, once the worker has had time to start. Later a
        # chunk is asked for by its bounds alone, a few bytes: this process never blocks sending
        # while the worker blocks sending an answer.
        self._start: tuple | None = (source, list(phases), list(jobs))

    def send(self, index: int, chunk: range) -> None:
        try:
            if self._start is not None:
                self.conn.send(self._start)
                self._start = None
            self.conn.send((chunk.start, chunk.stop))
        except Exception:  # a phase that does not pickle, a worker gone
            self._failed()
        else:
            self.holding.append(index)

    def answered(self, within: float) -> bool:
        """Whether the oldest chunk's answer has come, waiting for it up to ``within`` seconds."""
        try:
            return self.conn.poll(within)
        except OSError:
            return True  # receive() finds out

    def receive(self) -> dict[int, list[Prepared]]:
        """The oldest chunk's sessions, by its index (none when the worker failed)."""
        try:
            prepared: list[Prepared] = self.conn.recv()
        except Exception:  # the worker died (EOF), or sent what does not unpickle here
            self._failed()
            return {}
        return {self.holding.popleft(): prepared}

    def _failed(self) -> None:
        """Called in the handler of what went wrong: the worker is stopped (one that died has
        written its traceback before its end of the connection closed) and never asked again."""
        self.alive = False
        self.holding.clear()
        self.process.kill()
        self.process.wait()
        logger.warning("a worker process preparing sessions failed; this process prepares its chunks%s",
                       self._said(), exc_info=True)

    def _said(self) -> str:
        """The end of what the worker wrote on its standard error."""
        self.errors.seek(0, os.SEEK_END)
        self.errors.seek(max(0, self.errors.tell() - ERRORS_KEPT))
        said = self.errors.read().decode("utf-8", "replace").strip()
        return f"; it said:\n{said}" if said else ""

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.send(None)
        self.conn.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.errors.close()


def serve(fd: int) -> None:
    """A worker process's loop: prepare each chunk asked for, in one snapshot of the source.
    A thread sends the answers: one is megabytes, more than a socket holds, so sending waits
    until the writer reads it, and the next chunk is prepared meanwhile."""
    from multiprocessing.connection import Connection

    conn = Connection(fd)
    answers: queue.Queue[bytes | None] = queue.Queue()
    sender = threading.Thread(target=_send_answers, args=(conn, answers), daemon=True)
    sender.start()
    try:
        source, phases, jobs = conn.recv()
        while (bounds := conn.recv()) is not None:
            with source.read() as reader:
                prepared = [prepare(job, reader.messages(job.session.id), phases, tokens=not job.known)
                            for job in jobs[slice(*bounds)]]
            for one in prepared:
                one.in_worker = True
            answers.put(pickle.dumps(prepared, pickle.HIGHEST_PROTOCOL))
    except EOFError:  # the writer is gone
        return
    answers.put(None)
    sender.join()
    # Without the interpreter's teardown (a twentieth of a second, which the writer waits for):
    # the process holds nothing to flush but its standard streams.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _send_answers(conn: Connection, answers: queue.Queue[bytes | None]) -> None:
    while (answer := answers.get()) is not None:
        conn.send_bytes(answer)
