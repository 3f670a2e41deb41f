"""Semantic search: cosine top-K over the vectors of the asking session's scope.

A query loads the fingerprint's vectors once per process (a numpy matrix, extended
with the rows added since, read again whole when rows were deleted), masks it to the
scope and takes cosine top-K, merged to message level (the best chunk wins).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import sqlite3
import threading
from dataclasses import dataclass, field
from typing import Any

from project_history_recall.embeddings._threads import single_blas_thread
from project_history_recall.embeddings.base import EmbeddingProvider
from project_history_recall.index.vector_codec import decode_matrix
from project_history_recall.index.vectors import MAX_CHUNKS_PER_MESSAGE, model_id, vectors_key
from project_history_recall.search.keyword import Hit
from project_history_recall.search.scope import Filters


@dataclass
class _Matrix:
    key: tuple  # (vectors_generation, vectors_removed, index file) when read
    sessions: list[str]
    session_codes: Any  # np.ndarray[int32], one per row
    message_ids: Any  # np.ndarray[int64]
    vectors: Any  # np.ndarray[float32] rows L2-normalised (decoded from int8 once per load)
    code_of: dict[str, int] = field(default_factory=dict)
    #: the largest chunk id read: while no row is deleted, rows added later have larger ids
    last_id: int = 0
    #: ``vectors`` is this array's first rows; the rest is room for rows added later
    storage: Any = None
    #: one number shared by a whole read and the matrices that added rows to it: the scope
    #: caches extend what they kept for it instead of starting again
    lineage: int = 0


_matrices: dict[tuple[str, str], _Matrix] = {}


_matrices_lock = threading.Lock()

#: Room kept for added rows, as a share of a whole read (at least :data:`MIN_SPARE_ROWS`).
SPARE_SHARE = 0.125
MIN_SPARE_ROWS = 1024


def _matrix(conn: sqlite3.Connection, index_path: str, fingerprint: str) -> _Matrix:
    """The fingerprint's vectors as one matrix, kept per process. After a Hermes turn the
    background embedder adds the new messages' rows; reading all of them again cost 0.55-1 s at
    M, so while no row was deleted (``vectors_removed``) only the added rows are read."""
    key = vectors_key(conn)[1:]
    cache_key = (index_path, fingerprint)
    with _matrices_lock:
        cached = _matrices.get(cache_key)
        if cached is not None and cached.key == key:
            return cached
        if cached is not None and cached.key[1:] == key[1:] and len(cached.message_ids):
            matrix = _with_added_rows(conn, cached, fingerprint, key)
            _matrices[cache_key] = matrix
            return matrix
    matrix = _read_matrix(conn, fingerprint, key)
    with _matrices_lock:
        _matrices[cache_key] = matrix
    return matrix


_lineages = itertools.count(1)


def _rows(conn: sqlite3.Connection, fingerprint: str, after_id: int) -> tuple[list, list, list, int]:
    """(session ids, message ids, blobs, largest id) of the fingerprint's vectors above ``after_id``."""
    sids, mids, blobs, last = [], [], [], after_id
    # ``+model_id``: walk the ids from ``after_id`` (the model's index would visit all its rows)
    for chunk_id, sid, mid, blob in conn.execute(
        "SELECT id, session_id, message_id, vector FROM chunks WHERE +model_id = ? AND id > ? "
        "AND length(vector) > 0 ORDER BY id", (model_id(conn, fingerprint), after_id)):
        sids.append(sid)
        mids.append(mid)
        blobs.append(blob)
        last = chunk_id
    return sids, mids, blobs, last


def _codes(sids: list[str], sessions: list[str], code_of: dict[str, int]) -> list[int]:
    """Each row's session number, numbering sessions not seen before (``sessions`` and
    ``code_of`` grow)."""
    codes = []
    for sid in sids:
        code = code_of.get(sid)
        if code is None:
            code = code_of[sid] = len(sessions)
            sessions.append(sid)
        codes.append(code)
    return codes


