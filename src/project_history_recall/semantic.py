"""Semantic search: vectors for the indexed messages, built off the agent's path,
compared only within the asking session's scope.

* A message's text (its user/assistant text and tool calls, as indexed) is cut
  into chunks (:mod:`.chunking`); a chunk's vector is stored with its content
  hash and the model fingerprint, so unchanged text is never embedded twice
  (a ``/retry`` rewrite or a rebuilt index reuses vectors by hash) and vectors
  of another model are never compared.
* Moving a session re-embeds nothing: vectors belong to messages, projects are
  computed at query time.
* Embedding runs in small batches: vectors are computed without holding the
  index's writer lock and written under it, so refreshes and searches never
  wait on the model.
* A query loads the fingerprint's vectors once per process (a numpy matrix,
  reloaded when chunks change), masks it to the scope and takes cosine top-K.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .chunking import chunk_text
from .embeddings.base import CONSENT_REQUIRED, EmbeddingProvider, ProviderError, make_provider, parse_settings
from .errors import RecallError
from .index import Index, transaction
from .indexer import searchable_text
from .locks import exclusive, held_elsewhere
from .redaction import redact
from .search import Filters, Hit

if TYPE_CHECKING:
    pass

EMBED_KINDS = ("user", "assistant", "tool_call")
MAX_CHUNKS_PER_MESSAGE = 8
MAX_REDACT_CHARS = 64_000
BATCH_MESSAGES = 32
#: In-scope messages a search may embed on the spot before answering (a small
#: project is then fully semantic on first use); more go to the background.
SYNC_EMBED_BUDGET = 48
WRITE_LOCK_WAIT = 5.0

_providers: dict[str, EmbeddingProvider] = {}
_providers_lock = threading.Lock()


@dataclass
class SemanticState:
    """What ``semantic_status`` reports, and why."""

    status: str
    pending: int = 0
    error: str | None = None
    provider: EmbeddingProvider | None = None

    def as_dict(self) -> dict:
        out: dict[str, Any] = {"semantic_status": self.status}
        if self.pending:
            out["semantic_pending"] = self.pending
        if self.error:
            out["semantic_error"] = self.error
        return out


@dataclass
class _Matrix:
    key: tuple
    sessions: list[str]
    session_codes: Any  # np.ndarray[int32], one per row
    message_ids: Any  # np.ndarray[int64]
    vectors: Any  # np.ndarray[float32] rows L2-normalised
    code_of: dict[str, int] = field(default_factory=dict)


_matrices: dict[tuple[str, str], _Matrix] = {}
_matrices_lock = threading.Lock()


def provider_for(settings: Any, data_dir: Any, env: dict[str, str] | None = None) -> EmbeddingProvider:
    """One provider per fingerprint-relevant configuration per process (a local model loads once)."""
    parsed = parse_settings(settings)
    key = json.dumps([parsed.provider, parsed.model, parsed.endpoint], sort_keys=True)
    with _providers_lock:
        provider = _providers.get(key)
        if provider is None or parsed.provider != "local":
            # Remote providers are rebuilt each time: the consent check runs in make_provider.
            provider = make_provider(parsed, data_dir=data_dir, env=env)
            if parsed.provider == "local":
                _providers[key] = provider
        return provider


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


def pending_messages(conn: sqlite3.Connection, fingerprint: str, session_ids: list[str] | None = None,
                     limit: int | None = None) -> list[tuple[str, int]]:
    """Indexed messages that have no vector under ``fingerprint``, newest first."""
    scope = ""
    params: list[Any] = [fingerprint, *EMBED_KINDS]
    if session_ids is not None:
        scope = " AND e.session_id IN (SELECT value FROM json_each(?))"
        params.append(json.dumps(session_ids))
    sql = (
        "SELECT e.session_id, e.message_id FROM entries e "
        "WHERE e.message_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.session_id = e.session_id "
        "AND c.message_id = e.message_id AND c.model_fingerprint = ?) "
        f"AND e.kind IN ({','.join('?' * len(EMBED_KINDS))}){scope} "
        "GROUP BY e.session_id, e.message_id ORDER BY MAX(e.timestamp) DESC"
    )
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return [(r[0], int(r[1])) for r in conn.execute(sql, params)]


def count_pending(conn: sqlite3.Connection, fingerprint: str, session_ids: list[str] | None = None) -> int:
    return len(pending_messages(conn, fingerprint, session_ids))


class Embedder:
    """Fills the chunks table for one index and provider."""

    def __init__(self, index: Index, provider: EmbeddingProvider, chunk_size: int = 512,
                 chunk_overlap: int = 64, allowed_sessions: list[str] | None = None) -> None:
        self.index = index
        self.provider = provider
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        #: For a remote provider, the sessions whose projects the consent covers; None is all.
        self.allowed_sessions = allowed_sessions

    def embed(self, *, session_ids: list[str] | None = None, limit: int | None = None,
              progress: Callable[[int, int], None] | None = None,
              stop: threading.Event | None = None) -> int:
        """Embed pending messages (in scope, when given); returns how many got vectors."""
        import numpy as np

        fingerprint = self.provider.fingerprint
        if self.allowed_sessions is not None:
            allowed = set(self.allowed_sessions)
            session_ids = [s for s in (session_ids if session_ids is not None else allowed) if s in allowed]
        reader = self.index.connect()
        try:
            todo = pending_messages(reader, fingerprint, session_ids, limit)
            total, done = len(todo), 0
            for start in range(0, total, BATCH_MESSAGES):
                if stop is not None and stop.is_set():
                    break
                batch = todo[start : start + BATCH_MESSAGES]
                texts = message_texts(reader, batch)
                if self.provider.remote:
                    # Whole messages, before chunking: a secret's name and value may not share a chunk.
                    texts = {key: redact(text, MAX_REDACT_CHARS) for key, text in texts.items()}
                rows: list[tuple[str, int, int, str, bytes]] = []
                fresh: list[tuple[int, str]] = []  # (row index, chunk text) still to embed
                for key in batch:
                    for chunk in chunk_text(texts.get(key, ""), self.chunk_size, self.chunk_overlap,
                                            max_chunks=MAX_CHUNKS_PER_MESSAGE) or []:
                        known = reader.execute(
                            "SELECT vector FROM chunks WHERE content_hash = ? AND model_fingerprint = ? LIMIT 1",
                            (chunk.content_hash, fingerprint)).fetchone()
                        rows.append((key[0], key[1], chunk.index, chunk.content_hash, known[0] if known else b""))
                        if not known:
                            fresh.append((len(rows) - 1, chunk.text))
                if fresh:
                    vectors = np.asarray(self.provider.embed_passages([t for _, t in fresh]), dtype=np.float32)
                    for (row_index, _), vector in zip(fresh, vectors, strict=True):
                        sid, mid, idx, digest, _ = rows[row_index]
                        rows[row_index] = (sid, mid, idx, digest, vector.tobytes())
                # A message with no text gets an empty marker row so it is not pending forever.
                covered = {(r[0], r[1]) for r in rows}
                rows += [(sid, mid, 0, "", b"") for sid, mid in batch if (sid, mid) not in covered]
                self._write(rows, fingerprint)
                done += len(batch)
                if progress:
                    progress(done, total)
            return done
        finally:
            reader.close()

    def _write(self, rows: list[tuple[str, int, int, str, bytes]], fingerprint: str) -> None:
        now = time.time()
        with self.index.writer(WRITE_LOCK_WAIT):
            conn = self.index.connect()
            try:
                with transaction(conn):
                    conn.executemany(
                        "INSERT OR REPLACE INTO chunks(session_id, message_id, chunk_index, content_hash, "
                        "model_fingerprint, vector, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [(sid, mid, idx, digest, fingerprint, vector, now) for sid, mid, idx, digest, vector in rows],
                    )
                    bump_vectors_generation(conn)
            finally:
                conn.close()


def bump_vectors_generation(conn: sqlite3.Connection) -> None:
    """Every write to ``chunks`` bumps this, so caches of vectors and counts key on one meta row
    instead of counting the table."""
    conn.execute("INSERT INTO meta(key, value) VALUES ('vectors_generation', '1') "
                 "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1")


def _vectors_key(conn: sqlite3.Connection) -> tuple:
    row = conn.execute("SELECT (SELECT value FROM meta WHERE key = 'generation'), "
                       "(SELECT value FROM meta WHERE key = 'vectors_generation'), "
                       "(SELECT file FROM pragma_database_list WHERE name = 'main')").fetchone()
    return tuple(row)


def _matrix(conn: sqlite3.Connection, index_path: str, fingerprint: str) -> _Matrix:
    import numpy as np

    key = _vectors_key(conn)[1:]
    cache_key = (index_path, fingerprint)
    with _matrices_lock:
        cached = _matrices.get(cache_key)
        if cached is not None and cached.key == key:
            return cached
    sessions: list[str] = []
    code_of: dict[str, int] = {}
    codes, message_ids, blobs = [], [], []
    for sid, mid, blob in conn.execute(
        "SELECT session_id, message_id, vector FROM chunks WHERE model_fingerprint = ? AND length(vector) > 0",
        (fingerprint,),
    ):
        code = code_of.get(sid)
        if code is None:
            code = code_of[sid] = len(sessions)
            sessions.append(sid)
        codes.append(code)
        message_ids.append(mid)
        blobs.append(blob)
    vectors = (np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1)
               if blobs else np.empty((0, 0), dtype=np.float32))
    matrix = _Matrix(key, sessions, np.asarray(codes, dtype=np.int32), np.asarray(message_ids, dtype=np.int64),
                     vectors, code_of)
    with _matrices_lock:
        _matrices[cache_key] = matrix
    return matrix


_scope_rows_cache: dict[tuple, Any] = {}
#: A scope holding more than 1/5 of all vectors is scored with one product over the whole
#: matrix (measured at corpus M: gathering costs ~0.4 µs a row, the full product ~0.08).
FULL_PRODUCT_SHARE = 5


def _scope_rows(matrix: _Matrix, session_ids: list[str]) -> Any:
    """The matrix rows of the scope's sessions, cached per matrix state and scope."""
    import numpy as np

    key = (id(matrix), matrix.key, hash(tuple(session_ids)))
    rows = _scope_rows_cache.get(key)
    if rows is None:
        codes = np.asarray([matrix.code_of[s] for s in session_ids if s in matrix.code_of], dtype=np.int32)
        rows = np.flatnonzero(np.isin(matrix.session_codes, codes)) if len(codes) else np.empty(0, dtype=np.int64)
        if len(_scope_rows_cache) > 16:
            _scope_rows_cache.clear()
        _scope_rows_cache[key] = rows
    return rows


