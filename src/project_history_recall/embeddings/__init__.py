"""Semantic building blocks: embedding providers behind one small interface.

Importing this package is cheap (no numpy, no httpx, no model): providers are
imported by :func:`make_provider` and load their models on first use.
"""

from __future__ import annotations

from .base import (
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
    make_provider,
    normalize_endpoint,
    parse_settings,
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
