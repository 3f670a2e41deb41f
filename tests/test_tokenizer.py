"""The shared tokenizer: examples from the issue, properties over arbitrary text."""

from __future__ import annotations

import sqlite3

from hypothesis import given
from hypothesis import strategies as st

from project_history_recall.tokenizer import (
    FTS_TOKENIZE,
    index_text,
    index_tokens,
    matched_units,
    normalize,
    plan_query,
)


def test_chinese_runs_become_overlapping_bigrams():
    assert index_tokens("广告点击") == ["广告", "告点", "点击"]
    assert index_tokens("改") == ["改"]


def test_cjk_ascii_boundary_splits():
    tokens = index_tokens("重跑gen-itgc后")
    assert tokens[:1] == ["重跑"]
    assert "gen-itgc" in tokens and "gen" in tokens and "itgc" in tokens


def test_identifiers_are_findable_whole_and_by_parts():
    assert index_tokens("settings-prod.yaml") == ["settings-prod.yaml", "settings", "prod", "yaml"]
    assert index_tokens("retry_policy") == ["retry_policy", "retry", "policy"]
    assert index_tokens("RetryPolicy") == ["retrypolicy", "retry", "policy"]
    assert index_tokens("HTTPServer") == ["httpserver", "http", "server"]


def test_words_are_lowercased_and_full_width_folded():
    assert index_tokens("Deploy ＦＡＳＴ") == ["deploy", "fast"]


def test_traditional_characters_fold_to_simplified():
    assert index_tokens("廣告") == index_tokens("广告")
    assert normalize("點擊") == "点击"


def test_query_plan_finds_identifier_parts_as_a_phrase():
    plan = plan_query("RetryPolicy")
    assert matched_units(plan, index_tokens("we changed retry_policy today"))
    assert not matched_units(plan, index_tokens("policy on retry"))


def test_stop_words_are_dropped_but_never_everything():
    assert [u.label for u in plan_query("what did we decide about the retry policy").units] == ["retry", "policy"]
    assert plan_query("what is this").units  # all stop words: keep them rather than match nothing


def test_single_cjk_character_query_falls_back_to_substring():
    plan = plan_query("改")
    assert plan.substrings == ("改",) and not plan.units


def test_a_lone_character_is_looked_for_in_a_short_or_english_question_not_in_a_chinese_sentence():
    assert plan_query("数据库 锁").substrings == ("锁",)
    english = "we moved the payments retry client config behind the 锁 feature flag in staging yesterday"
    assert plan_query(english).substrings == ("锁",)
    sentence = "嗯，我今天早上起床以后先去了公园散步，然后又去超市买了很多东西"
    assert plan_query(sentence).units and not plan_query(sentence).substrings


text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=200)


@given(text)
def test_tokens_are_fts_safe_and_lowercase(value):
    for token in index_tokens(value):
        assert token and " " not in token and '"' not in token
        assert token == token.lower() or not token.isascii()
        assert len(token) <= 64


@given(text)
def test_tokenizing_is_deterministic(value):
    assert index_tokens(value) == index_tokens(value)


@given(st.text(alphabet="广告点击缓存部署测试", min_size=2, max_size=12), st.text(alphabet="abc 的了", max_size=8))
def test_a_chinese_word_in_text_is_matched_by_its_query(word, noise):
    plan = plan_query(word)
    assert matched_units(plan, index_tokens(noise + word + noise))


@given(text)
def test_any_query_builds_a_quoted_fts_expression(value):
    plan = plan_query(value)
    expr = plan.match_any()
    # Every unit is quoted, so FTS5 operators in user text are only ever literal tokens.
    for unit in plan.units:
        assert unit.fts.startswith(("\"", "("))
    assert expr.count('"') % 2 == 0


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=120))
def test_ascii_text_tokenizes_as_it_does_beside_other_text(value):
    """ASCII text takes a faster path than other text: both must give the same tokens."""
    assert index_tokens(value + " é") == [*index_tokens(value), "é"]


def test_joining_characters_at_a_word_end_are_not_part_of_it():
    assert index_tokens("__init__ -x- ./run.sh: a-_-b .. _") == [
        "init", "x", "run.sh", "run", "sh", "a-_-b", "a", "b"]


def _fts_terms(texts: list[str]) -> list[list[str]]:
    """The terms FTS5 reads from each text, in order, with the index's own tokenizer declaration."""
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(tokens, tokenize=\"{FTS_TOKENIZE}\")")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    conn.executemany("INSERT INTO t(rowid, tokens) VALUES (?, ?)", enumerate(texts))
    terms: list[list[str]] = [[] for _ in texts]
    for term, doc in conn.execute("SELECT term, doc FROM v ORDER BY doc, offset"):
        terms[doc].append(term)
    conn.close()
    return terms


@given(st.text(alphabet=st.sampled_from(list("aZ9_-./: \n\t(,\"'`中文廣告Ａé\u3000，")), max_size=60))
def test_the_indexed_text_is_read_by_fts5_as_its_tokens_one_by_one(value):
    """``index_text`` joins cached runs of tokens, with more than one space in places: FTS5 must
    still read exactly the tokens, each as one term."""
    tokens = index_tokens(value)
    indexed, *alone = _fts_terms([index_text(value), *tokens])
    assert indexed == [term for terms in alone for term in terms]
    assert all(len(terms) == 1 for terms in alone)


def _finds_itself(text: str) -> bool:
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(tokens, tokenize=\"{FTS_TOKENIZE}\")")
    conn.execute("INSERT INTO t(rowid, tokens) VALUES (1, ?)", (index_text(text),))
    plan = plan_query(text)
    found = conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (plan.match_any(),)).fetchall() if plan.units else []
    conn.close()
    return bool(found) or not plan.units


def test_a_run_of_sound_marks_and_middle_dots_finds_itself():
    """The fuzzer's find: "ー゜・" planned the unit "゚・", which FTS5 reads as nothing (a removed
    diacritic and a separator), so the text's own query did not match it."""
    assert _finds_itself("ー゜・")
    assert [u.label for u in plan_query("ー゜・").units] == []
    assert plan_query("ー゜・").substrings == ("ー",)


@given(st.text(alphabet=st.sampled_from(list("ー゜゛・゠アイ中文ａ1 ")), min_size=1, max_size=12))
def test_every_query_unit_is_something_fts5_reads(value):
    terms = _fts_terms([" ".join(alt) for unit in plan_query(value).units for alt in unit.alternatives])
    assert all(terms), (value, plan_query(value).units)


def test_a_long_chinese_question_keeps_the_words_at_its_end() -> None:
    # a chat line of 48 characters is 47 bigrams (44 units without the stop bigrams); what it asks
    # about often comes last
    question = "我今天早上起床以后先去了公园散步然后又去超市买了很多东西回家以后做了午饭下午我们讨论了数据库迁移"
    labels = [u.label for u in plan_query(question).units]
    assert "迁移" in labels and "数据" in labels
