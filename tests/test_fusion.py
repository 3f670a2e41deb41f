"""Fusion (rank, weighted, keyword-gated) is deterministic, order-sensitive in the right way, and names its sources."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from project_history_recall.search.fusion import (
    BOTH,
    KEYWORD,
    SEMANTIC,
    Fused,
    best_per_group,
    gated,
    keyword_gate,
    keyword_margin,
    normalize_by_max,
    normalize_scores,
    ranking,
    rrf,
    weighted,
)

keys = st.integers(0, 40)
rankings = st.lists(st.lists(keys, max_size=25, unique=True), min_size=1, max_size=4)
score_maps = st.dictionaries(keys, st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False), max_size=25)


def test_rrf_formula_and_sources() -> None:
    out = rrf([["a", "b", "c"], ["c", "d"]])
    by_key = {f.key: f for f in out}
    assert by_key["c"].score == pytest.approx(1 / 63 + 1 / 61)
    assert by_key["a"].score == pytest.approx(1 / 61)
    assert by_key["c"].score_source == BOTH
    assert by_key["a"].score_source == KEYWORD
    assert by_key["d"].score_source == SEMANTIC
    assert by_key["c"].ranks == (3, 1) and by_key["d"].ranks == (None, 2)
    assert [f.key for f in out] == ["c", "a", "b", "d"]
    key, score, *_ = out[0]
    assert (key, score) == (out[0].key, out[0].score)


def test_rrf_ties_are_broken_by_key() -> None:
    out = rrf([["b", "a"], ["a", "b"]])
    assert out[0].score == out[1].score
    assert [f.key for f in out] == ["a", "b"]
    assert [f.key for f in rrf([["z"], ["y"]])] == ["y", "z"]


def test_rrf_weights_names_limit_and_duplicates() -> None:
    out = rrf([["a"], ["b"]], weights=[1.0, 2.0])
    assert [f.key for f in out] == ["b", "a"]
    named = rrf([["a"], ["a"], ["b"]], names=["kw", "vec", "chain"])
    assert named[0].score_source == "kw+vec" and named[1].score_source == "chain"
    assert len(rrf([["a", "b", "c"]], limit=2)) == 2
    dup = rrf([["a", "b", "a"]])
    assert {f.key: f.ranks for f in dup} == {"a": (1,), "b": (2,)}
    with pytest.raises(ValueError):
        rrf([["a"]], k=0)
    with pytest.raises(ValueError):
        rrf([["a"], ["b"]], weights=[1.0])
    with pytest.raises(ValueError):
        rrf([["a"]], weights=[-1.0])


@settings(max_examples=300)
@given(rankings=rankings)
def test_rrf_properties(rankings: list[list[int]]) -> None:
    out = rrf(rankings)
    # every key once, nothing invented
    assert sorted(f.key for f in out) == sorted({k for r in rankings for k in r})
    # sorted by score desc, ties by key
    assert all((a.score, -a.key) >= (b.score, -b.key) for a, b in itertools.pairwise(out))
    # deterministic and independent of dict/set iteration
    assert out == rrf([list(r) for r in rankings])
    # scores are the formula
    for f in out:
        expected = sum(1 / (60 + r.index(f.key) + 1) for r in rankings if f.key in r)
        assert math.isclose(f.score, expected)
        assert f.ranks == tuple((r.index(f.key) + 1) if f.key in r else None for r in rankings)


@settings(max_examples=200)
@given(rankings=rankings)
def test_rrf_is_symmetric_in_the_rankings(rankings: list[list[int]]) -> None:
    names = [f"r{i}" for i in range(len(rankings))]
    forward = {f.key: f.score for f in rrf(rankings, names=names)}
    backward = {f.key: f.score for f in rrf(rankings[::-1], names=names[::-1])}
    assert forward.keys() == backward.keys()
    assert all(math.isclose(forward[k], backward[k]) for k in forward)


@settings(max_examples=200)
@given(a=st.lists(keys, min_size=2, max_size=20, unique=True), b=st.lists(keys, max_size=20, unique=True))
def test_rrf_promoting_an_item_never_lowers_it(a: list[int], b: list[int]) -> None:
    target = a[-1]
    before = {f.key: f.score for f in rrf([a, b])}[target]
    promoted = [target, *a[:-1]]
    after = {f.key: f.score for f in rrf([promoted, b])}[target]
    assert after >= before


def test_weighted_minmax() -> None:
    out = weighted({"a": 10.0, "b": 5.0, "c": 0.0}, {"c": 0.9, "d": 0.1}, dense_weight=0.4)
    by_key = {f.key: f for f in out}
    assert by_key["a"].score == pytest.approx(0.6)
    assert by_key["b"].score == pytest.approx(0.3)
    assert by_key["c"].score == pytest.approx(0.4)  # kw min → 0, sem max → 1
    assert by_key["d"].score == pytest.approx(0.0)
    assert by_key["c"].score_source == BOTH and by_key["a"].score_source == KEYWORD
    assert by_key["d"].score_source == SEMANTIC
    assert [f.key for f in out] == ["a", "c", "b", "d"]


def test_weighted_rank_normalisation_and_edges() -> None:
    out = weighted({"a": 100.0, "b": 1.0}, {}, normalization="rank")
    assert [(f.key, f.score) for f in out] == [("a", pytest.approx(0.6)), ("b", pytest.approx(0.3))]
    assert weighted({}, {}) == []
    single = weighted({"a": 3.0}, {"a": 0.2})
    assert single[0].score == pytest.approx(1.0)  # a one-item list normalises to 1
    nan = weighted({"a": float("nan"), "b": 1.0}, {"c": float("inf")})
    assert [f.key for f in nan] == ["b"]
    with pytest.raises(ValueError):
        weighted({"a": 1.0}, {}, dense_weight=1.5)
    with pytest.raises(ValueError):
        normalize_scores({"a": 1.0}, "zscore")  # type: ignore[arg-type]


@settings(max_examples=300)
@given(kw=score_maps, sem=score_maps, w=st.floats(0, 1), method=st.sampled_from(["minmax", "rank"]))
def test_weighted_properties(kw: dict[int, float], sem: dict[int, float], w: float, method: str) -> None:
    out = weighted(kw, sem, dense_weight=w, normalization=method)  # type: ignore[arg-type]
    assert sorted(f.key for f in out) == sorted(set(kw) | set(sem))
    assert all(-1e-9 <= f.score <= 1 + 1e-9 for f in out)
    assert all((a.score, -a.key) >= (b.score, -b.key) for a, b in itertools.pairwise(out))
    assert out == weighted(dict(reversed(list(kw.items()))), sem, dense_weight=w, normalization=method)  # type: ignore[arg-type]
    for f in out:
        expected = BOTH if (f.key in kw and f.key in sem) else (KEYWORD if f.key in kw else SEMANTIC)
        assert f.score_source == expected


@settings(max_examples=200)
@given(scores=score_maps)
def test_weighted_keyword_only_preserves_keyword_order(scores: dict[int, float]) -> None:
    out = weighted(scores, {}, dense_weight=0.4)
    assert sorted(f.key for f in out) == sorted(ranking(scores))
    # the keyword order survives, up to scores too close to tell apart after normalisation
    for a, b in itertools.pairwise(out):
        assert scores[a.key] >= scores[b.key] or a.score == b.score


def test_best_per_group_and_ranking() -> None:
    hits = [(("s1", 7, 0), 0.2), (("s1", 7, 1), 0.9), (("s2", 3, 0), 0.5), (("s2", 4, 0), float("nan"))]
    per_message = best_per_group(hits, lambda key: key[:2])
    assert per_message == {("s1", 7): 0.9, ("s2", 3): 0.5}
    assert ranking(per_message) == [("s1", 7), ("s2", 3)]
    assert ranking({"b": 1.0, "a": 1.0, "c": 2.0}) == ["c", "a", "b"]


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