def _read_matrix(conn: sqlite3.Connection, fingerprint: str, key: tuple) -> _Matrix:
    import numpy as np

    sids, mids, blobs, last = _rows(conn, fingerprint, 0)
    sessions: list[str] = []
    code_of: dict[str, int] = {}
    codes = _codes(sids, sessions, code_of)
    storage = decode_matrix(blobs, spare_rows=max(MIN_SPARE_ROWS, int(len(blobs) * SPARE_SHARE)))
    return _Matrix(key, sessions, np.asarray(codes, dtype=np.int32), np.asarray(mids, dtype=np.int64),
                   storage[: len(blobs)], code_of, last, storage, next(_lineages))


def _with_added_rows(conn: sqlite3.Connection, base: _Matrix, fingerprint: str, key: tuple) -> _Matrix:
    """``base`` and the rows added since it was read (called under the lock: two searches must
    not write the same spare rows). The new matrix shares ``base``'s storage while it has room;
    ``base`` itself is unchanged for the searches still using it."""
    import numpy as np

    sids, mids, blobs, last = _rows(conn, fingerprint, base.last_id)
    if not blobs:
        return dataclasses.replace(base, key=key)
    sessions, code_of = list(base.sessions), dict(base.code_of)
    codes = _codes(sids, sessions, code_of)
    used, added = len(base.message_ids), decode_matrix(blobs)
    storage = base.storage
    if used + len(blobs) > len(storage):
        spare = max(MIN_SPARE_ROWS, int((used + len(blobs)) * SPARE_SHARE))
        storage = np.empty((used + len(blobs) + spare, base.vectors.shape[1]), dtype=np.float32)
        storage[:used] = base.vectors
    storage[used : used + len(blobs)] = added
    return _Matrix(key, sessions, np.concatenate([base.session_codes, np.asarray(codes, dtype=np.int32)]),
                   np.concatenate([base.message_ids, np.asarray(mids, dtype=np.int64)]),
                   storage[: used + len(blobs)], code_of, last, storage, base.lineage)


#: per (lineage, scope): (the matrix rows looked at, the scope's rows among them)
_scope_rows_cache: dict[tuple, tuple[int, Any]] = {}
#: lineage -> (rows, their vectors copied into one block), for the last scope asked
_scope_block_cache: dict[int, tuple[Any, Any]] = {}

#: A scope holding more than this share of all vectors is scored with one product over the
#: whole matrix rather than with a copy of nearly all of it.
WHOLE_MATRIX_SHARE = 0.8
#: Rows a scope gained after its block was copied are gathered at each query, until they are
#: this share of the block; then the block is copied again.
BLOCK_TAIL_SHARE = 0.1


def _scope_rows(matrix: _Matrix, session_ids: list[str]) -> Any:
    """The matrix rows of the scope's sessions (ascending), cached per lineage and scope; rows
    added to the matrix since are looked at alone."""
    import numpy as np

    key = (matrix.lineage, hash(tuple(session_ids)))
    total = len(matrix.message_ids)
    covered, rows = _scope_rows_cache.get(key, (0, None))
    if rows is None or covered > total:  # (an older matrix of the lineage, still in use)
        covered, rows = 0, np.empty(0, dtype=np.int64)
    if covered < total:
        codes = np.asarray([matrix.code_of[s] for s in session_ids if s in matrix.code_of], dtype=np.int32)
        added = np.flatnonzero(np.isin(matrix.session_codes[covered:], codes)) + covered
        rows = np.concatenate([rows, added])
        if len(_scope_rows_cache) > 16:
            _scope_rows_cache.clear()
        _scope_rows_cache[key] = (total, rows)
    return rows


