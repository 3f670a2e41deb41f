"""How sure a search result is (pure: no I/O): a calibrated score, a level, and "nothing here".

Every result carries ``confidence`` (``"high"``, ``"medium"`` or ``"low"``) and
``confidence_score``: the fitted probability that this result's session holds the answer
(logistic regression on :class:`Signals`, standardised). When no result is above ``low``
the search says so (``"no confident match in this project"``) and still lists them: a
question whose session was never indexed (or belongs to another project) still finds the
same people or the same repository talking about the same topic, and only these signals
tell the two apart.

Which table applies depends on what ran (:func:`model_for`): keyword and semantic
candidates (``hybrid``), keyword only (``keyword`` mode, or hybrid without vectors) or
semantic only (``semantic`` mode). The coefficients below were fitted on the TUNE splits of
the real sets only (REALTALK conversations and SWE-agent trajectories, ``bench/REAL_SETS.md``)
with the ``use-multilingual`` model, by::

    python -m bench.fit_confidence bench/out/real/realtalk-tune.json bench/out/real/swe-small-tune.json

which prints this table (its ``TABLES`` say which features and rows each table has, chosen
on the tune sets). The hybrid and keyword tables are fitted on each query's first result
(label: it is right), the semantic one on every returned result (label: its session is gold);
one table scores every result, so a lower result's score reads "how likely a result with this
evidence is the answer". ``low`` is the largest threshold under which fewer than 5 % of the
tune queries whose first result is right would have every result flagged, on each tune set;
``high`` the smallest above which at least 90 % of first results are right (pooled tune).
Held-out figures: ``docs/benchmarks.md``; refit when the ranking or the default model changes.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

HIGH, MEDIUM, LOW = "high", "medium", "low"


@dataclass(frozen=True)
class Signals:
    """What the ranking knows about one result; every value is 0 when its source did not run.

    ``coverage``: share of the query's units that the session's keyword entries match
    together; ``keyword_per_unit``: the session's keyword score (BM25 with the coverage credit)
    per query unit; ``keyword_share``: that score over the best session's; ``margin``: the
    session's relative lead over the second keyword session when it is the best one, else 0
    (a result that does not lead keyword has no lead); ``session_cosine``: the
    session's best message cosine (the lowest candidate's when none of its messages is a
    candidate); ``top_cosine``: the best cosine in scope; ``cosine_gap``: best minus median
    candidate cosine (a flat list means nothing stands out); ``missing``: share of the query's
    units that no keyword candidate in scope matches; ``query_units``: how many units the
    query has.

    The rarity signals weigh each query unit by its IDF over the whole index
    (:func:`unit_weights`), because "the query's rare words are in this session" and "this
    session shares the query's common words" have the same coverage: ``idf_share``: the
    weight share of the units this session's keyword entries match; ``idf_missing``: the
    weight share of the units no keyword candidate matches (``missing`` by weight);
    ``rarest_matched``: 1 when the session matches the rarest unit that any candidate matches;
    ``agree``: 1 when the session leads keyword and holds the best semantic message (two
    sources picking the same session)."""

    coverage: float = 0.0
    keyword_per_unit: float = 0.0
    keyword_share: float = 0.0
    margin: float = 0.0
    session_cosine: float = 0.0
    top_cosine: float = 0.0
    cosine_gap: float = 0.0
    missing: float = 0.0
    query_units: float = 0.0
    idf_share: float = 0.0
    idf_missing: float = 0.0
    rarest_matched: float = 0.0
    agree: float = 0.0

    @property
    def missing_by_length(self) -> float:
        """``missing`` grows in weight with the query's length: two of three units missing is
        common for a short chat question, rare for a long issue title that is really there."""
        return self.missing * math.log1p(self.query_units)


def unit_weights(matches: dict[str, int], entries: int) -> dict[str, float]:
    """Each unit's IDF, ``log((N + 1) / (n + 0.5))`` over the index's ``N`` entries, ``n`` of
    which match it (as BM25 weighs it; counted up to a cap, so common units share the floor)."""
    return {label: math.log((entries + 1) / (n + 0.5)) for label, n in matches.items()}


def with_rarity(signals: list[Signals], weights: dict[str, float], reachable: set[str],
                matched: list[set[str]], agreeing: list[bool]) -> list[Signals]:
    """``signals`` with the rarity signals filled in (see :class:`Signals`): ``matched`` is
    each result's matched units, ``reachable`` the units any candidate matches, ``agreeing``
    whether each result is the session both sources put first."""
    total = sum(weights.values())
    rarest = max(reachable, key=lambda u: (weights.get(u, 0.0), u)) if reachable else None
    missing = sum(w for u, w in weights.items() if u not in reachable) / total if total > 0 else 0.0
    return [dataclasses.replace(
        s, idf_share=sum(weights.get(u, 0.0) for u in units) / total if total > 0 else 0.0,
        idf_missing=missing, rarest_matched=float(rarest is not None and rarest in units), agree=float(agree))
        for s, units, agree in zip(signals, matched, agreeing, strict=True)]


@dataclass(frozen=True)
class Model:
    """A fitted logistic model: ``p = σ(bias + Σ weight · (x - mean) / std)`` over ``features``."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    low: float
    high: float

    def probability(self, signals: Signals) -> float:
        # getattr, not dataclasses.astuple: that deep-copies every field, most of the cost of
        # scoring a result, for nothing (the signals are floats)
        z = self.bias + sum(w * (getattr(signals, name) - m) / s for name, m, s, w in
                            zip(self.features, self.mean, self.std, self.weights, strict=True))
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))

    def level(self, probability: float) -> str:
        if probability < self.low:
            return LOW
        return HIGH if probability >= self.high else MEDIUM


