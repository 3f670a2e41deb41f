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

which printed this table (its ``TABLES`` say which features and rows each table has, chosen
on the tune sets). These were printed on 2026-12-07 when the other-project controls of REALTALK
and of the SWE sets still came from either split; since the converters take them from the same
split, the same command prints tables that flag fewer tune negatives or lose the unknown-topic
case of ``tests/test_confidence.py``, so these are kept (``docs/benchmarks.md``, "Stop 38", "Stop 39").

The hybrid and keyword tables weigh their signals by what tells a negative control's first
result (a question whose session is not in scope) from a right first result, then are scaled
to each query's first result (Platt: label "it is right"), so the score stays
the probability that a first result with this evidence is right; the semantic one is fitted on
every returned result (label: its session is gold). One table scores every result, so a lower
result's score reads "how likely a result with this evidence is the answer". ``low`` is the
largest threshold under which fewer than 5 % of the tune queries whose first result is right
would have every result flagged (a result said inside the question's time is never low:
:func:`~.temporal.vouch`), on each tune set; ``high`` the smallest above which at least 90 % of
first results are right (pooled tune).
The hybrid and keyword tables score a Chinese question lower, right answers and wrong alike (a
long one's bigrams cover little of it), so their English ``low`` said "no confident match" to most
right Chinese answers. Their ``low_cjk``, the threshold for a question mostly in Chinese or
Japanese script, is the same rule on the one Chinese tune set, the tables kept::

    python -m bench.fit_confidence bench/out/real/madial-zh-tune.json --keep-tables

(MADial-Bench zh: 30 right first results and 22 negatives in hybrid, ``docs/benchmarks.md``, "Stop 44").
The semantic table reads cosines only, and its ``low`` already flags none of the 25 right Chinese
answers there, so it has no ``low_cjk``.
Held-out figures: ``docs/benchmarks.md``; refit when the ranking or the default model changes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

HIGH, MEDIUM, LOW = "high", "medium", "low"
#: A question whose units are at least this share Chinese or Japanese reads :attr:`Model.low_cjk`.
CJK_QUESTION = 0.5


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
    query has; ``agree``: 1 when the session leads keyword and also holds the best semantic
    message: two sources that rank independently picking the same session is evidence neither
    score shows alone (another project's or a withheld session's question mostly splits them);
    ``elsewhere_words`` / ``elsewhere_code``: how much of the query's words / code-like units
    only sessions outside the scope match (:func:`~.keyword.elsewhere`); ``cjk_share``: the share
    of the query's units in Chinese or Japanese script (no table weighs it: it picks the threshold,
    :meth:`Model.threshold`)."""

    coverage: float = 0.0
    keyword_per_unit: float = 0.0
    keyword_share: float = 0.0
    margin: float = 0.0
    session_cosine: float = 0.0
    top_cosine: float = 0.0
    cosine_gap: float = 0.0
    missing: float = 0.0
    query_units: float = 0.0
    agree: float = 0.0
    elsewhere_words: float = 0.0
    elsewhere_code: float = 0.0
    cjk_share: float = 0.0


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
    #: ``low`` for a question mostly in Chinese or Japanese script (``cjk_share`` at least
    #: :data:`CJK_QUESTION`): the tables were fitted on English questions (module doc; None: ``low``)
    low_cjk: float | None = None

    def probability(self, signals: Signals) -> float:
        # getattr, not dataclasses.astuple: that deep-copies every field, most of the cost of
        # scoring a result, for nothing (the signals are floats)
        z = self.bias + sum(w * (getattr(signals, name) - m) / s for name, m, s, w in
                            zip(self.features, self.mean, self.std, self.weights, strict=True))
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))

    def threshold(self, signals: Signals | None = None) -> float:
        """``low``, or ``low_cjk`` when ``signals`` are a question's mostly in CJK script."""
        if signals is not None and self.low_cjk is not None and signals.cjk_share >= CJK_QUESTION:
            return self.low_cjk
        return self.low

    def level(self, probability: float, signals: Signals | None = None) -> str:
        if probability < self.threshold(signals):
            return LOW
        return HIGH if probability >= self.high else MEDIUM


# fmt: off
MODELS: dict[str, Model] = {
    "hybrid": Model(
        features=('coverage',
                  'keyword_per_unit',
                  'margin',
                  'session_cosine',
                  'top_cosine',
                  'missing',
                  'agree',
                  'elsewhere_words',
                  'elsewhere_code'),
        mean=(0.63488, 3.70982, 0.40223, 0.41454, 0.4443, 0.28523,
              0.53209, 0.09055, 0.00759),
        std=(0.29051, 2.56427, 0.28099, 0.1489, 0.12952, 0.24901,
              0.49897, 0.20472, 0.05063),
        weights=(0.2827, 0.8935, 0.1272, 0.0143, 0.2362, -0.1033,
              0.152, -0.4855, -0.5422),
        bias=0.7744, low=0.285, high=0.754, low_cjk=0.1625),
    "keyword": Model(
        features=('coverage',
                  'keyword_per_unit',
                  'keyword_share',
                  'margin',
                  'missing',
                  'elsewhere_words',
                  'elsewhere_code'),
        mean=(0.39338, 1.99367, 0.69503, 0.16083, 0.40694, 0.19733,
              0.02429),
        std=(0.29605, 2.16517, 0.29795, 0.26527, 0.23383, 0.28612,
              0.09113),
        weights=(0.2231, 0.811, 1.0107, 0.4299, -0.1102, -0.4713,
              -0.5194),
        bias=-1.7415, low=0.2825, high=0.73, low_cjk=0.16),
    "semantic": Model(
        features=('session_cosine',
                  'top_cosine',
                  'cosine_gap'),
        mean=(0.31778, 0.41612, 0.12873),
        std=(0.10904, 0.11291, 0.06416),
        weights=(1.8417, -1.5933, 0.5628),
        bias=-2.1972, low=0.2025, high=0.822),
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
    return Assessment(round(p, 3), model.level(p, signals))


def nothing_confident(assessments: list[Assessment]) -> bool:
    """True when there are results and every one of them is ``low``."""
    return bool(assessments) and all(a.level == LOW for a in assessments)