def semantic_hits(conn: sqlite3.Connection, index_path: str, provider: EmbeddingProvider, query: str,
                  session_ids: list[str], filters: Filters, top_k: int) -> list[Hit]:
    """Cosine top-K over the scope's vectors, merged to message level (best chunk wins)."""
    import numpy as np

    matrix = _matrix(conn, index_path, provider.fingerprint)
    if not len(matrix.message_ids) or not session_ids:
        return []
    rows = _scope_rows(matrix, session_ids)
    if not len(rows):
        return []
    query_vector = np.asarray(provider.embed_query(query), dtype=np.float32)
    if len(rows) * FULL_PRODUCT_SHARE > len(matrix.message_ids):
        # Gathering a large scope's rows copies them: one product over the whole matrix is cheaper.
        scores = (matrix.vectors @ query_vector)[rows]
    else:
        scores = matrix.vectors[rows] @ query_vector
    wanted = min(len(rows), top_k * MAX_CHUNKS_PER_MESSAGE)
    picked = np.argpartition(-scores, wanted - 1)[:wanted] if wanted < len(rows) else np.arange(len(rows))
    best, best_scores = rows[picked], scores[picked]
    per_message: dict[tuple[str, int], float] = {}
    for row, score in zip(best.tolist(), best_scores.tolist(), strict=True):
        key = (matrix.sessions[int(matrix.session_codes[row])], int(matrix.message_ids[row]))
        if score > per_message.get(key, -2.0):
            per_message[key] = score
    ranked = sorted(per_message.items(), key=lambda kv: (-kv[1], kv[0]))
    hits = _message_hits(conn, ranked, filters, top_k)
    for rank, hit in enumerate(hits, start=1):
        hit.semantic_rank = rank
    return hits


