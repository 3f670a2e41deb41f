"""Fuse keyword and semantic result lists (pure: no I/O).

Deterministic (equal scores are ordered by key):

* :func:`gated` — keyword-gated score fusion, the default for ``mode=hybrid``
  (issue 14, chosen on the real sets' tune splits: ``bench/REAL_SETS.md``).
  Per key ``fused = (1 - w) · kw/max(kw) + w · sem/max(sem)`` (a source that
  misses the key gives 0; a list whose best score is ≤ 0 maps to 1). Then the
  gate: when keyword found anything and its top key leads the second by a
  relative margin ``(k1 - k2) / k1 ≥ margin`` *or* the top key's coverage of the
  query is ``≥ coverage``, keyword's first ``pin`` keys stay first in keyword
  order and the rest follow in fused order; otherwise the whole list is in fused
  order. A confident keyword answer can therefore never be reordered. Weak keyword
  evidence is the other end: when keyword's top key covers less than ``weak_coverage``
  of the query's units, keyword matched a few of its words and no more (a long
  question, a Chinese one whose bigrams "今天", "开心" match everywhere), so the
  fusion weighs semantic at ``weak_dense_weight`` and nothing is held.

* :func:`normalize_minmax` and :func:`normalize_by_max` — per-list normalisations
  (scores must be *higher is better*: pass ``-bm25()`` for SQLite FTS5; non-finite
  scores are ignored).

Rank fusion (RRF) and plain convex fusion were the earlier defaults; the real sets showed
that both reorder confident keyword answers (issue 14, ``bench/REAL_SETS.md``), so they
are gone; ``bench/fusion_study.py`` keeps its own copies of the rules it compares.

Every result is a :class:`Fused` ``(key, score, score_source, ranks)`` where
``score_source`` is ``"keyword"``, ``"semantic"`` or ``"both"`` and ``ranks``
holds the 1-based rank in each input (``None`` when absent).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Generic, NamedTuple, TypeVar

K = TypeVar("K", bound=Hashable)

KEYWORD = "keyword"
SEMANTIC = "semantic"
BOTH = "both"
DEFAULT_NAMES = (KEYWORD, SEMANTIC)


class Fused(NamedTuple, Generic[K]):
    key: K
    score: float
    score_source: str
    ranks: tuple[int | None, ...]


def _sorted(items: list[Fused[K]]) -> list[Fused[K]]:
    try:
        return sorted(items, key=lambda f: (-f.score, f.key))
    except TypeError:  # keys of mixed, unorderable types: fall back to a stable textual order
        return sorted(items, key=lambda f: (-f.score, type(f.key).__name__, repr(f.key)))


def _source(ranks: Sequence[int | None], names: Sequence[str]) -> str:
    present = [names[i] for i, rank in enumerate(ranks) if rank is not None]
    if len(present) == 1:
        return present[0]
    if len(present) == len(names) == 2:
        return BOTH
    return "+".join(present)


def _finite(scores: Mapping[K, float]) -> dict[K, float]:
    return {key: float(v) for key, v in scores.items() if isinstance(v, int | float) and math.isfinite(v)}


def _ranks_by_score(scores: Mapping[K, float]) -> dict[K, int]:
    items = [Fused(key, value, "", ()) for key, value in scores.items()]
    return {f.key: i + 1 for i, f in enumerate(_sorted(items))}


def normalize_minmax(scores: Mapping[K, float]) -> dict[K, float]:
    """Scores mapped into [0, 1] within the list, higher is better (non-finite scores dropped;
    a list whose scores are all equal maps to 1)."""
    clean = _finite(scores)
    if not clean:
        return {}
    low, high = min(clean.values()), max(clean.values())
    span = high - low
    if span <= 0 or not math.isfinite(span):
        return dict.fromkeys(clean, 1.0)
    return {key: min(1.0, max(0.0, (value - low) / span)) for key, value in clean.items()}


def _convex(kw: Mapping[K, float], sem: Mapping[K, float], kw_raw: Mapping[K, float], sem_raw: Mapping[K, float],
            dense_weight: float) -> list[Fused[K]]:
    """``(1 - w) · kw + w · sem`` over normalised scores (absent counts 0), ranks from the raw ones."""
    kw_ranks, sem_ranks = _ranks_by_score(kw_raw), _ranks_by_score(sem_raw)
    out: list[Fused[K]] = []
    for key in {**dict.fromkeys(kw), **dict.fromkeys(sem)}:
        ranks = (kw_ranks.get(key), sem_ranks.get(key))
        score = (1.0 - dense_weight) * kw.get(key, 0.0) + dense_weight * sem.get(key, 0.0)
        out.append(Fused(key, score, _source(ranks, DEFAULT_NAMES), ranks))
    return _sorted(out)


def normalize_by_max(scores: Mapping[K, float]) -> dict[K, float]:
    """``score / max`` (non-finite scores dropped); every key maps to 1 when the best is ≤ 0."""
    clean = _finite(scores)
    top = max(clean.values(), default=0.0)
    return {key: (value / top if top > 0 else 1.0) for key, value in clean.items()}


def keyword_margin(scores: Mapping[K, float]) -> float:
    """Relative lead of the best score over the second, ``(k1 - k2) / k1`` (0 when k1 ≤ 0;
    a single positive score leads by 1)."""
    top = sorted(_finite(scores).values(), reverse=True)[:2]
    if not top or top[0] <= 0:
        return 0.0
    return (top[0] - (top[1] if len(top) > 1 else 0.0)) / top[0]


class Gate(NamedTuple):
    margin: float
    coverage: float
    held: bool


def keyword_gate(keyword: Mapping[K, float], coverage: float, *, margin: float, min_coverage: float) -> Gate:
    """Whether keyword's order is confident enough to keep its head (see :func:`gated`)."""
    lead = keyword_margin(keyword)
    held = bool(_finite(keyword)) and (lead >= margin or coverage >= min_coverage)
    return Gate(lead, coverage, held)