def _scope_scores(matrix: _Matrix, rows: Any, query_vector: Any) -> Any:
    """Cosines of the scope's rows. The product is bound by memory, so it reads only the
    scope's vectors: they are copied once into one contiguous block, kept for the last scope
    asked (a process mostly serves one project; at M's large project, 40 % of the vectors,
    9.9 ms a query against 23 for the whole matrix and 45 for gathering the rows each time).
    A Hermes turn adds rows after all others, and a new session joins the scope with only
    such rows: while the block's rows begin the scope's rows, the rest are gathered apart."""
    import numpy as np

    if len(rows) > WHOLE_MATRIX_SHARE * len(matrix.message_ids):
        return (matrix.vectors @ query_vector)[rows]
    held_rows, block = _scope_block_cache.get(matrix.lineage, (None, None))
    held = 0 if held_rows is None else len(held_rows)
    if (block is None or held > len(rows) or len(rows) - held > BLOCK_TAIL_SHARE * held
            or not np.array_equal(rows[:held], held_rows)):
        held, block = len(rows), matrix.vectors[rows]
        _scope_block_cache.clear()
        _scope_block_cache[matrix.lineage] = (rows, block)
    scores = block @ query_vector
    if held == len(rows):
        return scores
    return np.concatenate([scores, matrix.vectors[rows[held:]] @ query_vector])


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
    # One BLAS thread: the product is bound by memory, and OpenBLAS's extra threads spin after it,
    # taking the core the rest of the search needs (measured: half the CPU, and less wall time).
    with single_blas_thread():
        scores = _scope_scores(matrix, rows, query_vector)
    wanted = min(len(rows), top_k * MAX_CHUNKS_PER_MESSAGE)
    picked = np.argpartition(-scores, wanted - 1)[:wanted] if wanted < len(rows) else np.arange(len(rows))
    best, best_scores = rows[picked], scores[picked]
    per_message: dict[tuple[str, int], float] = {}
    sessions = matrix.sessions
    for code, message_id, score in zip(matrix.session_codes[best].tolist(), matrix.message_ids[best].tolist(),
                                       best_scores.tolist(), strict=True):
        key = (sessions[code], message_id)
        if score > per_message.get(key, -2.0):
            per_message[key] = score
    ranked = sorted(per_message.items(), key=lambda kv: (-kv[1], kv[0]))
    hits = _message_hits(conn, ranked, filters, top_k)
    for rank, hit in enumerate(hits, start=1):
        hit.semantic_rank = rank
    return hits


#: Candidates read beyond ``top_k`` in a batch: nearly every candidate passes (filters are
#: rare, orphaned vectors rarer), so a first batch barely larger than ``top_k`` usually answers,
#: and reading twice as many messages' wide rows was half of this function's time.
BATCH_SLACK = 10


def _message_hits(conn: sqlite3.Connection, ranked: list[tuple[tuple[str, int], float]], filters: Filters,
                  top_k: int) -> list[Hit]:
    """Hits for the best messages that pass the filters, shown by their first indexed entry."""
    if not ranked:
        return []
    # Up to 8 chunks a message were picked, so ``ranked`` holds several times top_k messages:
    # their entries are read a batch at a time (:data:`BATCH_SLACK`), best first, until top_k
    # pass the filters, and the texts (a tool call can hold 32,000 characters) only for those kept.
    chosen: list[tuple[sqlite3.Row, float]] = []
    batch = top_k + BATCH_SLACK
    for start in range(0, len(ranked), batch):
        part = ranked[start : start + batch]
        rows = conn.execute(
            "SELECT id, session_id, message_id, kind, timestamp, position FROM entries "
            "WHERE message_id IN (SELECT value FROM json_each(?)) ORDER BY id",
            [json.dumps([mid for (_, mid), _ in part])]).fetchall()
        by_message: dict[tuple[str, int], list[sqlite3.Row]] = {}
        for row in rows:
            by_message.setdefault((row["session_id"], int(row["message_id"])), []).append(row)
        for key, score in part:
            entries = [r for r in by_message.get(key, []) if _passes(r, filters)]
            if entries:
                chosen.append((entries[0], score))
                if len(chosen) >= top_k:
                    break
        if len(chosen) >= top_k:
            break
    texts = dict(conn.execute("SELECT id, text FROM entries WHERE id IN (SELECT value FROM json_each(?))",
                              [json.dumps([row["id"] for row, _ in chosen])]).fetchall())
    # (an entry a refresh replaced between the two reads is left out)
    return [Hit(row["id"], row["session_id"], row["message_id"], row["kind"], texts[row["id"]],
                row["timestamp"], row["position"], semantic_score=float(score))
            for row, score in chosen if row["id"] in texts]


def _passes(row: sqlite3.Row, filters: Filters) -> bool:
    if filters.kinds and row["kind"] not in filters.kinds:
        return False
    if filters.after is not None and row["timestamp"] < filters.after:
        return False
    return not (filters.before is not None and row["timestamp"] >= filters.before)