def _message_hits(conn: sqlite3.Connection, ranked: list[tuple[tuple[str, int], float]], filters: Filters,
                  top_k: int) -> list[Hit]:
    """Hits for the best messages that pass the filters, shown by their first indexed entry."""
    if not ranked:
        return []
    ids = [mid for (_, mid), _ in ranked]
    rows = conn.execute(
        "SELECT id, session_id, message_id, kind, text, timestamp FROM entries "
        "WHERE message_id IN (SELECT value FROM json_each(?)) ORDER BY id", [json.dumps(ids)]).fetchall()
    by_message: dict[tuple[str, int], list[sqlite3.Row]] = {}
    for row in rows:
        by_message.setdefault((row["session_id"], int(row["message_id"])), []).append(row)
    hits = []
    for key, score in ranked:
        entries = [r for r in by_message.get(key, []) if _passes(r, filters)]
        if not entries:
            continue
        row = entries[0]
        hits.append(Hit(row["id"], row["session_id"], row["message_id"], row["kind"], row["text"],
                        row["timestamp"], semantic_score=float(score)))
        if len(hits) >= top_k:
            break
    return hits


def _passes(row: sqlite3.Row, filters: Filters) -> bool:
    if filters.kinds and row["kind"] not in filters.kinds:
        return False
    if filters.after is not None and row["timestamp"] < filters.after:
        return False
    return not (filters.before is not None and row["timestamp"] >= filters.before)


