"""Vectors for the indexed messages, built off the agent's path.

* A message's text (its user/assistant text and tool calls, as indexed) is cut
  into chunks (:mod:`project_history_recall.chunking`); a chunk's vector is stored with its
  content hash and the model fingerprint, so unchanged text is never embedded twice
  (a ``/retry`` rewrite or a rebuilt index reuses vectors by hash) and vectors
  of another model are never compared.
* Moving a session re-embeds nothing: vectors belong to messages, projects are
  computed at query time.
* Embedding runs in small batches: vectors are computed without holding the
  index's writer lock and written under it, so refreshes and searches never
  wait on the model. A large backlog is worked off by one background thread per
  index (and one process per profile, by the embed lock).
* Which texts may be embedded by which provider is decided by the caller
  (:mod:`project_history_recall.services.semantic`): this room only writes what it is given,
  and asks the caller's :data:`PermitCheck` again before every batch, so a consent revoked
  or narrowed while a backlog is being worked off stops the sending at the next batch.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from project_history_recall.chunking import chunk_text
from project_history_recall.embeddings.base import CONSENT_REQUIRED, EmbeddingProvider
from project_history_recall.errors import RecallError
from project_history_recall.index.entries import SPOKEN_KINDS, searchable_text
from project_history_recall.index.store import VECTORS_GENERATION, Index, bump, chunks_deleted, short_hash, transaction
from project_history_recall.index.vector_codec import encode
from project_history_recall.locks import exclusive, held_elsewhere
from project_history_recall.redaction import redact
from project_history_recall.workers import Workers

EMBED_KINDS = (*SPOKEN_KINDS, "tool_call")


MAX_CHUNKS_PER_MESSAGE = 8


MAX_REDACT_CHARS = 64_000


BATCH_MESSAGES = 32


WRITE_LOCK_WAIT = 5.0


@dataclass(frozen=True)
class Permit:
    """What may be embedded right now: the sessions (None: all) and the oldest message time
    (None: all history) — an incremental consent sends only messages written after it."""

    sessions: frozenset[str] | None = None
    since: float | None = None

    def allows(self, session_id: str, timestamp: float) -> bool:
        return (self.sessions is None or session_id in self.sessions) and \
            (self.since is None or timestamp >= self.since)


#: Asked before every batch; None means stop now (the consent is gone).
PermitCheck = Callable[[], "Permit | None"]

EVERYTHING = Permit()


def message_texts(conn: sqlite3.Connection, keys: list[tuple[str, int]]) -> dict[tuple[str, int], str]:
    """The text of each message as it is searched: its entries joined in order, tool calls
    as their name and argument values (decoded JSON, not its escaped string)."""
    if not keys:
        return {}
    rows = conn.execute(
        "SELECT session_id, message_id, kind, text FROM entries WHERE message_id IN (SELECT value FROM json_each(?)) "
        f"AND kind IN ({','.join('?' * len(EMBED_KINDS))}) ORDER BY id",
        [json.dumps([m for _, m in keys]), *EMBED_KINDS],
    ).fetchall()
    wanted = set(keys)
    texts: dict[tuple[str, int], list[str]] = {}
    for row in rows:
        key = (row["session_id"], int(row["message_id"]))
        if key in wanted:
            texts.setdefault(key, []).append(searchable_text(row["kind"], row["text"]))
    return {k: "\n".join(v) for k, v in texts.items()}


def model_id(conn: sqlite3.Connection, fingerprint: str) -> int:
    """The ``models`` row of ``fingerprint``; -1 (matching no vector) when none was stored yet."""
    row = conn.execute("SELECT id FROM models WHERE fingerprint = ?", (fingerprint,)).fetchone()
    return int(row[0]) if row else -1


def pending_messages(conn: sqlite3.Connection, fingerprint: str, session_ids: list[str] | None = None,
                     limit: int | None = None, since: float | None = None) -> list[tuple[str, int, float]]:
    """Indexed messages that have no vector under ``fingerprint``, newest first, with their time;
    with ``since``, only those written at or after it."""
    scope = ""
    params: list[Any] = [model_id(conn, fingerprint), *EMBED_KINDS]
    if session_ids is not None:
        scope = " AND e.session_id IN (SELECT value FROM json_each(?))"
        params.append(json.dumps(session_ids))
    sql = (
        "SELECT e.session_id, e.message_id, MAX(e.timestamp) FROM entries e "
        "WHERE e.message_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.model_id = ? "
        "AND c.session_id = e.session_id AND c.message_id = e.message_id) "
        f"AND e.kind IN ({','.join('?' * len(EMBED_KINDS))}){scope} "
        "GROUP BY e.session_id, e.message_id"
    )
    if since is not None:
        sql += " HAVING MAX(e.timestamp) >= ?"
        params.append(since)
    sql += " ORDER BY MAX(e.timestamp) DESC"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return [(r[0], int(r[1]), float(r[2] or 0.0)) for r in conn.execute(sql, params)]


class Embedder:
    """Fills the chunks table for one index and provider."""

    def __init__(self, index: Index, provider: EmbeddingProvider, chunk_size: int = 512,
                 chunk_overlap: int = 64, permit: PermitCheck | None = None) -> None:
        self.index = index
        self.provider = provider
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        #: For a remote provider, what the consent allows now (asked before every batch); None: all.
        self.permit = permit or (lambda: EVERYTHING)

    def embed(self, *, session_ids: list[str] | None = None, limit: int | None = None,
              progress: Callable[[int, int], None] | None = None,
              stop: threading.Event | None = None) -> int:
        """Embed pending messages (in scope, when given); returns how many got vectors."""
        permit = self.permit()
        if permit is None:
            return 0
        whole_backlog = session_ids is None and limit is None and permit.sessions is None and permit.since is None
        if permit.sessions is not None:
            session_ids = [s for s in (session_ids if session_ids is not None else permit.sessions)
                           if s in permit.sessions]
        reader = self.index.connect()
        try:
            todo = pending_messages(reader, self.provider.fingerprint, session_ids, limit, permit.since)
            total, done = len(todo), 0
            for start in range(0, total, BATCH_MESSAGES):
                permit = self.permit()
                if permit is None or (stop is not None and stop.is_set()):
                    break
                batch = [(sid, mid) for sid, mid, at in todo[start : start + BATCH_MESSAGES]
                         if permit.allows(sid, at)]
                self._embed_batch(reader, batch)
                done += len(batch)
                if progress:
                    progress(done, total)
            if whole_backlog and done == total:
                self._drop_orphans()
            return done
        finally:
            reader.close()

    def _embed_batch(self, reader: sqlite3.Connection, batch: list[tuple[str, int]]) -> None:
        import numpy as np

        if not batch:
            return
        fingerprint = self.provider.fingerprint
        model = model_id(reader, fingerprint)
        texts = message_texts(reader, batch)
        if self.provider.remote:
            # Whole messages, before chunking: a secret's name and value may not share a chunk.
            texts = {key: redact(text, MAX_REDACT_CHARS) for key, text in texts.items()}
        rows: list[tuple[str, int, int, bytes, bytes]] = []
        fresh: list[tuple[int, str]] = []  # (row index, chunk text) still to embed
        for key in batch:
            for chunk in chunk_text(texts.get(key, ""), self.chunk_size, self.chunk_overlap,
                                    max_chunks=MAX_CHUNKS_PER_MESSAGE) or []:
                digest = short_hash(chunk.content_hash)
                known = reader.execute(
                    "SELECT vector FROM chunks WHERE content_hash = ? AND model_id = ? LIMIT 1",
                    (digest, model)).fetchone()
                rows.append((key[0], key[1], chunk.index, digest, known[0] if known else b""))
                if not known:
                    fresh.append((len(rows) - 1, chunk.text))
        if fresh:
            vectors = np.asarray(self.provider.embed_passages([t for _, t in fresh]), dtype=np.float32)
            for (row_index, _), vector in zip(fresh, vectors, strict=True):
                sid, mid, idx, digest, _ = rows[row_index]
                rows[row_index] = (sid, mid, idx, digest, encode(vector))
        # A message with no text gets an empty marker row so it is not pending forever.
        covered = {(r[0], r[1]) for r in rows}
        rows += [(sid, mid, 0, b"", b"") for sid, mid in batch if (sid, mid) not in covered]
        self._write(rows, fingerprint)

    def _write(self, rows: list[tuple[str, int, int, bytes, bytes]], fingerprint: str) -> None:
        """Store ``rows`` under the model of ``fingerprint`` (registered on its first vector)."""
        with self.index.writer(WRITE_LOCK_WAIT):
            conn = self.index.connect()
            try:
                with transaction(conn):
                    conn.execute("INSERT OR IGNORE INTO models(fingerprint) VALUES (?)", (fingerprint,))
                    model = model_id(conn, fingerprint)
                    # IGNORE, not REPLACE: a replaced row is a deleted one (see VECTORS_REMOVED),
                    # and a row already there came from another run over the same message.
                    conn.executemany(
                        "INSERT OR IGNORE INTO chunks(model_id, session_id, message_id, chunk_index, content_hash, "
                        "vector) VALUES (?, ?, ?, ?, ?, ?)",
                        [(model, sid, mid, idx, digest, vector) for sid, mid, idx, digest, vector in rows],
                    )
                    bump(conn, VECTORS_GENERATION)
            finally:
                conn.close()

    def _drop_orphans(self) -> None:
        """Remove the vectors of messages the index no longer has (deleted, rewound, or a session
        gone from the source). Done after a complete run, not on the indexer's path, so that a
        ``/retry`` rewrite's new messages could first reuse the old ones' vectors by hash."""
        with self.index.writer(WRITE_LOCK_WAIT):
            conn = self.index.connect()
            try:
                with transaction(conn):
                    chunks_deleted(conn, conn.execute(
                        "DELETE FROM chunks WHERE NOT EXISTS (SELECT 1 FROM entries e "
                        "WHERE e.session_id = chunks.session_id AND e.message_id = chunks.message_id)").rowcount)
            finally:
                conn.close()


def vectors_key(conn: sqlite3.Connection) -> tuple:
    """(generation, vectors_generation, vectors_removed, file): what the vector caches key on."""
    row = conn.execute("SELECT (SELECT value FROM meta WHERE key = 'generation'), "
                       "(SELECT value FROM meta WHERE key = 'vectors_generation'), "
                       "(SELECT value FROM meta WHERE key = 'vectors_removed'), "
                       "(SELECT file FROM pragma_database_list WHERE name = 'main')").fetchone()
    return tuple(row)


@dataclass
class _Backlog:
    """What :func:`pending_in_scope` last counted for one index, model and ``since``: each
    session's content signature then, and its messages without vectors (only those with some)."""

    generations: tuple
    content: dict[str, str]
    pending: dict[str, int]


