"""``units_in_text`` (search's coverage check) answers exactly what tokenizing the whole text does."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from project_history_recall.tokenizer import index_tokens, matched_units, plan_query, units_in_text

ASCII_WORDS = ["retry", "policy", "RetryPolicy", "retry_policy", "__init__", "a.b", "x", "err", "error", "Error:",
               "settings-prod.yaml", "HTTPServer", "v2", "v22", "404", "_", "::", "--", "Policy.retry", "errors",
               "ABc", "retrying", "it's", "S", "Q(x)", "t", "don't", "a1b", "7", "77"]
OTHER_WORDS = ["广告", "点击", "ß", "İ", "Σ", "→", "✓ ok", "—", "’s", "…", "\u00a0", "Ｒｅｔｒｙ", "ﬁle", "・", "゛",
               "naïve_policy", "²", "①", "\u200b", "K", "ｅｒｒｏｒ：", "⼀"]
SEPARATORS = [" ", "\n", "\t", "  ", "(", ", ", "=", "\r\n", "/", ".", ""]


def _texts(words: list[str], separators: list[str]) -> st.SearchStrategy[str]:
    return st.lists(st.tuples(st.sampled_from(words), st.sampled_from(separators)), max_size=40).map(
        lambda pairs: "".join(w + s for w, s in pairs))


def _queries(words: list[str]) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(words), min_size=1, max_size=4).map(" ".join)


@settings(max_examples=500, deadline=None)
@given(_texts(ASCII_WORDS, SEPARATORS), _queries(ASCII_WORDS))
def test_same_units_as_whole_tokenization_in_ascii(text: str, query: str) -> None:
    plan = plan_query(query)
    assert units_in_text(plan.units, text) == matched_units(plan, index_tokens(text))


@settings(max_examples=200, deadline=None)
@given(_texts(ASCII_WORDS + OTHER_WORDS, [*SEPARATORS, "\x0b", "\x1f"]), _queries(ASCII_WORDS + OTHER_WORDS))
def test_same_units_as_whole_tokenization_in_any_text(text: str, query: str) -> None:
    plan = plan_query(query)
    assert units_in_text(plan.units, text) == matched_units(plan, index_tokens(text))


def test_a_unit_far_into_a_long_output_is_found() -> None:
    text = "noise line\n" * 3000 + "raise RetryPolicyError(x)\n" + "more output\n" * 3000
    plan = plan_query("RetryPolicyError")
    assert [u.label for u in units_in_text(plan.units, text)] == ["retrypolicyerror"]
    assert units_in_text(plan_query("retry policy error").units, text) == matched_units(
        plan_query("retry policy error"), index_tokens(text))
    assert not units_in_text(plan_query("RetryPolicyErrors").units, text)