def gated(
    keyword: Mapping[K, float],
    semantic: Mapping[K, float],
    coverage: Mapping[K, float] | None = None,
    *,
    dense_weight: float = 0.05,
    margin: float = 0.02,
    min_coverage: float = 0.67,
    pin: int = 2,
    weak_coverage: float = 0.0,
    weak_dense_weight: float = 0.75,
    limit: int | None = None,
) -> list[Fused[K]]:
    """Keyword-gated fusion of per-key scores (see the module doc). ``coverage`` gives the
    share of the query's units each keyword key matches (only the top key's is read)."""
    if not (0.0 <= dense_weight <= 1.0 and 0.0 <= weak_dense_weight <= 1.0):
        raise ValueError("dense_weight and weak_dense_weight must be between 0 and 1")
    if pin < 0:
        raise ValueError("pin must be non-negative")
    kw_clean, sem_clean = _finite(keyword), _finite(semantic)
    kw, sem = normalize_by_max(kw_clean), normalize_by_max(sem_clean)
    kw_order = ranking(kw_clean)
    top_coverage = (coverage or {}).get(kw_order[0], 0.0) if kw_order else 0.0
    weak = bool(kw_order) and top_coverage < weak_coverage
    fused = _convex(kw, sem, kw_clean, sem_clean, weak_dense_weight if weak else dense_weight)
    if not weak and keyword_gate(kw_clean, top_coverage, margin=margin, min_coverage=min_coverage).held:
        by_key = {f.key: f for f in fused}
        head = [by_key[key] for key in kw_order[:pin]]
        held = {f.key for f in head}
        fused = head + [f for f in fused if f.key not in held]
    return fused if limit is None else fused[:limit]


def ranking(scores: Mapping[K, float]) -> list[K]:
    """Keys best-first (ties by key)."""
    return [key for key, _ in sorted(_ranks_by_score(_finite(scores)).items(), key=lambda kv: kv[1])]