_backlogs: dict[tuple, _Backlog] = {}


def pending_in_scope(conn: sqlite3.Connection, fingerprint: str, session_ids: list[str],
                     since: float | None = None) -> int:
    """How many in-scope messages lack vectors (with ``since``: of those written at or after it;
    older ones are not meant to get any)."""
    return sum(pending_sessions(conn, fingerprint, session_ids, since).values())


def pending_sessions(conn: sqlite3.Connection, fingerprint: str, session_ids: list[str],
                     since: float | None = None) -> dict[str, int]:
    """The in-scope sessions with messages lacking vectors, and how many each (as
    :func:`pending_in_scope`). The sessions with a backlog are counted once per index and
    vector state (usually few); a query only looks those up in its scope.

    After a write only some sessions are counted again (counting them all is 110 ms at M for
    the messages and as much for the vectors, which every search after a Hermes turn paid):
    those whose content signature changed (their embeddable entries change only with it), and,
    when vectors were written, those that had a backlog (vectors are only added for messages
    that lacked them; the ones deleted are of sessions gone or of messages the index no longer
    has, which count for nothing)."""
    generation, vectors_generation, _, path = vectors_key(conn)
    key = (path, fingerprint, since)
    backlog = _backlogs.get(key)
    if backlog is None or backlog.generations != (generation, vectors_generation):
        cursor = conn.cursor()
        cursor.row_factory = None  # 5,000 rows at M: tuples, not sqlite3.Row
        content = dict(cursor.execute("SELECT id, content_signature FROM sessions"))
        if backlog is None:
            pending = _count_backlog(conn, fingerprint, since, None)
        else:
            again = {sid for sid, signature in content.items() if backlog.content.get(sid) != signature}
            if vectors_generation != backlog.generations[1]:
                again |= backlog.pending.keys() & content.keys()
            pending = {sid: n for sid, n in backlog.pending.items() if sid in content and sid not in again}
            if again:
                pending.update(_count_backlog(conn, fingerprint, since, again))
        if len(_backlogs) > 8:
            _backlogs.clear()
        backlog = _backlogs[key] = _Backlog((generation, vectors_generation), content, pending)
    if not backlog.pending:
        return {}
    in_scope = set(session_ids)
    return {sid: n for sid, n in backlog.pending.items() if sid in in_scope}


