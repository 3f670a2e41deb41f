"""Snippets with the matched terms marked (pure)."""

from __future__ import annotations

import bisect
import re
from functools import lru_cache

from project_history_recall.tokenizer import QueryPlan, normalize

SNIPPET_CHARS = 260
MARK_OPEN, MARK_CLOSE = "**", "**"


@lru_cache(maxsize=64)
def _patterns(plan: QueryPlan, lowered: bool) -> tuple[re.Pattern[str], ...]:
    """The plan's surfaces as patterns, longest first (cached: every result of a query asks).

    ``lowered``: for a haystack already lowercased. Compiling ``re.IGNORECASE`` with the word
    classes costs about 0.3 ms a pattern, more than matching them in most snippets."""
    surfaces: set[str] = set()
    for unit in plan.units:
        if len(unit.alternatives) == 1 and len(unit.alternatives[0]) > 1 and not unit.label.isascii():
            continue  # a CJK phrase: its bigrams are already there
        surfaces.add(unit.label)
        for alt in unit.alternatives[1:]:
            surfaces.update(alt)
    surfaces.update(plan.substrings)
    patterns = []
    for surface in sorted(surfaces, key=lambda s: (-len(s), s)):  # ties by text: never hash order
        if not surface:
            continue
        escaped = re.escape(surface.lower() if lowered else surface)
        if surface.isascii() and surface[0].isalnum():
            # A word matches at a word start and is marked to the end of its word (``timeout``
            # marks ``timeouts``, ``retry`` marks ``RetryPolicy``): never half a word. The word
            # start is checked behind the surface (``surface(?<!x surface)``, not ``(?<!x)surface``):
            # a pattern that opens with its literal is searched for like ``str.find``, one that
            # opens with a lookbehind is tried at every character (20x slower on a tool call).
            if lowered:
                patterns.append(re.compile(rf"{escaped}(?<![a-z0-9]{escaped})[a-z0-9]*"))
            else:
                patterns.append(re.compile(rf"{escaped}(?<![A-Za-z0-9]{escaped})[A-Za-z0-9]*", re.IGNORECASE))
        else:
            patterns.append(re.compile(escaped, re.IGNORECASE))
    return tuple(patterns)


_QUESTION = re.compile(r"[?？]")


def is_question(text: str) -> bool:
    """Whether a message asks something (a question mark, ASCII or full-width): its answer is
    the reply that follows."""
    return bool(_QUESTION.search(text))


def make_snippet(text: str, plan: QueryPlan, width: int = SNIPPET_CHARS) -> str:
    """The window of ``text`` that holds the most matched terms, terms marked ``**like this**``."""
    flat = " ".join(text.split())
    folded = normalize(flat)
    haystack = folded if len(folded) == len(flat) else flat
    lowered = len(haystack.lower()) == len(haystack)  # lowercasing keeps positions in line with ``flat``
    if lowered:
        haystack = haystack.lower()
    starts: list[int] = []  # the spans kept, sorted, never overlapping
    ends: list[int] = []
    for pattern in _patterns(plan, lowered):
        for match in pattern.finditer(haystack):
            start, stop = match.span()
            at = bisect.bisect_right(starts, start)
            if stop > start and (at == 0 or ends[at - 1] <= start) and (at == len(starts) or stop <= starts[at]):
                starts.insert(at, start)
                ends.insert(at, stop)
            if len(starts) > 200:
                break
    if not starts:
        return flat[:width] + ("…" if len(flat) > width else "")
    # The window starting at a span that holds the most whole spans (ends are sorted too).
    best_start, best_count = starts[0], 0
    for i, start in enumerate(starts):
        count = bisect.bisect_right(ends, start + width) - i
        if count > best_count:
            best_start, best_count = start, count
    begin = max(0, min(best_start - width // 4, len(flat) - width))
    end = min(len(flat), begin + width)
    pieces, cursor = [], begin
    for start, stop in zip(starts, ends, strict=True):
        if start < begin or stop > end:
            continue
        pieces.append(flat[cursor:start])
        pieces.append(MARK_OPEN + flat[start:stop] + MARK_CLOSE)
        cursor = stop
    pieces.append(flat[cursor:end])
    return ("…" if begin > 0 else "") + "".join(pieces) + ("…" if end < len(flat) else "")
