"""The embedding provider interface, its settings and its errors.

Importing this module is cheap: numpy and the providers' libraries are loaded
only when a provider is built or first used (``make_provider`` imports the
provider module it needs; local models load on the first embed call).

A provider turns text into L2-normalised float32 vectors:

* ``embed_passages(texts)`` → ``(n, dimension)`` array, one row per text, in order;
* ``embed_query(text)`` → ``(dimension,)`` array (some models embed queries
  differently from passages, e.g. e5's ``query:`` / ``passage:`` prefixes);
* ``fingerprint`` — ``provider|model|dimension|endpoint``, stable across runs.
  Vectors made under different fingerprints are never compared: a stored vector
  whose fingerprint differs from the current provider's must be re-embedded;
* ``remote`` — True when text leaves the machine (the caller decides, by the user's
  consent, whether it may be used, and redacts first).

Every failure is a :class:`ProviderError` with a stable ``code``; the caller
reports all of them as ``semantic_status: "unavailable"`` and keeps the keyword
results.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

from project_history_recall.errors import RecallError

if TYPE_CHECKING:
    import numpy as np

# -- error codes -------------------------------------------------------------
PROVIDER_UNAVAILABLE = "provider_unavailable"  # cannot reach / load (network down, 5xx, package missing)
PROVIDER_TIMEOUT = "provider_timeout"  # the service did not answer in time (after retries)
PROVIDER_RATE_LIMITED = "provider_rate_limited"  # 429 after retries
PROVIDER_AUTH = "provider_auth"  # 401/403: missing or wrong key
PROVIDER_BAD_RESPONSE = "provider_bad_response"  # 4xx, malformed JSON, wrong count/dimension
PROVIDER_CONFIG = "provider_config"  # unknown provider/model, bad base_url or numbers
CONSENT_REQUIRED = "consent_required"  # a remote provider without a matching consent record


class ProviderError(RecallError):
    """``ProviderError(message, code)``; a :class:`RecallError`, so faces render it as usual.

    Messages never contain an API key or the text being embedded.
    """


# -- the interface -----------------------------------------------------------
@runtime_checkable
class EmbeddingProvider(Protocol):
    name: str  # "local" | "openai"
    model: str
    remote: bool

    @property
    def dimension(self) -> int: ...

    @property
    def fingerprint(self) -> str: ...

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...

    def close(self) -> None: ...


def make_fingerprint(provider: str, model: str, dimension: int, endpoint: str) -> str:
    """``provider|model|dimension|endpoint`` — the one place the format is defined."""
    return f"{provider}|{model}|{dimension}|{endpoint}"


# -- settings ----------------------------------------------------------------
PROVIDERS = ("local", "openai")
DEFAULT_LOCAL_MODEL = "use-multilingual"
DEFAULT_OPENAI_MODEL = "text-embedding-3-small"
DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"


@dataclass(frozen=True)
class EmbeddingSettings:
    """The ``plugins.project-history-recall.embedding`` block, validated, with defaults.

    ``enabled`` is only carried here: building a provider does not look at it,
    the caller decides (and checks consent for a remote provider).
    """

    provider: str = "local"
    model: str = DEFAULT_LOCAL_MODEL
    base_url: str = ""
    chunk_size: int = 512
    chunk_overlap: int = 64
    top_k: int = 20
    enabled: bool = False
    # Optional keys (not in the seed's block, accepted when present):
    batch_size: int = 64  # texts per remote request
    timeout: float = 30.0  # seconds per remote request
    max_attempts: int = 3  # remote tries per batch (retries on 429/5xx/connection errors)
    dimensions: int | None = None  # ask a remote model for shorter vectors (OpenAI v3 models)

    @property
    def endpoint(self) -> str:
        """The normalised endpoint: ``""`` for local, the API root for a remote provider."""
        if self.provider == "local":
            return ""
        return normalize_endpoint(self.base_url or DEFAULT_OPENAI_BASE_URL)


def _as_int(settings: Mapping[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = settings.get(key)
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise ProviderError(f"embedding.{key} must be an integer, got {value!r}", PROVIDER_CONFIG)
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ProviderError(f"embedding.{key} must be an integer, got {value!r}", PROVIDER_CONFIG) from None
    if not low <= number <= high:
        raise ProviderError(f"embedding.{key} must be in [{low}, {high}], got {number}", PROVIDER_CONFIG)
    return number


def _as_bool(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def parse_settings(settings: Mapping[str, Any] | EmbeddingSettings | Any | None) -> EmbeddingSettings:
    """Validate a config block (missing keys get defaults). Raises ``ProviderError(provider_config)``.

    Takes a mapping, an :class:`EmbeddingSettings`, or any object with ``as_dict()``
    (such as :class:`project_history_recall.settings.EmbeddingSettings`).
    """
    if isinstance(settings, EmbeddingSettings):
        return settings
    if settings is None:
        return _parse_block({})
    if isinstance(settings, Mapping):
        return _parse_block(dict(settings))
    as_dict = getattr(settings, "as_dict", None)
    if not callable(as_dict):
        raise ProviderError("embedding settings must be a mapping", PROVIDER_CONFIG)
    return _parse_block(dict(as_dict()))


def _parse_block(settings: dict[str, Any]) -> EmbeddingSettings:
    provider = str(settings.get("provider") or "local").strip().lower()
    if provider not in PROVIDERS:
        raise ProviderError(
            f"unknown embedding provider {provider!r} (expected one of: {', '.join(PROVIDERS)})",
            PROVIDER_CONFIG,
        )
    default_model = DEFAULT_LOCAL_MODEL if provider == "local" else DEFAULT_OPENAI_MODEL
    model = str(settings.get("model") or default_model).strip()
    base_url = str(settings.get("base_url") or "").strip()
    if provider != "local":
        normalize_endpoint(base_url or DEFAULT_OPENAI_BASE_URL)  # validates
    chunk_size = _as_int(settings, "chunk_size", 512, 16, 8192)
    chunk_overlap = _as_int(settings, "chunk_overlap", 64, 0, 4096)
    if chunk_overlap * 2 > chunk_size:
        raise ProviderError(
            f"embedding.chunk_overlap ({chunk_overlap}) must be at most half of chunk_size ({chunk_size})",
            PROVIDER_CONFIG,
        )
    timeout_raw = settings.get("timeout")
    try:
        timeout = 30.0 if timeout_raw in (None, "") else float(timeout_raw)
    except (TypeError, ValueError):
        message = f"embedding.timeout must be a number, got {timeout_raw!r}"
        raise ProviderError(message, PROVIDER_CONFIG) from None
    if not 0 < timeout <= 600:
        raise ProviderError("embedding.timeout must be between 0 and 600 seconds", PROVIDER_CONFIG)
    dimensions = settings.get("dimensions")
    return EmbeddingSettings(
        provider=provider,
        model=model,
        base_url=base_url,
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        top_k=_as_int(settings, "top_k", 20, 1, 1000),
        enabled=_as_bool(settings.get("enabled", False)),
        batch_size=_as_int(settings, "batch_size", 64, 1, 2048),
        timeout=timeout,
        max_attempts=_as_int(settings, "max_attempts", 3, 1, 10),
        dimensions=None if dimensions in (None, "") else _as_int(settings, "dimensions", 0, 1, 65536),
    )


def normalize_endpoint(url: str) -> str:
    """The comparable form of an OpenAI-compatible API root.

    Lower-case scheme and host, no trailing ``/`` and no trailing ``/embeddings``
    (so ``https://api.openai.com/v1/`` and ``https://API.openai.com/v1/embeddings``
    are the same endpoint). Credentials in the URL, a query or a fragment are
    refused: the key belongs in ``PROJECT_HISTORY_EMBEDDING_API_KEY``.
    """
    text = (url or "").strip()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise ProviderError("embedding.base_url is not a valid URL", PROVIDER_CONFIG) from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ProviderError(
            "embedding.base_url must be an http(s) URL such as https://api.openai.com/v1", PROVIDER_CONFIG
        )
    if parts.username or parts.password:
        raise ProviderError(
            "embedding.base_url must not contain credentials; "
            "put the key in PROJECT_HISTORY_EMBEDDING_API_KEY",
            PROVIDER_CONFIG,
        )
    if parts.query or parts.fragment:
        raise ProviderError("embedding.base_url must not have a query or fragment", PROVIDER_CONFIG)
    host = parts.hostname.lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host if port is None else f"{host}:{port}"
    path = parts.path.rstrip("/")
    if path.endswith("/embeddings"):
        path = path[: -len("/embeddings")].rstrip("/")
    return urlunsplit((parts.scheme.lower(), netloc, path, "", ""))


# -- vectors -----------------------------------------------------------------
def l2_normalize(matrix: np.ndarray) -> np.ndarray:
    """Float32, C-contiguous, rows scaled to unit length (an all-zero row stays zero)."""
    import numpy as np

    out = np.array(matrix, dtype=np.float32, copy=True, order="C")
    if out.ndim == 1:
        norm = float(np.linalg.norm(out))
        if norm > 0:
            out /= norm
        return out
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out