def _count_backlog(conn: sqlite3.Connection, fingerprint: str, since: float | None,
                   sessions: set[str] | None) -> dict[str, int]:
    """Messages without vectors, by session (of ``sessions``, or all), for those with some."""
    kinds = ",".join("?" * len(EMBED_KINDS))
    # A message is at or after ``since`` exactly when one of its entries is.
    newer, newer_params = ("AND timestamp >= ?", [since]) if since is not None else ("", [])
    only, only_params = ("AND session_id IN (SELECT value FROM json_each(?))",
                         [json.dumps(sorted(sessions))]) if sessions is not None else ("", [])
    messages = conn.execute(
        f"SELECT session_id, COUNT(DISTINCT message_id) FROM entries WHERE kind IN ({kinds}) "
        f"AND message_id IS NOT NULL {newer} {only} GROUP BY session_id",
        [*EMBED_KINDS, *newer_params, *only_params]).fetchall()
    # Only vectors of messages the index still has count (rewound ones are orphans).
    vectors = dict(conn.execute(
        "SELECT c.session_id, COUNT(DISTINCT c.message_id) FROM chunks c WHERE c.model_id = ? "
        f"{only.replace('session_id', 'c.session_id')} "
        f"AND EXISTS (SELECT 1 FROM entries e WHERE e.message_id = c.message_id AND e.kind IN ({kinds}) "
        f"{newer.replace('timestamp', 'e.timestamp')}) GROUP BY c.session_id",
        (model_id(conn, fingerprint), *only_params, *EMBED_KINDS, *newer_params)).fetchall())
    return {sid: n - vectors.get(sid, 0) for sid, n in messages if n > vectors.get(sid, 0)}


