"""A client for OpenAI-compatible ``POST {base_url}/embeddings`` services.

**Consent first.** This class sends text off the machine and knows nothing of
consent: :mod:`project_history_recall.services.semantic` builds it only after the
user's consent record covers this provider, endpoint, model and project.

* ``base_url`` is the API root, as in the OpenAI SDK (``https://api.openai.com/v1``,
  ``http://127.0.0.1:11434/v1``); a trailing ``/embeddings`` is tolerated.
* The key comes from the ``api_key`` argument or ``PROJECT_HISTORY_EMBEDDING_API_KEY``
  (the caller has loaded ``$HERMES_HOME/.env``); without one no ``Authorization``
  header is sent (keyless self-hosted servers). The key never appears in an error
  message or ``repr``.
* Every text is passed through :func:`project_history_recall.redaction.redact`
  (secrets replaced, length capped) before it is sent; empty texts become ``" "``
  (the API rejects ``""``).
* Texts go in batches of ``batch_size`` per request; each request is tried up to
  ``max_attempts`` times with exponential backoff (``backoff * 2**n``, at most
  ``max_backoff``; a ``Retry-After`` header is honoured up to the same cap) on
  429, 408, 5xx, timeouts and connection errors. 401/403 and other 4xx fail at once.
* ``on_sent(texts, chars)`` is called before every request attempt (an upper
  bound of what left the machine) — used for the usage counters, never content.
* Vectors are L2-normalised on our side (compatible servers do not all do it).
"""

from __future__ import annotations

import base64
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from project_history_recall.embeddings.base import (
    DEFAULT_OPENAI_BASE_URL,
    DEFAULT_OPENAI_MODEL,
    PROVIDER_AUTH,
    PROVIDER_BAD_RESPONSE,
    PROVIDER_CONFIG,
    PROVIDER_RATE_LIMITED,
    PROVIDER_TIMEOUT,
    PROVIDER_UNAVAILABLE,
    ProviderError,
    l2_normalize,
    make_fingerprint,
    normalize_endpoint,
)

if TYPE_CHECKING:
    import httpx
    import numpy as np

API_KEY_ENV = "PROJECT_HISTORY_EMBEDDING_API_KEY"
_sleep = time.sleep  # the backoff's clock, replaceable in tests without touching other threads
KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
#: Sent only when the dimension of an unknown model must be discovered (no user content).
DIMENSION_PROBE_TEXT = "dimension probe"
_RETRYABLE_STATUS = frozenset({408, 425, 429}) | frozenset(range(500, 600))


