"""Vectors are stored compactly (int8 + a scale per vector) without moving the rankings,
an index with float32 vectors is converted in place, and vectors of messages the index no
longer has are removed."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from builders import History, git_init, session_ids
from project_history_recall.index.store import MIGRATIONS, Index
from project_history_recall.index.vector_codec import decode_matrix, encode

unit_floats = st.floats(-1.0, 1.0, allow_nan=False, width=32)


@given(arrays(np.float32, st.integers(1, 768), elements=unit_floats))
@example(np.array([1.0] + [0.00390625] * 132, dtype=np.float32))  # hypothesis's counterexample to "cos > 0.999"
def test_a_stored_vector_keeps_its_direction(vector):
    norm = float(np.linalg.norm(vector))
    blob = encode(vector)
    assert len(blob) == 4 + len(vector)
    decoded = decode_matrix([blob])[0]
    if norm < 1e-6:
        return
    # int8 with a per-vector scale: a component is off by at most 1/254 of the largest one, so the
    # error is at most r = sqrt(n) · max / 254 of the vector's length and the angle's sine at most r
    # (a single large component beside many just under half a step comes closest: 0.99899 at n = 133).
    r = len(vector) ** 0.5 * float(np.abs(vector).max()) / 254 / norm
    assert float(decoded @ (vector / norm)) >= (1 - min(r, 1.0) ** 2) ** 0.5 - 1e-5
    assert float(np.linalg.norm(decoded)) == pytest.approx(1.0, abs=1e-5)


@settings(max_examples=30)
@given(st.integers(0, 2**32 - 1))
def test_rankings_survive_the_storage(seed):
    rng = np.random.default_rng(seed)
    rows = rng.normal(size=(200, 512)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    noise = rng.normal(size=512).astype(np.float32)
    query = rows[0] + 0.5 * noise / np.linalg.norm(noise)  # a paraphrase of row 0: clearly its nearest
    exact = rows @ query
    stored = decode_matrix([encode(r) for r in rows]) @ query
    assert np.argmax(exact) == np.argmax(stored) == 0
    # near-ties among the rest may swap, but no score moves by more than the quantisation allows
    assert np.max(np.abs(exact - stored)) < 0.02 * float(np.linalg.norm(query))


def test_float32_vectors_of_an_older_index_are_converted_not_re_embedded(tmp_path):
    data_dir = tmp_path / "index"
    data_dir.mkdir()
    conn = sqlite3.connect(data_dir / "index.db")
    for migration in MIGRATIONS[:4]:
        conn.executescript(migration if isinstance(migration, str) else "")
    conn.execute("PRAGMA user_version = 4")
    vector = np.linspace(-1, 1, 64, dtype=np.float32)
    vector /= np.linalg.norm(vector)
    digest = "ab" * 32
    conn.execute("INSERT INTO chunks(session_id, message_id, chunk_index, content_hash, model_fingerprint, vector, "
                 "created_at) VALUES ('s', 1, 0, ?, 'local|m|64|x', ?, 0)", (digest, vector.tobytes()))
    conn.execute("INSERT INTO chunks(session_id, message_id, chunk_index, content_hash, model_fingerprint, vector, "
                 "created_at) VALUES ('s', 2, 0, '', 'local|m|64|x', x'', 0)")
    conn.commit()
    conn.close()

    migrated = Index(data_dir).connect()
    try:
        rows = migrated.execute("SELECT m.fingerprint, c.content_hash, c.vector FROM chunks c "
                                "JOIN models m ON m.id = c.model_id ORDER BY c.message_id").fetchall()
    finally:
        migrated.close()
    assert [r[0] for r in rows] == ["local|m|64|x"] * 2
    assert rows[0][1] == bytes.fromhex(digest)[:16] and rows[1][1] == b""
    assert len(rows[0][2]) == 4 + 64 and rows[1][2] == b""
    assert float(decode_matrix([rows[0][2]])[0] @ vector) > 0.999


def _vector_sessions(h: History) -> set[str]:
    conn = h.recall().index.connect()
    try:
        return {r[0] for r in conn.execute("SELECT DISTINCT session_id FROM chunks WHERE length(vector) > 0")}
    finally:
        conn.close()


@pytest.mark.model
def test_vectors_of_a_deleted_session_are_removed(tmp_path):
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    h.session("keep", repo, "the heron cache keeps two tiers", "we evict the cold tier first")
    h.session("gone", repo, "the osprey queue drops messages", "we added a dead letter queue")
    h.session("ask", repo)
    recall = h.recall()
    assert session_ids(recall.search("messages lost by the queue", session_id="ask", mode="semantic"))[0] == "gone"
    recall.index_in_foreground()
    assert {"keep", "gone"} <= _vector_sessions(h)

    h.db.delete_session("gone")
    recall = h.recall()
    recall.index_in_foreground()
    assert "gone" not in _vector_sessions(h) and "keep" in _vector_sessions(h)
    assert "gone" not in session_ids(recall.search("messages lost by the queue", session_id="ask", mode="semantic"))
    h.close()
