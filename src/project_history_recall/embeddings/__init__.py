"""Semantic building blocks: embedding providers behind one small interface.

Importing this package is cheap (no numpy, no httpx, no model): providers are
imported by :func:`make_provider` and load their models on first use.

Providers know nothing of consent: whether history may be sent to a remote one is a
policy of :mod:`project_history_recall.services.semantic`, which builds providers only
after the consent record says yes, and counts what they send through ``on_sent``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from project_history_recall.embeddings.base import (
    CONSENT_REQUIRED,
    DEFAULT_LOCAL_MODEL,
    DEFAULT_OPENAI_BASE_URL,
    DEFAULT_OPENAI_MODEL,
    PROVIDER_AUTH,
    PROVIDER_BAD_RESPONSE,
    PROVIDER_CONFIG,
    PROVIDER_RATE_LIMITED,
    PROVIDER_TIMEOUT,
    PROVIDER_UNAVAILABLE,
    PROVIDERS,
    EmbeddingProvider,
    EmbeddingSettings,
    ProviderError,
    l2_normalize,
    make_fingerprint,
    normalize_endpoint,
    parse_settings,
)


def make_provider(
    settings: Mapping[str, Any] | EmbeddingSettings | Any | None,
    *,
    api_key: str | None = None,
    env: Mapping[str, str] | None = None,
    on_sent: Callable[[int, int], None] | None = None,
) -> EmbeddingProvider:
    """Build the provider a config block asks for.

    * ``provider: local`` (default) → :class:`~.local.LocalProvider`, offline.
    * ``provider: openai`` → :class:`~.openai.OpenAIProvider` (any OpenAI-compatible
      endpoint); ``on_sent(texts, chars)`` is called after every request that left.

    ``api_key`` overrides ``env["PROJECT_HISTORY_EMBEDDING_API_KEY"]`` (``env``
    defaults to ``os.environ``; the caller has already loaded ``$HERMES_HOME/.env``).
    """
    parsed = parse_settings(settings)
    if parsed.provider == "local":
        from project_history_recall.embeddings.local import LocalProvider

        return LocalProvider(parsed.model)
    from project_history_recall.embeddings.openai import OpenAIProvider

    return OpenAIProvider(
        parsed.model,
        base_url=parsed.base_url or DEFAULT_OPENAI_BASE_URL,
        api_key=api_key,
        env=env,
        batch_size=parsed.batch_size,
        timeout=parsed.timeout,
        max_attempts=parsed.max_attempts,
        dimensions=parsed.dimensions,
        on_sent=on_sent,
    )


__all__ = [
    "CONSENT_REQUIRED",
    "DEFAULT_LOCAL_MODEL",
    "DEFAULT_OPENAI_BASE_URL",
    "DEFAULT_OPENAI_MODEL",
    "PROVIDERS",
    "PROVIDER_AUTH",
    "PROVIDER_BAD_RESPONSE",
    "PROVIDER_CONFIG",
    "PROVIDER_RATE_LIMITED",
    "PROVIDER_TIMEOUT",
    "PROVIDER_UNAVAILABLE",
    "EmbeddingProvider",
    "EmbeddingSettings",
    "ProviderError",
    "l2_normalize",
    "make_fingerprint",
    "make_provider",
    "normalize_endpoint",
    "parse_settings",
]