def is_consent_error(error: ProviderError) -> bool:
    return error.code == CONSENT_REQUIRED


# -- pending counts, cached per index state ------------------------------------------

_pending_cache: dict[tuple, dict[str, int]] = {}


def pending_in_scope(conn: sqlite3.Connection, fingerprint: str, session_ids: list[str]) -> int:
    """How many in-scope messages lack vectors. The sessions with a backlog are found once
    per index and vector state (usually few); a query only looks those up in its scope."""
    key = (*_vectors_key(conn), fingerprint)
    pending = _pending_cache.get(key)
    if pending is None:
        kinds = ",".join("?" * len(EMBED_KINDS))
        messages = conn.execute(
            f"SELECT session_id, COUNT(DISTINCT message_id) FROM entries WHERE kind IN ({kinds}) "
            "AND message_id IS NOT NULL GROUP BY session_id", EMBED_KINDS).fetchall()
        # Only vectors of messages the index still has count (rewound ones are orphans).
        vectors = dict(conn.execute(
            "SELECT c.session_id, COUNT(DISTINCT c.message_id) FROM chunks c WHERE c.model_fingerprint = ? "
            f"AND EXISTS (SELECT 1 FROM entries e WHERE e.message_id = c.message_id AND e.kind IN ({kinds})) "
            "GROUP BY c.session_id", (fingerprint, *EMBED_KINDS)).fetchall())
        if len(_pending_cache) > 8:
            _pending_cache.clear()
        pending = _pending_cache[key] = {sid: n - vectors.get(sid, 0) for sid, n in messages
                                         if n > vectors.get(sid, 0)}
    if not pending:
        return 0
    in_scope = set(session_ids)
    return sum(n for sid, n in pending.items() if sid in in_scope)


# -- the background worker ---------------------------------------------------------


class _Worker(threading.Thread):
    def __init__(self, embedder: Embedder) -> None:
        super().__init__(name="project-history-recall-embed", daemon=True)
        self.embedder = embedder
        self.stop = threading.Event()
        self.error: str | None = None

    def run(self) -> None:
        # One embedding process per profile: a second Hermes window leaves it to the first.
        try:
            with exclusive(_embed_lock(self.embedder.index), 0, "another process is embedding"):
                self.embedder.embed(stop=self.stop)
        except RecallError as exc:
            if exc.code != "index_busy":
                self.error = exc.message
        except Exception as exc:  # reported as semantic_status "unavailable", never raised into Hermes
            self.error = f"{type(exc).__name__}: {exc}"


_workers: dict[str, _Worker] = {}
_workers_lock = threading.Lock()


def start_background(embedder: Embedder) -> _Worker:
    """Embed everything pending in a daemon thread (at most one per index per process)."""
    key = str(embedder.index.path)
    with _workers_lock:
        worker = _workers.get(key)
        if worker is None or not worker.is_alive():
            worker = _workers[key] = _Worker(embedder)
            worker.start()
        return worker


def background_running(index: Index) -> bool:
    worker = _workers.get(str(index.path))
    if worker is not None and worker.is_alive():
        return True
    return held_elsewhere(_embed_lock(index))


def _embed_lock(index: Index) -> Path:
    return index.data_dir / "embed.lock"


def last_background_error(index: Index) -> str | None:
    worker = _workers.get(str(index.path))
    return worker.error if worker is not None else None
