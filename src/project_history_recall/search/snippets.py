"""Snippets with the matched terms marked (pure)."""

from __future__ import annotations

import re

from project_history_recall.tokenizer import QueryPlan, normalize

SNIPPET_CHARS = 260
MARK_OPEN, MARK_CLOSE = "**", "**"


def _patterns(plan: QueryPlan) -> list[re.Pattern[str]]:
    surfaces: set[str] = set()
    for unit in plan.units:
        if len(unit.alternatives) == 1 and len(unit.alternatives[0]) > 1 and not unit.label.isascii():
            continue  # a CJK phrase: its bigrams are already there
        surfaces.add(unit.label)
        for alt in unit.alternatives[1:]:
            surfaces.update(alt)
    surfaces.update(plan.substrings)
    patterns = []
    for surface in sorted(surfaces, key=len, reverse=True):
        if not surface:
            continue
        escaped = re.escape(surface)
        if surface.isascii() and surface[0].isalnum():
            # A word matches at a word start and is marked to the end of its word (``timeout``
            # marks ``timeouts``, ``retry`` marks ``RetryPolicy``): never half a word.
            patterns.append(re.compile(rf"(?<![A-Za-z0-9]){escaped}[A-Za-z0-9]*", re.IGNORECASE))
        else:
            patterns.append(re.compile(escaped, re.IGNORECASE))
    return patterns


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
    spans: list[tuple[int, int]] = []
    for pattern in _patterns(plan):
        for match in pattern.finditer(haystack):
            if match.end() > match.start() and not any(s < match.end() and match.start() < e for s, e in spans):
                spans.append((match.start(), match.end()))
            if len(spans) > 200:
                break
    spans.sort()
    if not spans:
        return flat[:width] + ("…" if len(flat) > width else "")
    best_start, best_count = spans[0][0], 0
    for i, (start, _) in enumerate(spans):
        count = sum(1 for s, e in spans[i:] if e <= start + width)
        if count > best_count:
            best_start, best_count = start, count
    begin = max(0, min(best_start - width // 4, len(flat) - width))
    end = min(len(flat), begin + width)
    pieces, cursor = [], begin
    for start, stop in spans:
        if start < begin or stop > end:
            continue
        pieces.append(flat[cursor:start])
        pieces.append(MARK_OPEN + flat[start:stop] + MARK_CLOSE)
        cursor = stop
    pieces.append(flat[cursor:end])
    return ("…" if begin > 0 else "") + "".join(pieces) + ("…" if end < len(flat) else "")