# fmt: off
MODELS: dict[str, Model] = {
    "hybrid": Model(
        features=('coverage',
                  'keyword_per_unit',
                  'keyword_share',
                  'margin',
                  'session_cosine',
                  'top_cosine',
                  'cosine_gap',
                  'missing',
                  'idf_missing',
                  'agree',
                  'rarest_matched',
                  'missing_by_length'),
        mean=(0.63256, 3.70258, 0.97631, 0.40251, 0.41315, 0.44404,
              0.2182, 0.28617, 0.36473, 0.52139, 0.89037, 0.50167),
        std=(0.29225, 2.56646, 0.13386, 0.28051, 0.14835, 0.12826,
              0.08295, 0.24964, 0.29129, 0.49954, 0.31242, 0.44423),
        weights=(0.4519, 1.0838, -0.1789, 0.0761, 0.1523, -0.3836,
              0.5235, -0.2911, 0.0576, 0.1563, -0.1283, 0.0048),
        bias=0.8612, low=0.3525, high=0.753),
    "keyword": Model(
        features=('coverage',
                  'keyword_per_unit',
                  'keyword_share',
                  'margin',
                  'missing',
                  'idf_share',
                  'idf_missing',
                  'rarest_matched',
                  'missing_by_length'),
        mean=(0.63994, 3.74643, 0.9895, 0.40709, 0.27922, 0.57154,
              0.36663, 0.9027, 0.49123),
        std=(0.28468, 2.54686, 0.0718, 0.2789, 0.2415, 0.31654,
              0.2903, 0.29636, 0.43498),
        weights=(0.0304, 1.3374, -0.1922, 0.2395, -0.7983, 0.4601,
              0.5721, -0.1048, 0.03),
        bias=1.044, low=0.5075, high=0.712),
    "semantic": Model(
        features=('session_cosine',
                  'top_cosine',
                  'cosine_gap'),
        mean=(0.31812, 0.41606, 0.12846),
        std=(0.10884, 0.11182, 0.06241),
        weights=(1.8465, -1.5876, 0.5648),
        bias=-2.1936, low=0.2, high=0.772),
}
# fmt: on


def model_for(keyword_ran: bool, semantic_ran: bool) -> Model:
    """The table for what ran: both, keyword only, or semantic only."""
    if keyword_ran and semantic_ran:
        return MODELS["hybrid"]
    return MODELS["keyword"] if keyword_ran else MODELS["semantic"]


@dataclass(frozen=True)
class Assessment:
    score: float
    level: str


def assess(model: Model, signals: Signals) -> Assessment:
    p = model.probability(signals)
    return Assessment(round(p, 3), model.level(p))


def nothing_confident(assessments: list[Assessment]) -> bool:
    """True when there are results and every one of them is ``low``."""
    return bool(assessments) and all(a.level == LOW for a in assessments)