#: Seconds a failed background run is reported (``unavailable``) before the next read tries
#: again: a provider that was down for a while is used again without a restart.
BACKGROUND_RETRY_SECONDS = 60.0


class _Worker(threading.Thread):
    def __init__(self, embedder: Embedder) -> None:
        super().__init__(name="project-history-recall-embed", daemon=True)
        self.embedder = embedder
        self.stop = threading.Event()
        self.error: str | None = None
        self.ended_at = 0.0

    def recent_error(self) -> str | None:
        if self.error and time.monotonic() - self.ended_at < BACKGROUND_RETRY_SECONDS:
            return self.error
        return None

    def run(self) -> None:
        # One embedding process per profile: a second Hermes window leaves it to the first.
        try:
            with exclusive(_embed_lock(self.embedder.index), 0, "another process is embedding"):
                self.embedder.embed(stop=self.stop)
        except RecallError as exc:
            # Busy: another process embeds. Consent withdrawn mid-request: stopping is the point.
            if exc.code not in ("index_busy", CONSENT_REQUIRED):
                self.error = exc.message
        except Exception as exc:  # reported as semantic_status "unavailable", never raised into Hermes
            self.error = f"{type(exc).__name__}: {exc}"
        self.ended_at = time.monotonic()


_workers: Workers[_Worker] = Workers()


def start_background(embedder: Embedder) -> _Worker:
    """Embed everything pending in a daemon thread (at most one per index per process)."""
    return _workers.start(str(embedder.index.path), lambda: _Worker(embedder))


def background_running(index: Index) -> bool:
    return _workers.running(str(index.path)) or held_elsewhere(_embed_lock(index))


def _embed_lock(index: Index) -> Path:
    return index.data_dir / "embed.lock"


def last_background_error(index: Index) -> str | None:
    """Why the last background run failed, for :data:`BACKGROUND_RETRY_SECONDS` after it did."""
    worker = _workers.last(str(index.path))
    return worker.recent_error() if worker is not None and not worker.is_alive() else None
