"""Semantic search: cosine top-K over the vectors of the asking session's scope.

A query loads the fingerprint's vectors once per process (a numpy matrix,
reloaded when chunks change), masks it to the scope and takes cosine top-K,
merged to message level (the best chunk wins).
"""

from __future__ import annotations

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
    key: tuple
    sessions: list[str]
    session_codes: Any  # np.ndarray[int32], one per row
    message_ids: Any  # np.ndarray[int64]
    vectors: Any  # np.ndarray[float32] rows L2-normalised (decoded from int8 once per load)
    code_of: dict[str, int] = field(default_factory=dict)


_matrices: dict[tuple[str, str], _Matrix] = {}


_matrices_lock = threading.Lock()




def _matrix(conn: sqlite3.Connection, index_path: str, fingerprint: str) -> _Matrix:
    import numpy as np

    key = vectors_key(conn)[1:]
    cache_key = (index_path, fingerprint)
    with _matrices_lock:
        cached = _matrices.get(cache_key)
        if cached is not None and cached.key == key:
            return cached
    sessions: list[str] = []
    code_of: dict[str, int] = {}
    codes, message_ids, blobs = [], [], []
    for sid, mid, blob in conn.execute(
        "SELECT session_id, message_id, vector FROM chunks WHERE model_id = ? AND length(vector) > 0",
        (model_id(conn, fingerprint),),
    ):
        code = code_of.get(sid)
        if code is None:
            code = code_of[sid] = len(sessions)
            sessions.append(sid)
        codes.append(code)
        message_ids.append(mid)
        blobs.append(blob)
    vectors = decode_matrix(blobs)
    matrix = _Matrix(key, sessions, np.asarray(codes, dtype=np.int32), np.asarray(message_ids, dtype=np.int64),
                     vectors, code_of)
    with _matrices_lock:
        _matrices[cache_key] = matrix
    return matrix


_scope_rows_cache: dict[tuple, Any] = {}
_scope_block_cache: dict[tuple, Any] = {}

#: A scope holding more than this share of all vectors is scored with one product over the
#: whole matrix rather than with a copy of nearly all of it.
WHOLE_MATRIX_SHARE = 0.8


def _scope_rows(matrix: _Matrix, session_ids: list[str]) -> tuple[tuple, Any]:
    """The matrix rows of the scope's sessions (and the cache key of that scope), cached per
    matrix state and scope."""
    import numpy as np

    key = (id(matrix), matrix.key, hash(tuple(session_ids)))
    rows = _scope_rows_cache.get(key)
    if rows is None:
        codes = np.asarray([matrix.code_of[s] for s in session_ids if s in matrix.code_of], dtype=np.int32)
        rows = np.flatnonzero(np.isin(matrix.session_codes, codes)) if len(codes) else np.empty(0, dtype=np.int64)
        if len(_scope_rows_cache) > 16:
            _scope_rows_cache.clear()
        _scope_rows_cache[key] = rows
    return key, rows


def _scope_scores(matrix: _Matrix, key: tuple, rows: Any, query_vector: Any) -> Any:
    """Cosines of the scope's rows. The product is bound by memory, so it reads only the
    scope's vectors: they are copied once into one contiguous block, kept for the last scope
    asked (a process mostly serves one project; at M's large project, 40 % of the vectors,
    9.9 ms a query against 23 for the whole matrix and 45 for gathering the rows each time)."""
    if len(rows) > WHOLE_MATRIX_SHARE * len(matrix.message_ids):
        return (matrix.vectors @ query_vector)[rows]
    block = _scope_block_cache.get(key)
    if block is None:
        block = matrix.vectors[rows]
        _scope_block_cache.clear()
        _scope_block_cache[key] = block
    return block @ query_vector


def semantic_hits(conn: sqlite3.Connection, index_path: str, provider: EmbeddingProvider, query: str,
                  session_ids: list[str], filters: Filters, top_k: int) -> list[Hit]:
    """Cosine top-K over the scope's vectors, merged to message level (best chunk wins)."""
    import numpy as np

    matrix = _matrix(conn, index_path, provider.fingerprint)
    if not len(matrix.message_ids) or not session_ids:
        return []
    key, rows = _scope_rows(matrix, session_ids)
    if not len(rows):
        return []
    query_vector = np.asarray(provider.embed_query(query), dtype=np.float32)
    # One BLAS thread: the product is bound by memory, and OpenBLAS's extra threads spin after it,
    # taking the core the rest of the search needs (measured: half the CPU, and less wall time).
    with single_blas_thread():
        scores = _scope_scores(matrix, key, rows, query_vector)
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
            "SELECT id, session_id, message_id, kind, timestamp FROM entries "
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
                row["timestamp"], semantic_score=float(score)) for row, score in chosen if row["id"] in texts]


def _passes(row: sqlite3.Row, filters: Filters) -> bool:
    if filters.kinds and row["kind"] not in filters.kinds:
        return False
    if filters.after is not None and row["timestamp"] < filters.after:
        return False
    return not (filters.before is not None and row["timestamp"] >= filters.before)
