"""The vector store's size at a corpus size, without the model's hours of CPU.

How many bytes the ``chunks`` table takes depends on how many chunks there are and the
vector's width, not on what the vectors say. So this runs the library's own chunking and
storage (:class:`~project_history_recall.index.vectors.Embedder`) over the whole corpus
with a stand-in provider that returns deterministic pseudo-random unit vectors of the
default model's width (512), and reports the chunk count and the table's bytes (dbstat).
Recall is not measured here: that needs the real model (``bench.eval_retrieval`` on the
real sets).

The model's share of the time is measured on every ``--stride``-th chunk text (the real
default model, on one thread, in the library's batches) and scaled to all chunks: the
full semantic index of the corpus is the storage run plus that.

    python -m bench.vector_size --size M
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.corpus import DEFAULT_SEED, SIZES, default_root, ensure_corpus
from bench.machine import describe, machine
from bench.run import _dbstat, _sum, prepare_home
from project_history_recall.embeddings import make_provider
from project_history_recall.embeddings.base import EmbeddingSettings, make_fingerprint
from project_history_recall.index.vectors import BATCH_MESSAGES, Embedder
from project_history_recall.recall import Recall

WIDTH = 512
#: The issue's figure for the float32 layout before schema V5 (2,048 bytes of vector, a 64-character
#: hex hash and the fingerprint in every row), measured at M with the default model.
BEFORE_M_BYTES = 668_000_000


class StandInProvider:
    """Unit vectors seeded by each text's SHA-256: the store's bytes, none of a model's meaning."""

    name = "bench-stand-in"
    model = "sha256"
    remote = False
    dimension = WIDTH

    def __init__(self, stride: int) -> None:
        self.stride = stride
        self.seen = 0
        #: Every ``stride``-th text it was asked to embed, for timing the real model on.
        self.sample: list[str] = []

    @property
    def fingerprint(self) -> str:
        return make_fingerprint(self.name, self.model, WIDTH, "")

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        self.sample += [t for n, t in enumerate(texts, start=self.seen) if n % self.stride == 0]
        self.seen += len(texts)
        rows = [np.random.default_rng(int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little"))
                .standard_normal(WIDTH) for t in texts]
        matrix = np.asarray(rows, dtype=np.float32).reshape(len(texts), WIDTH)
        return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_passages([text])[0]

    def close(self) -> None:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="M")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--stride", type=int, default=50, help="time the real model on every n-th chunk")
    args = parser.parse_args()
    size = SIZES[args.size]
    corpus = ensure_corpus(default_root(size), args.seed, size)
    out_dir = Path(__file__).resolve().parent / "out"
    recall = Recall(prepare_home(corpus, out_dir / f"vector-size-{size.name}"))
    recall.refresh()
    conn = recall.index.connect()
    try:
        with conn:  # a run starts from no vectors, so every chunk is stored (and sampled) again
            conn.execute("DELETE FROM chunks")
    finally:
        conn.close()
    clock = time.perf_counter()
    stand_in = StandInProvider(args.stride)
    stored = Embedder(recall.index, stand_in).embed()
    seconds = time.perf_counter() - clock
    model = make_provider(EmbeddingSettings())
    model.embed_passages(stand_in.sample[:8])  # loading the model is not indexing
    clock = time.perf_counter()
    for start in range(0, len(stand_in.sample), BATCH_MESSAGES):
        model.embed_passages(stand_in.sample[start : start + BATCH_MESSAGES])
    model_seconds = (time.perf_counter() - clock) * stand_in.seen / max(1, len(stand_in.sample))
    stats = _dbstat(recall.index.path) or {}
    chunk_bytes = _sum(stats, "chunks")
    conn = recall.index.connect()
    try:
        chunks = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    finally:
        conn.close()
    figures = {"size": size.name, "messages_embedded": stored, "chunks": chunks, "chunks_bytes": chunk_bytes,
               "bytes_per_chunk": round(chunk_bytes / chunks, 1) if chunks else None,
               "ratio_to_float32_m": round(chunk_bytes / BEFORE_M_BYTES, 3) if size.name == "M" else None,
               "store_seconds": round(seconds, 1), "model": model.fingerprint,
               "model_sample_chunks": len(stand_in.sample), "model_seconds_scaled": round(model_seconds, 1),
               "full_semantic_index_seconds": round(seconds + model_seconds, 1), "machine": describe(machine())}
    print(json.dumps(figures, indent=1))
    out = out_dir / f"vector-size-{size.name}.json"
    out.write_text(json.dumps(figures, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
