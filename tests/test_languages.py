"""Chinese words, identifiers, mixed text and natural-language questions are found."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from builders import History, git_init, session_ids, tool_call


@pytest.fixture
def repo_history(tmp_path):
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "app")
    h.session("zh-ad", repo, "我今天在改广告SDK，重跑gen-itgc后缓存失效了", "缓存失效是因为 TTL 太短",
              title="广告SDK缓存")
    h.session("zh-deploy", repo, "部署到测试环境的时候端口冲突了", "把服务端口改成 8081 就好了")
    h.session("zh-trad", repo, "開屏廣告的點擊統計不準", "點擊事件被重複上報")
    h.session("en-retry", repo, "The payment client fails when the gateway is slow",
              "We chose exponential backoff with jitter for the retry_policy: five attempts max.")
    h.session("en-config", repo, "Where is the prod config?",
              "It is in deploy/settings-prod.yaml next to the Dockerfile.")
    h.session("en-cmd", repo, "run the flaky test twenty times",
              ("assistant", "", {"tool_calls": [tool_call("c1", "terminal", {
                  "command": "pytest tests/test_auth.py -x --count 20"})]}),
              ("tool", "3 failed, 17 passed", {"tool_call_id": "c1", "tool_name": "terminal"}))
    h.session("en-noise", repo, "retry later, the policy document is not ready",
              "ok, I will check the payment page design tomorrow")
    h.session("ask", repo)
    yield h
    h.close()


def top(h, query, **kw):
    return session_ids(h.recall().search(query, session_id="ask", mode="keyword", limit=5, **kw))


@pytest.mark.parametrize(("query", "gold"), [
    ("广告", "zh-ad"), ("缓存", "zh-ad"), ("部署", "zh-deploy"), ("端口", "zh-deploy"),
    ("点击", "zh-trad"),  # simplified query, traditional history
    ("點擊統計", "zh-trad"),  # traditional query
])
def test_two_character_chinese_words(repo_history, query, gold):
    assert top(repo_history, query)[0] == gold


@pytest.mark.parametrize(("query", "gold"), [
    ("retry_policy", "en-retry"), ("RetryPolicy", "en-retry"), ("settings-prod.yaml", "en-config"),
    ("settings-prod", "en-config"), ("tests/test_auth.py", "en-cmd"), ("pytest --count", "en-cmd"),
])
def test_identifiers_paths_and_commands(repo_history, query, gold):
    assert top(repo_history, query)[0] == gold


@pytest.mark.parametrize("query", ["重跑", "gen-itgc", "广告SDK", "重跑gen-itgc"])
def test_mixed_chinese_and_ascii(repo_history, query):
    assert top(repo_history, query)[0] == "zh-ad"


def test_natural_language_question_prefers_the_session_matching_most_words(repo_history):
    assert top(repo_history, "what retry policy did we choose for the payment client")[0] == "en-retry"
    assert top(repo_history, "我们上次广告SDK的缓存问题是怎么解决的")[0] == "zh-ad"


def test_snippets_mark_the_matched_terms(repo_history):
    result = repo_history.recall().search("缓存", session_id="ask", mode="keyword")["results"][0]
    assert "**缓存**" in result["snippet"] and result["link"] == "@session:zh-ad"


def test_a_snippet_does_not_depend_on_the_hash_seed(repo_history):
    """Overlapping bigrams (数据 / 据库) of equal length: the one marked must not be set order."""
    script = ("import sys; from project_history_recall.recall import Recall; "
              "print(Recall(sys.argv[1]).search('数据库', session_id='ask', mode='keyword')['results'][0]['snippet'])")
    repo_history.session("zh-db", repo_history.root.parent / "app", "我们查了数据库的日志", "日志在 /var/log 里")
    snippets = {subprocess.run([sys.executable, "-c", script, str(repo_history.root)], check=True,
                               capture_output=True, text=True,
                               env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("0", "3", "4")}
    assert len(snippets) == 1, snippets


def test_fts_operators_and_quotes_are_literal(repo_history):
    for query in ['"unbalanced', "NOT AND OR", "retry* NEAR(x)", "a:b", "col:retry", "(((", "%_\\"]:
        response = repo_history.recall().search(query, session_id="ask", mode="keyword")
        assert response["success"], query


def test_tool_call_arguments_are_searchable_results_are_not(repo_history):
    assert top(repo_history, "test_auth count 20")[0] == "en-cmd"
    assert top(repo_history, "17 passed") == []