class OpenAIProvider:
    """An :class:`~.base.EmbeddingProvider` over an OpenAI-compatible HTTP API."""

    name = "openai"
    remote = True

    def __init__(
        self,
        model: str = DEFAULT_OPENAI_MODEL,
        *,
        base_url: str = DEFAULT_OPENAI_BASE_URL,
        api_key: str | None = None,
        env: Mapping[str, str] | None = None,
        batch_size: int = 64,
        timeout: float = 30.0,
        connect_timeout: float | None = None,
        max_attempts: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        dimensions: int | None = None,
        redact_texts: bool = True,
        max_chars: int = 8000,
        on_sent: Callable[[int, int], None] | None = None,
    ) -> None:
        import httpx

        if not model or not str(model).strip():
            raise ProviderError("embedding.model must be set for the openai provider", PROVIDER_CONFIG)
        if batch_size < 1 or max_attempts < 1 or timeout <= 0:
            raise ProviderError("batch_size, max_attempts and timeout must be positive", PROVIDER_CONFIG)
        self.model = str(model).strip()
        self.endpoint = normalize_endpoint(base_url)
        self.url = self.endpoint + "/embeddings"
        key = api_key if api_key is not None else (os.environ if env is None else env).get(API_KEY_ENV)
        self._api_key = (key or "").strip() or None
        self.batch_size = int(batch_size)
        self.max_attempts = int(max_attempts)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.requested_dimensions = dimensions
        self.redact_texts = redact_texts
        self.max_chars = max_chars
        self.on_sent = on_sent
        self._dimension: int | None = dimensions or KNOWN_DIMENSIONS.get(self.model)
        self._dimension_lock = threading.Lock()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout, connect=min(timeout, connect_timeout or 10.0)),
            headers=headers,
            follow_redirects=False,
        )

    # -- identity --------------------------------------------------------------
    @property
    def has_key(self) -> bool:
        return self._api_key is not None

    @property
    def dimension_known(self) -> bool:
        """False until the width is known; reading :attr:`dimension` then costs one request."""
        return self._dimension is not None

    @property
    def dimension(self) -> int:
        """Known for OpenAI's models or when ``dimensions`` is set; otherwise discovered
        with one request embedding :data:`DIMENSION_PROBE_TEXT`."""
        if self._dimension is None:
            with self._dimension_lock:
                if self._dimension is None:
                    self._dimension = int(self._request([DIMENSION_PROBE_TEXT]).shape[1])
        return self._dimension

    @property
    def fingerprint(self) -> str:
        return make_fingerprint(self.name, self.model, self.dimension, self.endpoint)

    # -- embedding -------------------------------------------------------------
    def _prepare(self, texts: Sequence[str]) -> list[str]:
        from project_history_recall.redaction import redact

        out = []
        for text in texts:
            text = str(text)
            text = redact(text, self.max_chars) if self.redact_texts else text[: self.max_chars]
            out.append(text if text.strip() else " ")
        return out

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        if isinstance(texts, str):
            raise TypeError("embed_passages takes a list of texts")
        items = self._prepare(texts)
        if not items:
            return np.empty((0, self._dimension or 0), dtype=np.float32)
        parts = [self._request(items[i : i + self.batch_size]) for i in range(0, len(items), self.batch_size)]
        return np.vstack(parts)

    def embed_query(self, text: str) -> np.ndarray:
        return self._request(self._prepare([text]))[0]

    # -- HTTP ------------------------------------------------------------------
    def _request(self, batch: list[str]) -> np.ndarray:
        import httpx

        payload: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
        if self.requested_dimensions:
            payload["dimensions"] = self.requested_dimensions
        chars = sum(len(t) for t in batch)
        last: ProviderError | None = None
        for attempt in range(1, self.max_attempts + 1):
            retry_after: float | None = None
            if self.on_sent is not None:
                self.on_sent(len(batch), chars)
            try:
                response = self._client.post(self.url, json=payload)
            except httpx.TimeoutException:
                message = f"embedding service at {self.endpoint} did not answer in time"
                last = ProviderError(message, PROVIDER_TIMEOUT)
            except httpx.TransportError as error:
                last = ProviderError(
                    f"cannot reach embedding service at {self.endpoint}: {type(error).__name__}",
                    PROVIDER_UNAVAILABLE,
                )
            else:
                if response.status_code == 200:
                    return self._parse(response, len(batch))
                last = self._status_error(response)
                if response.status_code not in _RETRYABLE_STATUS:
                    raise last
                retry_after = _retry_after(response.headers.get("retry-after"))
            if attempt < self.max_attempts:
                delay = self.backoff * (2 ** (attempt - 1)) if retry_after is None else retry_after
                _sleep(max(0.0, min(delay, self.max_backoff)))
        assert last is not None
        if self.max_attempts > 1:
            last = ProviderError(f"{last.message} (after {self.max_attempts} attempts)", last.code)
        raise last

    def _status_error(self, response: httpx.Response) -> ProviderError:
        status = response.status_code
        detail = self._server_message(response)
        where = f"embedding service at {self.endpoint}"
        if status in (401, 403):
            hint = "" if self._api_key else f" (no key: set {API_KEY_ENV})"
            return ProviderError(f"{where} refused the key: HTTP {status}{hint}{detail}", PROVIDER_AUTH)
        if status == 429:
            return ProviderError(f"{where} is rate limiting: HTTP 429{detail}", PROVIDER_RATE_LIMITED)
        if status == 408:
            return ProviderError(f"{where} timed out: HTTP 408{detail}", PROVIDER_TIMEOUT)
        if status >= 500:
            return ProviderError(f"{where} failed: HTTP {status}{detail}", PROVIDER_UNAVAILABLE)
        if status == 404:
            return ProviderError(
                f"{where} has no /embeddings (HTTP 404): check embedding.base_url and model{detail}",
                PROVIDER_BAD_RESPONSE,
            )
        return ProviderError(f"{where} rejected the request: HTTP {status}{detail}", PROVIDER_BAD_RESPONSE)

    def _server_message(self, response: httpx.Response) -> str:
        from project_history_recall.redaction import redact

        try:
            body = response.json()
            message = body.get("error", body) if isinstance(body, dict) else body
            if isinstance(message, dict):
                message = message.get("message") or message.get("detail") or ""
            text = str(message)
        except Exception:
            text = response.text
        text = " ".join(text.split())
        if not text:
            return ""
        if self._api_key:
            text = text.replace(self._api_key, "***")
        return ": " + redact(text, 300)

    def _parse(self, response: httpx.Response, expected: int) -> np.ndarray:
        import numpy as np

        def bad(why: str) -> ProviderError:
            return ProviderError(
                f"embedding service at {self.endpoint} sent an unusable answer: {why}", PROVIDER_BAD_RESPONSE
            )

        try:
            body = response.json()
        except ValueError:
            raise bad("not JSON") from None
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise bad("no 'data' list")
        if len(data) != expected:
            raise bad(f"{len(data)} embeddings for {expected} inputs")
        rows: list[Any] = [None] * expected
        for position, item in enumerate(data):
            if not isinstance(item, dict) or "embedding" not in item:
                raise bad("an item without 'embedding'")
            index = item.get("index", position)
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < expected:
                raise bad(f"bad index {index!r}")
            if rows[index] is not None:
                raise bad(f"duplicate index {index}")
            vector = item["embedding"]
            try:
                if isinstance(vector, str):  # encoding_format=base64 answered anyway
                    row = np.frombuffer(base64.b64decode(vector), dtype="<f4").astype(np.float32)
                else:
                    row = np.asarray(vector, dtype=np.float32)
            except (ValueError, TypeError):
                raise bad("an embedding that is not a list of numbers") from None
            if row.ndim != 1 or row.size == 0 or not np.all(np.isfinite(row)):
                raise bad("an empty or non-finite embedding")
            rows[index] = row
        sizes = {row.size for row in rows}
        if len(sizes) != 1:
            raise bad("embeddings of different lengths")
        size = sizes.pop()
        if self._dimension is not None and size != self._dimension:
            raise bad(f"{size}-dim embeddings, expected {self._dimension}")
        return l2_normalize(np.vstack(rows))

    # -- lifecycle ---------------------------------------------------------------
    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAIProvider:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        key = "set" if self._api_key else "none"
        return f"OpenAIProvider(model={self.model!r}, endpoint={self.endpoint!r}, key={key})"


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # an HTTP date: use our own backoff
    return seconds if seconds >= 0 else None
