"""Keeps the index in step with a source, incrementally.

A refresh compares every source session's change signature (message count,
rewind count, title, cwd, git fields, archive flag...) and the source's newest
message id with what the index holds. A session whose messages changed is
re-read whole and the entries that differ replaced, in one transaction; a session whose
metadata alone changed gets its row (and title entry) updated. So a rewind, a
``/retry`` rewrite, a retitle or a move all show up without ``--force``, and a
refresh with nothing changed reads two small tables and stops.

Only one process writes (a file lock); an interrupted run leaves every session
either fully old or fully new, so the index stays usable.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import sqlite3
import tempfile
import time
import traceback
from collections.abc import Callable, Collection, Container, Iterable, Sequence
from dataclasses import dataclass, field

from project_history_recall.index import preparing
from project_history_recall.index.checkpoints import checkpointing_aside
from project_history_recall.index.preparing import IndexPhase, Job, Prepared, prepare_all
from project_history_recall.index.probes import (
    Probe,
    cached_probe,
    git_probe,
    moved,
    probe_markers,
    probed_ahead,
    reprobe,
)
from project_history_recall.index.session_rows import (
    attribution_of,
    delete_session,
    insert_entries,
    replace_entries,
    update_session_meta,
    upsert_session,
)
from project_history_recall.index.store import (
    GENERATION,
    REMOVALS,
    Index,
    bump,
    chunks_deleted,
    get_meta,
    scope_changed,
    set_meta,
    transaction,
)
from project_history_recall.sources import Source, SourceReader, SourceSession
from project_history_recall.sources.hermes import data_version

logger = logging.getLogger(__name__)

BATCH_SESSIONS = 200

Progress = Callable[[int, int], None]


@dataclass
class RefreshReport:
    sessions_total: int = 0
    sessions_updated: int = 0
    sessions_removed: int = 0
    messages_read: int = 0
    entries_written: int = 0
    seconds: float = 0.0
    full: bool = False
    #: The keyword phase alone; ``seconds`` is the whole refresh, later phases included.
    keyword_seconds: float = 0.0
    #: ``{phase name: {"sessions": n, "seconds": s}}`` for the phases after the keyword one.
    phases: dict = field(default_factory=dict)
    #: Whether state.db was compared with the index at all (not when its change marker
    #: said nothing was committed since the last refresh).
    compared: bool = True
    #: Sessions whose repo root changed because their folder did (a symlink retargeted,
    #: a folder that became its own repo) while state.db stayed the same.
    sessions_reattributed: int = 0
    #: Sessions that worker processes prepared (:mod:`.preparing`; a large build only).
    prepared_in_workers: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.sessions_updated or self.sessions_removed or self.sessions_reattributed)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


#: The last source marker each index was brought up to date with, in this process, how
#: many sessions it had then, and what its probed folders looked like.
_unchanged: dict[str, tuple[str, int, dict[str, str]]] = {}


@dataclass
class Changes:
    """What a refresh would do: the one definition that ``status`` counts and the indexer acts on."""

    signatures: dict[str, tuple[str, str]]
    max_message_id: int
    indexed_max: int
    content: set[str]  # new sessions and those whose messages changed: re-read whole
    meta: set[str]  # only the title, cwd, git fields, end or archive flag changed
    removed: set[str]  # gone from the source
    indexed: Collection[str]  # what the index holds now (the mirror's keys)

    def __bool__(self) -> bool:
        return bool(self.content or self.meta or self.removed)

    def __len__(self) -> int:
        return len(self.content) + len(self.meta) + len(self.removed)


Mirror = dict[str, tuple[str, str]]


def read_mirror(conn: sqlite3.Connection) -> Mirror:
    """The signatures the index holds, by session."""
    cursor = conn.cursor()
    cursor.row_factory = None  # 5,000 rows at M: tuples, not sqlite3.Row
    return {sid: (signature, content) for sid, signature, content in
            cursor.execute("SELECT id, signature, content_signature FROM sessions")}


def pending_changes(conn: sqlite3.Connection, reader: SourceReader, *, force: bool = False,
                    mirror: Mirror | None = None) -> Changes:
    """Compare the source's session signatures (and newest message id) with the index's mirror
    (``mirror`` when the caller knows it, else read)."""
    signatures = reader.signatures()
    max_id = reader.max_message_id()
    indexed_max = int(get_meta(conn, "max_message_id", "0") or 0)
    if mirror is None:
        mirror = read_mirror(conn)
    if force:
        return Changes(signatures, max_id, indexed_max, set(signatures), set(), mirror.keys() - signatures.keys(),
                       mirror.keys())
    # Only the sessions the index holds need this (the others are re-read whole anyway): a first
    # build would read the session of each of its 200,000 messages for nothing.
    new_messages: set[str] = set()
    if mirror and max_id != indexed_max:
        new_messages = reader.sessions_with_messages_after(indexed_max)
    if not new_messages and signatures == mirror:  # the usual answer, in one comparison done in C
        return Changes(signatures, max_id, indexed_max, set(), set(), set(), mirror.keys())
    # One pass over the sessions finds the few that differ (tuples shared with the mirror
    # compare by identity); only those are looked at twice.
    differing = [(sid, value) for sid, value in signatures.items() if mirror.get(sid) != value]
    content = {sid for sid, (_, content_signature) in differing
               if sid not in mirror or mirror[sid][1] != content_signature} | (new_messages & signatures.keys())
    meta = {sid for sid, (signature, _) in differing if sid not in content and mirror[sid][0] != signature}
    return Changes(signatures, max_id, indexed_max, content, meta, mirror.keys() - signatures.keys(), mirror.keys())


class Indexer:
    def __init__(self, index: Index, source: Source, probe: Probe = git_probe,
                 phases: Iterable[IndexPhase] = ()) -> None:
        self.index = index
        self.source = source
        self.probe = probe
        self.phases = list(phases)
        #: The mirror as the last refresh that changed no session left it, and the index's
        #: ``data_version`` right after that refresh's last commit (under the writer lock):
        #: while the version is the same, nobody else has committed, and the mirror is not
        #: read again (20 ms at M, the larger half of the first check after a commit). Only a
        #: refresh that ran to the end sets it, so it also says that every phase had finished.
        self._mirror: tuple[str, Mirror] | None = None

    def unchanged(self) -> RefreshReport | None:
        """The report of a refresh with nothing to do (nothing committed to the sources since
        this process last brought the index up to date, no probed folder moved), else None.
        A few ``stat`` calls: a read asks it before it starts a refresh thread (2 ms)."""
        return self._check()[1]

    def _check(self) -> tuple[str | None, RefreshReport | None]:
        """The sources' change marker, and :meth:`unchanged`'s answer."""
        started = time.perf_counter()
        # Taken before reading: a commit during the refresh changes the marker for next time.
        marker = self.source.change_marker()
        # The index file's identity is part of the key: another process may have moved a
        # damaged index aside and started a new one since.
        key = f"{marker}|{self.index.identity()}" if marker is not None else None
        known = _unchanged.get(str(self.index.path))
        if key is not None and known is not None and known[0] == key and not moved(known[2]):
            return marker, RefreshReport(sessions_total=known[1], compared=False,
                                         seconds=round(time.perf_counter() - started, 4))
        return marker, None

    def refresh(self, *, force: bool = False, progress: Progress | None = None,
                lock_timeout: float = 10.0) -> RefreshReport:
        started = time.perf_counter()
        marker, done = self._check()
        if done is not None and not force:
            return done
        with self.index.writer(lock_timeout):
            conn = self.index.connect()
            try:
                mirror: Mirror | None = None
                if not force and marker is not None and get_meta(conn, "source_marker") == marker:
                    total = conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
                    report = RefreshReport(sessions_total=total, compared=False)
                else:
                    with self.source.read() as reader:
                        report, mirror, unfinished = self._refresh(conn, reader, force, progress)
                        handed = sum(phase["seconds"] for phase in report.phases.values())
                        report.keyword_seconds = round(time.perf_counter() - started - handed, 4)
                        for phase in unfinished:
                            phase_started = time.perf_counter()
                            sessions = phase.run(conn, reader, force=force)
                            _count_phase(report, phase.name, sessions, time.perf_counter() - phase_started)
                    if marker is not None:
                        with transaction(conn):
                            set_meta(conn, "source_marker", marker)
                    self.index.trim_log(conn)  # the sources' snapshot is released only now
                report.sessions_reattributed = self._reattribute_moved_folders(conn)
                markers = probe_markers(conn)
                if report.compared:
                    self._remember_mirror(None if force else mirror)
            finally:
                conn.close()
        if marker is not None:
            _unchanged[str(self.index.path)] = (f"{marker}|{self.index.identity()}", report.sessions_total, markers)
        report.seconds = round(time.perf_counter() - started, 4)
        return report

    # -- the algorithm ------------------------------------------------------

    def _take_cached_mirror(self) -> Mirror | None:
        """The kept mirror while the index is as the refresh that kept it left it; forgotten
        either way, so that a refresh that fails before its end leaves none behind."""
        kept, self._mirror = self._mirror, None
        if kept is None:
            return None
        version = data_version(self.index.path)
        return kept[1] if version is not None and version == kept[0] else None

    def _remember_mirror(self, mirror: Mirror | None) -> None:
        """Called under the writer lock, after this refresh's last commit."""
        version = data_version(self.index.path) if mirror is not None else None
        self._mirror = (version, mirror) if version is not None and mirror is not None else None

    def _refresh(self, conn: sqlite3.Connection, reader: SourceReader, force: bool,
                 progress: Progress | None) -> tuple[RefreshReport, Mirror, list[IndexPhase]]:
        """The keyword phase; returns its report, the mirror as this refresh leaves it (what
        it compared with, with what it wrote), and the phases whose :meth:`IndexPhase.run`
        must still look over the whole index.

        A kept mirror that is still valid says the last refresh ran every phase to the end and
        nobody wrote since. Then a phase that took every batch of this refresh has nothing
        left to do unless sessions were removed, and the check after each Hermes turn (one
        session changed) neither reads the mirror again (8 ms at M) nor has the edit chain
        look for stale sessions (4 ms)."""
        cached = self._take_cached_mirror()
        mirror = cached if cached is not None else read_mirror(conn)
        changes = pending_changes(conn, reader, force=force, mirror=mirror)
        signatures, max_id = changes.signatures, changes.max_message_id
        content_dirty, meta_dirty, removed = changes.content, changes.meta, changes.removed
        report = RefreshReport(sessions_total=len(signatures), full=force)
        if not changes and max_id == changes.indexed_max:
            # The source's signatures equal the mirror: kept instead of it, they share their
            # tuples with the reader's memory of state.db, so the next comparison finds them
            # identical without comparing their text.
            return report, signatures, [] if cached is not None and not force else list(self.phases)
        source_sessions = reader.sessions(content_dirty | meta_dirty)

        if force:
            # One transaction: readers keep the old index until the new one is complete.
            with transaction(conn):
                self._clear(conn)
                jobs = self._jobs(conn, source_sessions, sorted(content_dirty), known=())
                self._write_sessions(conn, source_sessions, prepare_all(reader, jobs, ()), report, progress,
                                     total=len(jobs), known=())
                chunks_deleted(conn, conn.execute(
                    "DELETE FROM chunks WHERE session_id NOT IN (SELECT id FROM sessions)").rowcount)
                self._finish(conn, max_id)
            report.sessions_removed = len(removed)
            return report, mirror, list(self.phases)

        with transaction(conn):
            for sid in removed:
                delete_session(conn, sid)
            for sid in meta_dirty:
                session = source_sessions[sid]
                git = self._effective_git(conn, session.cwd, session.git_repo_root, session.git_branch)
                update_session_meta(conn, session, git)
        report.sessions_removed = len(removed)
        report.sessions_updated = len(meta_dirty)
        ordered = sorted(content_dirty, key=lambda sid: source_sessions[sid].started_at)
        with transaction(conn):
            jobs = self._jobs(conn, source_sessions, ordered, known=changes.indexed)
        taking = list(self.phases)
        # A large build copies its log into the database in a thread (:mod:`.checkpoints`).
        aside = (checkpointing_aside(self.index.path, conn) if preparing.large_build(jobs)
                 else contextlib.nullcontext(lambda: None))
        # Closed here, not when it is collected: its worker processes end with the last batch.
        with contextlib.closing(prepare_all(reader, jobs, self.phases)) as prepared, aside as committed:
            for start in range(0, len(jobs), BATCH_SESSIONS):
                batch = list(itertools.islice(prepared, BATCH_SESSIONS))
                with transaction(conn):
                    self._write_sessions(conn, source_sessions, batch, report, None, total=len(batch),
                                         known=changes.indexed)
                committed()
                taking = self._hand_batch(conn, taking, batch, report)
                if progress:
                    progress(start + len(batch), len(jobs))
        with transaction(conn):
            self._finish(conn, max_id)
        written = dict(mirror)
        for sid in removed:
            written.pop(sid, None)
        written.update((sid, (s.signature, s.content_signature)) for sid, s in source_sessions.items())
        complete = cached is not None and not removed
        return report, written, [phase for phase in self.phases if not complete or phase not in taking]

    @staticmethod
    def _hand_batch(conn: sqlite3.Connection, phases: list[IndexPhase], batch: list[Prepared],
                    report: RefreshReport) -> list[IndexPhase]:
        """Give what was extracted for a committed batch to each phase still taking batches;
        returns those that are. A phase that fails on one (or whose extract failed) is not given
        the next ones: its :meth:`IndexPhase.run` after the keyword phase does what is left (and
        raises again if it is the phase's fault), so a broken phase never stops the keyword
        index half way."""
        taking = []
        for phase in phases:
            phase_started = time.perf_counter()
            sessions = 0
            failure = next((p.failed[phase.name] for p in batch if phase.name in p.failed), None)
            if failure is None:
                try:
                    sessions = phase.store(conn, {p.session_id: p.extracted[phase.name] for p in batch})
                except Exception:
                    failure = traceback.format_exc()
            if failure is None:
                taking.append(phase)
            else:
                logger.warning("index phase %s failed on a batch; it runs after the keyword phase instead\n%s",
                               phase.name, failure)
            _count_phase(report, phase.name, sessions, time.perf_counter() - phase_started)
        return taking

    def _finish(self, conn: sqlite3.Connection, max_id: int) -> None:
        set_meta(conn, "max_message_id", max_id)
        set_meta(conn, "last_index_at", time.time())
        bump(conn, GENERATION)

    def _clear(self, conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO entries_fts(entries_fts) VALUES ('delete-all')")
        conn.execute("DELETE FROM entries")
        conn.execute("DELETE FROM sessions")
        conn.execute("DELETE FROM probes")
        bump(conn, REMOVALS)
        scope_changed(conn)

    def _jobs(self, conn: sqlite3.Connection, sessions: dict[str, SourceSession], ids: Iterable[str], *,
              known: Container[str]) -> list[Job]:
        ids = list(ids)
        probe = probed_ahead(conn, (sessions[sid].cwd for sid in ids), self.probe)
        jobs = []
        # Sessions share a few folders: 5,000 sessions of the M corpus, 34 folders.
        found: dict[tuple[str | None, str | None, str | None], tuple[str | None, str | None]] = {}
        for sid in ids:
            session = sessions[sid]
            where = (session.cwd, session.git_repo_root, session.git_branch)
            if where not in found:
                found[where] = self._effective_git(conn, *where, probe=probe)
            jobs.append(Job(session, found[where], sid in known))
        return jobs

    def _write_sessions(self, conn: sqlite3.Connection, sessions: dict[str, SourceSession],
                        prepared: Iterable[Prepared], report: RefreshReport, progress: Progress | None, *,
                        total: int, known: Container[str]) -> None:
        """(Re)write whole sessions; ``known`` are those the index holds already (only they
        have old rows to delete — a first build skips that work)."""
        attribution_changed = sessions_came = False
        for done, session in enumerate(prepared, start=1):
            sid = session.session_id
            report.messages_read += session.message_count
            report.prepared_in_workers += session.in_worker
            written: Sequence[tuple] = session.entries
            tokens = session.tokens
            if sid in known:
                written, tokens = replace_entries(conn, sid, written), None
            insert_entries(conn, sid, written, tokens)
            report.entries_written += len(written)
            before = attribution_of(conn, sid) if sid in known else None
            upsert_session(conn, sessions[sid], session)
            if before is None:
                sessions_came = True
            elif before != attribution_of(conn, sid):
                attribution_changed = True
            report.sessions_updated += 1
            if progress and (done % 50 == 0 or done == total):
                progress(done, total)
        if attribution_changed or sessions_came:
            scope_changed(conn, only_added=not attribution_changed)

    def _reattribute_moved_folders(self, conn: sqlite3.Connection) -> int:
        """Probe again the folders that changed shape since they were probed, and give their
        sessions (and those of missing folders below them) the new repo root."""
        stale = moved(probe_markers(conn))
        if not stale:
            return 0
        with transaction(conn):
            changed = reprobe(conn, stale, self.probe)
            updated = 0
            for cwd in changed:
                rows = conn.execute("SELECT id, cwd, git_repo_root, git_branch, repo_root, branch FROM sessions "
                                    "WHERE cwd = ? OR substr(cwd, 1, length(?) + 1) = ? || '/'", (cwd, cwd, cwd))
                for row in rows.fetchall():
                    effective = self._effective_git(conn, row["cwd"], row["git_repo_root"], row["git_branch"])
                    if effective != (row["repo_root"], row["branch"]):
                        conn.execute("UPDATE sessions SET repo_root = ?, branch = ? WHERE id = ?",
                                     (*effective, row["id"]))
                        updated += 1
            if updated:
                bump(conn, GENERATION)
                scope_changed(conn)
        return updated

    def _effective_git(self, conn: sqlite3.Connection, cwd: str | None, git_repo_root: str | None,
                       git_branch: str | None, probe: Probe | None = None) -> tuple[str | None, str | None]:
        """The repo root and branch that attribution uses.

        When the cwd exists on this machine, the probe of the cwd decides: Hermes
        0.19 never clears a recorded ``git_repo_root``, so after a move the
        recorded root can be stale. A cwd that is gone keeps what Hermes recorded;
        with nothing recorded, its nearest existing folder is probed (a deleted
        subfolder still belongs to its repo).
        """
        if not cwd:
            return git_repo_root, git_branch
        if not os.path.isdir(cwd):
            if git_repo_root:
                return git_repo_root, git_branch
            cwd = _nearest_existing(cwd)
            if cwd is None:
                return None, git_branch
        repo_root, branch = cached_probe(conn, cwd, probe or self.probe)
        return repo_root, git_branch or branch


def _count_phase(report: RefreshReport, name: str, sessions: int, seconds: float) -> None:
    """Add to a phase's figures in ``report`` (its batches and its run)."""
    figures = report.phases.setdefault(name, {"sessions": 0, "seconds": 0.0})
    figures["sessions"] += sessions
    figures["seconds"] = round(figures["seconds"] + seconds, 4)


def _nearest_existing(path: str) -> str | None:
    """The closest existing ancestor of a missing folder, unless that is a junk root
    (``/``, the home folder, a temp dir), where probing would only find a dotfiles repo."""
    junk = {os.path.abspath(p) for p in ("/", os.path.expanduser("~"), tempfile.gettempdir())}
    current = os.path.abspath(path)
    while True:
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent
        if current in junk:
            return None
        if os.path.isdir(current):
            return current
