"""The recording fake OpenAI-compatible embedding server of the test suite
(``tests/fakes/embedding_server.py``), importable from the stress runner."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from .world import ROOT

if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))

from fakes.embedding_server import FakeEmbeddingServer


@contextmanager
def embedding_server(dim: int = 8) -> Iterator[FakeEmbeddingServer]:
    with FakeEmbeddingServer(dim=dim) as server:
        yield server
