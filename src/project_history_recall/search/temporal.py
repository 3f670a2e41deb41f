"""Questions that say when (issue 14, item 6): sessions said at that time come first (pure).

"What did Paola cook on 21.01.2024?", "what did we decide last week": the time phrase
(:func:`~project_history_recall.when.query_window`, relative phrases counted back from the
asking session's time) is a preference, not a filter: the results said inside the window
keep their order and move ahead of the rest, which follow in theirs. When no result falls
inside (the phrase was about when something happened, not when it was said: "the match
he watched in 2017"), the order is unchanged. The explicit ``after`` / ``before``
arguments stay hard filters. A result said inside the window is never ``low``
(:func:`vouch`).
"""

from __future__ import annotations

import dataclasses

from project_history_recall.search.confidence import LOW, MEDIUM, Assessment
from project_history_recall.search.keyword import SessionResult
from project_history_recall.when import Window

#: Sessions ranked before the window is applied, so that one said inside it but ranked
#: lower can still come up into the results.
WINDOW_POOL = 50


def said_within(result: SessionResult, window: Window) -> bool:
    """Whether any of the session's matched messages was said inside the window."""
    return any(window.holds(hit.timestamp) for hit in result.hits)


def prefer_window(results: list[SessionResult], window: Window | None, limit: int) -> list[SessionResult]:
    """``results`` with those said inside ``window`` first (each group in its own order), cut to ``limit``."""
    if window is None:
        return results[:limit]
    inside: list[SessionResult] = []
    outside: list[SessionResult] = []
    for result in results:
        (inside if said_within(result, window) else outside).append(result)
    return (inside + outside)[:limit]


def vouch(assessments: list[Assessment], results: list[SessionResult], window: Window | None) -> list[Assessment]:
    """Results said inside the question's window are at least ``medium`` (their score is
    left as fitted): the time the question names is evidence the confidence tables, fitted
    on retrieval scores alone, do not see, and a session moved up by it has a weaker keyword
    lead than the one it passed."""
    if window is None:
        return assessments
    return [dataclasses.replace(a, level=MEDIUM) if a.level == LOW and said_within(r, window) else a
            for a, r in zip(assessments, results, strict=True)]
