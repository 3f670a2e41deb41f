"""The OpenAI-compatible client against a fake server on 127.0.0.1: batching, retries,
timeouts, auth, error codes, redaction — and the factory's consent lock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from fakes.embedding_server import FakeEmbeddingServer, vector_for
from project_history_recall.embeddings import make_provider
from project_history_recall.embeddings import openai as openai_module
from project_history_recall.embeddings.base import (
    CONSENT_REQUIRED,
    PROVIDER_AUTH,
    PROVIDER_BAD_RESPONSE,
    PROVIDER_CONFIG,
    PROVIDER_RATE_LIMITED,
    PROVIDER_TIMEOUT,
    PROVIDER_UNAVAILABLE,
    EmbeddingProvider,
    ProviderError,
    normalize_endpoint,
)
from project_history_recall.embeddings.openai import API_KEY_ENV, DIMENSION_PROBE_TEXT, OpenAIProvider
from project_history_recall.services.consent import load_sent, record_consent
from project_history_recall.services.semantic import provider_for

KEY = "sk-test-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
DIM = 8


@pytest.fixture
def server() -> Iterator[FakeEmbeddingServer]:
    with FakeEmbeddingServer(dim=DIM, api_key=KEY) as srv:
        yield srv


def _client(server: FakeEmbeddingServer, **kwargs: object) -> OpenAIProvider:
    options: dict[str, object] = {
        "base_url": server.base_url,
        "api_key": KEY,
        "backoff": 0.0,
        "dimensions": None,
    }
    options.update(kwargs)
    return OpenAIProvider("fake-embed", **options)  # type: ignore[arg-type]


def _expected(texts: list[str]) -> np.ndarray:
    rows = np.array([vector_for(t, DIM) for t in texts], dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_embeds_in_order_normalised_and_batched(server: FakeEmbeddingServer) -> None:
    texts = [f"message number {i}" for i in range(10)]
    with _client(server, batch_size=4) as client:
        client._dimension = DIM  # known, so no probe request
        vectors = client.embed_passages(texts)
    assert vectors.shape == (10, DIM) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vectors, _expected(texts), atol=1e-5)
    batches = [r.inputs for r in server.embedding_requests]
    assert batches == [texts[0:4], texts[4:8], texts[8:10]]
    body = server.embedding_requests[0].body
    assert body["model"] == "fake-embed" and body["encoding_format"] == "float"
    assert server.embedding_requests[0].path == "/v1/embeddings"


def test_query_is_a_vector(server: FakeEmbeddingServer) -> None:
    with _client(server) as client:
        q = client.embed_query("how did we fix the retry policy?")
    assert q.shape == (DIM,)
    assert np.allclose(q, _expected(["how did we fix the retry policy?"])[0], atol=1e-5)


def test_dimension_is_probed_once_without_user_content(server: FakeEmbeddingServer) -> None:
    with _client(server) as client:
        assert client.dimension == DIM
        assert client.fingerprint == f"openai|fake-embed|{DIM}|{normalize_endpoint(server.base_url)}"
        client.embed_passages(["a", "b"])
        assert client.dimension == DIM
    assert [r.inputs for r in server.embedding_requests] == [[DIMENSION_PROBE_TEXT], ["a", "b"]]
    known = OpenAIProvider("text-embedding-3-small", base_url=server.base_url, api_key=KEY)
    assert known.dimension == 1536  # from the table: no request
    assert len(server.embedding_requests) == 2


def test_auth_header_and_key_from_env(server: FakeEmbeddingServer) -> None:
    with OpenAIProvider("fake-embed", base_url=server.base_url, env={API_KEY_ENV: KEY}) as client:
        client.embed_query("x")
    assert server.embedding_requests[-1].headers["authorization"] == f"Bearer {KEY}"
    with OpenAIProvider("fake-embed", base_url=server.base_url, env={}) as keyless:
        assert not keyless.has_key
        with pytest.raises(ProviderError) as info:
            keyless.embed_query("x")
    assert info.value.code == PROVIDER_AUTH
    assert "authorization" not in server.embedding_requests[-1].headers
    assert API_KEY_ENV in info.value.message


def test_wrong_key_is_provider_auth_without_retry_and_never_echoed(server: FakeEmbeddingServer) -> None:
    wrong = "sk-wrong-" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp"
    with _client(server, api_key=wrong, max_attempts=3) as client:
        with pytest.raises(ProviderError) as info:
            client.embed_query("x")
        assert wrong not in repr(client)
    assert info.value.code == PROVIDER_AUTH
    assert wrong not in str(info.value) and wrong[:12] not in str(info.value)
    assert "HTTP 401" in str(info.value)
    assert len(server.embedding_requests) == 1  # 401 is not retried


def test_retries_on_500_then_succeeds(server: FakeEmbeddingServer) -> None:
    server.fail_next(2, 500)
    with _client(server, max_attempts=3) as client:
        vector = client.embed_query("x")
    assert vector.shape == (DIM,)
    assert len(server.embedding_requests) == 3
    assert all(r.inputs == ["x"] for r in server.embedding_requests)


@pytest.mark.parametrize(
    ("status", "code"),
    [(500, PROVIDER_UNAVAILABLE), (503, PROVIDER_UNAVAILABLE), (429, PROVIDER_RATE_LIMITED)],
)
def test_retries_are_bounded(server: FakeEmbeddingServer, status: int, code: str) -> None:
    server.fail_next(10, status)
    with _client(server, max_attempts=3) as client, pytest.raises(ProviderError) as info:
        client.embed_query("x")
    assert info.value.code == code
    assert "3 attempts" in info.value.message
    assert len(server.embedding_requests) == 3


def test_retry_after_is_honoured_up_to_the_cap(server: FakeEmbeddingServer) -> None:
    server.fail_next(1, 429, headers={"Retry-After": "0"})
    with _client(server, backoff=30.0, max_backoff=30.0) as client:
        assert client.embed_query("x").shape == (DIM,)  # Retry-After: 0 beats the 30 s backoff
    assert len(server.embedding_requests) == 2


@pytest.mark.parametrize(("status", "message"), [(400, "rejected"), (404, "base_url"), (422, "rejected")])
def test_other_client_errors_fail_at_once(server: FakeEmbeddingServer, status: int, message: str) -> None:
    server.fail_next(1, status)
    with _client(server) as client, pytest.raises(ProviderError) as info:
        client.embed_query("x")
    assert info.value.code == PROVIDER_BAD_RESPONSE
    assert message in info.value.message
    assert len(server.embedding_requests) == 1


def test_timeout_then_success_and_timeout_exhausted(server: FakeEmbeddingServer) -> None:
    server.hang_next(1, seconds=10)
    with _client(server, timeout=0.3, max_attempts=2) as client:
        assert client.embed_query("x").shape == (DIM,)
        server.hang_next(2, seconds=10)
        with pytest.raises(ProviderError) as info:
            client.embed_query("y")
    assert info.value.code == PROVIDER_TIMEOUT
    assert len(server.embedding_requests) == 4


def test_dropped_connection_is_retried(server: FakeEmbeddingServer) -> None:
    server.enqueue({"drop": True})
    with _client(server) as client:
        assert client.embed_query("x").shape == (DIM,)
    assert len(server.embedding_requests) == 2


def test_unreachable_server_is_provider_unavailable() -> None:
    with FakeEmbeddingServer() as srv:
        url = srv.base_url  # a port that was just open and is now closed
    client = OpenAIProvider("m", base_url=url, max_attempts=2, backoff=0.0, dimensions=4)
    with client, pytest.raises(ProviderError) as info:
        client.embed_query("x")
    assert info.value.code == PROVIDER_UNAVAILABLE


@pytest.mark.parametrize(
    "action",
    [
        {"raw": "<html>oops</html>"},
        {"json": {"object": "list"}},
        {"json": {"data": [{"index": 0}]}},
        {"json": {"data": [{"index": 5, "embedding": [1.0, 2.0]}]}},
        {"json": {"data": [{"index": 0, "embedding": ["a", "b"]}]}},
        {"json": {"data": [{"index": 0, "embedding": []}]}},
        {"count_delta": -1},
        {"count_delta": 1},
        {"dim": 3},
    ],
)
def test_unusable_answers_are_bad_response(server: FakeEmbeddingServer, action: dict[str, object]) -> None:
    server.enqueue(action)
    with _client(server, dimensions=DIM) as client, pytest.raises(ProviderError) as info:
        client.embed_query("x")
    assert info.value.code == PROVIDER_BAD_RESPONSE
    assert len(server.embedding_requests) == 1


def test_out_of_order_and_base64_answers_are_understood(server: FakeEmbeddingServer) -> None:
    texts = ["alpha", "beta", "gamma"]
    with _client(server, dimensions=DIM) as client:
        server.enqueue({"shuffle": True})
        shuffled = client.embed_passages(texts)
        server.enqueue({"base64": True})
        encoded = client.embed_passages(texts)
    assert np.allclose(shuffled, _expected(texts), atol=1e-5)
    assert np.allclose(encoded, _expected(texts), atol=1e-5)
    assert server.embedding_requests[0].body["dimensions"] == DIM


def test_texts_are_redacted_and_capped_before_sending(server: FakeEmbeddingServer) -> None:
    secret = "sk-proj-" + "Q1w2E3r4T5y6U7i8O9p0" * 3
    with _client(server, dimensions=DIM, max_chars=200) as client:
        client.embed_passages([f"use {secret} for the api", "x" * 5000, ""])
    sent = server.embedding_requests[0].inputs
    assert secret not in server.embedding_requests[0].raw.decode()
    assert sent[0] == "use [REDACTED:openai_key] for the api"
    assert len(sent[1]) == 200
    assert sent[2] == " "  # an empty text is not sent as "" (the API rejects it)


def test_on_sent_counts_every_attempt(server: FakeEmbeddingServer) -> None:
    seen: list[tuple[int, int]] = []
    server.fail_next(1, 500)
    with _client(server, dimensions=DIM, on_sent=lambda n, c: seen.append((n, c))) as client:
        client.embed_passages(["abc", "de"])
    assert seen == [(2, 5), (2, 5)]


def test_empty_input_sends_nothing(server: FakeEmbeddingServer) -> None:
    with _client(server, dimensions=DIM) as client:
        assert client.embed_passages([]).shape == (0, DIM)
    assert server.embedding_requests == []


def test_bad_configuration() -> None:
    for url in ("ftp://x/v1", "not a url", "https://user:pw@api.example.com/v1", "https://x/v1?key=1"):
        with pytest.raises(ProviderError) as info:
            OpenAIProvider("m", base_url=url)
        assert info.value.code == PROVIDER_CONFIG
        assert "pw" not in info.value.message
    with pytest.raises(ProviderError):
        OpenAIProvider("", base_url="https://api.openai.com/v1")


def test_endpoint_normalisation() -> None:
    assert normalize_endpoint("https://API.OpenAI.com/v1/") == "https://api.openai.com/v1"
    assert normalize_endpoint("https://api.openai.com/v1/embeddings") == "https://api.openai.com/v1"
    assert normalize_endpoint("http://127.0.0.1:8080") == "http://127.0.0.1:8080"


# -- the consent policy in front of the factory-----------------------------------------------------------------------


def test_policy_refuses_a_remote_provider_without_consent(
    tmp_path: Path, server: FakeEmbeddingServer
) -> None:
    settings = {"provider": "openai", "model": "fake-embed", "base_url": server.base_url, "enabled": True}
    with pytest.raises(ProviderError) as info:
        provider_for(settings, tmp_path, env={API_KEY_ENV: KEY})
    assert info.value.code == CONSENT_REQUIRED
    # consent for another model or endpoint does not count
    record_consent(
        tmp_path,
        profile="default",
        projects=["*"],
        provider="openai",
        endpoint=server.base_url,
        model="another-model",
    )
    with pytest.raises(ProviderError):
        provider_for(settings, tmp_path, env={API_KEY_ENV: KEY})
    assert server.embedding_requests == []


def test_policy_with_consent_counts_usage(tmp_path: Path, server: FakeEmbeddingServer) -> None:
    settings = {
        "provider": "openai",
        "model": "fake-embed",
        "base_url": server.base_url + "/",
        "dimensions": DIM,
    }
    record_consent(
        tmp_path,
        profile="default",
        projects=["p"],
        provider="openai",
        endpoint=server.base_url,
        model="fake-embed",
    )
    provider = provider_for(settings, tmp_path, env={API_KEY_ENV: KEY})
    try:
        assert isinstance(provider, EmbeddingProvider) and provider.remote
        provider.embed_passages(["one", "two", "three"])
    finally:
        provider.close()
    usage = load_sent(tmp_path)
    assert usage.total.as_dict() == {"requests": 1, "texts": 3, "chars": 11}


def test_factory_settings_validation() -> None:
    for bad in (
        {"provider": "voyage"},
        {"chunk_size": "big"},
        {"chunk_size": 100, "chunk_overlap": 60},
        {"provider": "openai", "base_url": "file:///etc"},
        {"top_k": 0},
    ):
        with pytest.raises(ProviderError) as info:
            make_provider(bad)
        assert info.value.code == PROVIDER_CONFIG


def test_backoff_grows_exponentially_and_is_capped(
    server: FakeEmbeddingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    delays: list[float] = []
    monkeypatch.setattr(openai_module, "_sleep", delays.append)
    server.fail_next(4, 502)
    with _client(server, backoff=0.5, max_backoff=1.5, max_attempts=5, dimensions=DIM) as client:
        client.embed_query("x")
    assert delays == [0.5, 1.0, 1.5, 1.5]
