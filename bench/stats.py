"""Small numeric helpers shared by the benchmark and the evaluation harness."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in 0..100); None for no values. Nearest rank, not
    interpolation, so a p95 over 20 queries is a latency that really happened."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)


def latency_summary(seconds: Sequence[float]) -> dict:
    return {"p50_ms": ms(percentile(seconds, 50)), "p95_ms": ms(percentile(seconds, 95)),
            "mean_ms": ms(sum(seconds) / len(seconds)) if seconds else None, "n": len(seconds)}


def best_of_rounds(rounds: Sequence[Sequence[float]]) -> list[float]:
    """Each query's fastest time over several passes of the same queries. On a shared VM a
    pass's p95 moves by 2x with the host's load (same code, same index: 17 to 44 ms); the
    fastest of a few interleaved passes is what the code costs, the single pass what a user
    may meet. Reported side by side, never one for the other."""
    return [min(times) for times in zip(*rounds, strict=True)]
