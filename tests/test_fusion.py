"""Keyword-gated fusion is deterministic, order-sensitive in the right way, and names its sources."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from project_history_recall.search.fusion import (
    BOTH,
    KEYWORD,
    SEMANTIC,
    Fused,
    gated,
    keyword_gate,
    keyword_margin,
    normalize_by_max,
    normalize_minmax,
    ranking,
)

keys = st.integers(0, 40)
rankings = st.lists(st.lists(keys, max_size=25, unique=True), min_size=1, max_size=4)
score_maps = st.dictionaries(keys, st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False), max_size=25)


def test_normalize_minmax() -> None:
    assert normalize_minmax({"a": 10.0, "b": 5.0, "c": 0.0, "d": float("nan")}) == {"a": 1.0, "b": 0.5, "c": 0.0}
    assert normalize_minmax({"a": 3.0, "b": 3.0}) == {"a": 1.0, "b": 1.0}
    assert normalize_minmax({}) == {}


@settings(max_examples=200)
@given(scores=score_maps)
def test_normalize_minmax_keeps_the_order(scores: dict[int, float]) -> None:
    out = normalize_minmax(scores)
    assert set(out) == set(scores)
    assert all(0.0 <= v <= 1.0 for v in out.values())
    for a, b in itertools.permutations(scores, 2):
        if scores[a] > scores[b]:
            assert out[a] >= out[b]


def test_ranking_breaks_ties_by_key() -> None:
    assert ranking({"b": 1.0, "a": 1.0, "c": 2.0, "d": float("nan")}) == ["c", "a", "b"]


def test_fused_is_a_named_tuple() -> None:
    f = Fused("k", 0.5, KEYWORD, (1, None))
    assert f[0] == "k" and f[1] == 0.5 and f.score_source == KEYWORD


# -- gated: the default for mode=hybrid ----------------------------------------------------

positive_maps = st.dictionaries(keys, st.floats(0.01, 1e4, allow_nan=False, allow_infinity=False), max_size=25)


def test_normalize_by_max_and_margin() -> None:
    assert normalize_by_max({"a": 4.0, "b": 1.0, "c": float("nan")}) == {"a": 1.0, "b": 0.25}
    assert normalize_by_max({"a": -1.0, "b": 0.0}) == {"a": 1.0, "b": 1.0}
    assert normalize_by_max({}) == {}
    assert keyword_margin({"a": 10.0, "b": 9.0}) == pytest.approx(0.1)
    assert keyword_margin({"a": 10.0}) == 1.0
    assert keyword_margin({}) == 0.0
    assert keyword_margin({"a": 0.0, "b": 0.0}) == 0.0


def test_keyword_gate() -> None:
    assert keyword_gate({"a": 10.0, "b": 9.0}, 0.0, margin=0.02, min_coverage=0.67).held
    near = {"a": 10.0, "b": 9.9}
    assert not keyword_gate(near, 0.5, margin=0.02, min_coverage=0.67).held
    assert keyword_gate(near, 0.67, margin=0.02, min_coverage=0.67).held  # full evidence holds it
    assert not keyword_gate({}, 1.0, margin=0.02, min_coverage=0.67).held  # nothing to hold


def test_gated_formula_when_the_gate_is_open() -> None:
    kw = {"a": 10.0, "b": 9.9, "c": 5.0}  # a leads b by 1 %: gate open at coverage 0.5
    sem = {"c": 0.9, "d": 0.6, "b": 0.3}
    out = gated(kw, sem, {"a": 0.5}, dense_weight=0.5)
    expected = {"a": 0.5, "b": 0.5 * 0.99 + 0.5 / 3, "c": 0.25 + 0.5, "d": 0.5 * 2 / 3}
    assert [f.key for f in out] == sorted(expected, key=lambda k: -expected[k])
    for f in out:
        assert f.score == pytest.approx(expected[f.key])
    assert {f.key: f.score_source for f in out} == {"a": KEYWORD, "b": BOTH, "c": BOTH, "d": SEMANTIC}
    assert {f.key: f.ranks for f in out}["c"] == (3, 1)


def test_hybrid_cannot_reorder_a_confident_keyword_answer() -> None:
    # keyword is sure (a leads b by 50 %); semantic strongly prefers other sessions
    kw = {"a": 10.0, "b": 5.0, "c": 4.9}
    sem = {"c": 1.0, "d": 0.99, "b": 0.1}
    out = gated(kw, sem, {}, dense_weight=1.0)  # even at full dense weight
    assert [f.key for f in out][:2] == ["a", "b"]
    # a narrow lead, but the top session covers the whole query: held too
    close = {"a": 10.0, "b": 9.95}
    assert [f.key for f in gated(close, {"b": 1.0, "z": 1.0}, {"a": 1.0}, dense_weight=1.0)][:2] == ["a", "b"]
    # the same narrow lead without the coverage: semantic may reorder
    assert gated(close, {"b": 1.0}, {"a": 0.2}, dense_weight=0.5)[0].key == "b"


def test_weak_keyword_evidence_lets_semantic_lead() -> None:
    # keyword's best leads by 50 %, a lead the gate holds, but it matched 10 % of the query's units
    kw = {"a": 10.0, "b": 5.0}
    sem = {"b": 1.0, "c": 0.9}
    weak = gated(kw, sem, {"a": 0.1}, weak_coverage=0.2, weak_dense_weight=0.75)
    assert [f.key for f in weak] == ["b", "c", "a"]
    expected = {"a": 0.25, "b": 0.25 * 0.5 + 0.75, "c": 0.75 * 0.9}
    for f in weak:
        assert f.score == pytest.approx(expected[f.key])
    # the same lists with the best covering 20 % of the query: keyword holds its head
    assert [f.key for f in gated(kw, sem, {"a": 0.2}, weak_coverage=0.2, weak_dense_weight=0.75)][:2] == ["a", "b"]
    # no weak regime unless asked for (the default), and none when keyword found nothing
    assert gated(kw, sem, {"a": 0.1})[0].key == "a"
    assert [f.key for f in gated({}, sem, {}, weak_coverage=0.2)] == ["b", "c"]


@settings(max_examples=300)
@given(kw=positive_maps, sem=score_maps, w=st.floats(0, 1), cov=st.floats(0, 1), pin=st.integers(0, 3))
def test_gated_properties(kw: dict[int, float], sem: dict[int, float], w: float, cov: float, pin: int) -> None:
    coverage = dict.fromkeys(kw, cov)
    out = gated(kw, sem, coverage, dense_weight=w, pin=pin)
    assert sorted(f.key for f in out) == sorted(set(kw) | set(sem))
    assert all(f.score <= 1 + 1e-9 for f in out)  # a negative cosine over a positive best stays negative
    assert out == gated(dict(reversed(list(kw.items()))), sem, coverage, dense_weight=w, pin=pin)
    kw_order = ranking(kw)
    if keyword_gate(kw, cov, margin=0.02, min_coverage=0.67).held:
        assert [f.key for f in out][: min(pin, len(kw))] == kw_order[:pin]
    rest = out[min(pin, len(kw)):] if keyword_gate(kw, cov, margin=0.02, min_coverage=0.67).held else out
    assert all((a.score, -a.key) >= (b.score, -b.key) for a, b in itertools.pairwise(rest))


@settings(max_examples=200)
@given(kw=positive_maps, cov=st.floats(0, 1))
def test_gated_without_semantic_is_keyword(kw: dict[int, float], cov: float) -> None:
    out = gated(kw, {}, dict.fromkeys(kw, cov))
    assert sorted(f.key for f in out) == sorted(kw)
    # keyword's order, up to scores too close to tell apart after normalisation
    for a, b in itertools.pairwise(out):
        assert kw[a.key] >= kw[b.key] or a.score == b.score


def test_gated_arguments_and_limit() -> None:
    assert [f.key for f in gated({"a": 2.0, "b": 1.0}, {"c": 1.0}, limit=1)] == ["a"]
    assert gated({}, {}) == []
    with pytest.raises(ValueError):
        gated({"a": 1.0}, {}, dense_weight=1.5)
    with pytest.raises(ValueError):
        gated({"a": 1.0}, {}, pin=-1)
    with pytest.raises(ValueError):
        gated({"a": 1.0}, {}, weak_dense_weight=-0.1)

