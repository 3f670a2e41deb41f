"""Times as people write them: ISO dates, epoch seconds, or ``7d``/``12h``/``2w`` ago (pure)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from project_history_recall.errors import bad_argument

_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([mhdw])\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_when(value: object, *, now: float | None = None, name: str = "time") -> float | None:
    """Epoch seconds for ``value``; None for empty. Naive ISO times are local time."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise bad_argument(f"{name} must be a date, a time or a duration like '7d'")
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        raise bad_argument(f"{name} must be a date, a time or a duration like '7d'")
    text = value.strip()
    match = _RELATIVE.match(text)
    if match:
        return (now if now is not None else time.time()) - float(match.group(1)) * _UNIT_SECONDS[
            match.group(2).lower()]
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError as exc:
        raise bad_argument(f"{name}: cannot read {value!r} as a date (use 2026-11-30, an ISO time or '7d')") from exc


def format_when(timestamp: float | None) -> str:
    if not timestamp:
        return ""
    try:
        return datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):
        return ""


# -- time phrases inside a question (issue 14, item 6) ---------------------------------------

_DAY = 86400.0
_MONTHS = {name: i for i, names in enumerate(
    (("jan", "january"), ("feb", "february"), ("mar", "march"), ("apr", "april"), ("may",), ("jun", "june"),
     ("jul", "july"), ("aug", "august"), ("sep", "sept", "september"), ("oct", "october"), ("nov", "november"),
     ("dec", "december")), start=1) for name in names}
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_ORDINAL = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_LEAD = r"(?P<lead>\b(?:before|after|since|until|on|in|during)\s+(?:the\s+)?)?"
_DATES = [
    re.compile(_LEAD + r"\b" + _ORDINAL + r"\s+(?:of\s+)?" + _MONTH + r",?\s+" + _YEAR + r"\b", re.IGNORECASE),
    re.compile(_LEAD + r"\b" + _MONTH + r"\s+" + _ORDINAL + r",?\s+" + _YEAR + r"\b", re.IGNORECASE),
    re.compile(_LEAD + r"(?<![\w.=])(?P<day>\d{1,2})\.(?P<mnum>\d{1,2})\.(?P<year>(?:19|20)\d\d)(?!\.?\d)",
               re.IGNORECASE),
    re.compile(_LEAD + r"\b(?P<year>(?:19|20)\d\d)-(?P<mnum>\d{2})-(?P<day>\d{2})\b", re.IGNORECASE),
    re.compile(_LEAD + r"\b" + _MONTH + r",?\s+" + _YEAR + r"\b", re.IGNORECASE),
]
#: Words after which ``2.10.2024`` is a version number, not a date.
_VERSION_WORD = re.compile(r"\b(?:version|release|rev|v)\s*$", re.IGNORECASE)
_IN_YEAR = re.compile(r"\b(?P<lead>in|during|before|after|since)\s+(?P<year>(?:19|20)\d\d)\b", re.IGNORECASE)
#: Phrases about when something was said, relative to the asking session: (days back the
#: window starts, days back it ends).
_RELATIVE_PHRASES = [
    (re.compile(r"\b(?:yesterday|last night)\b", re.IGNORECASE), 2.0, 0.0),
    (re.compile(r"\btoday\b|\bthis morning\b|\bearlier today\b", re.IGNORECASE), 1.0, 0.0),
    (re.compile(r"\b(?:last|past) week\b|\ba week ago\b", re.IGNORECASE), 14.0, 0.0),
    (re.compile(r"\bthis week\b|\ba few days ago\b|\bthe other day\b", re.IGNORECASE), 7.0, 0.0),
    (re.compile(r"\b(?:last|past) month\b|\ba month ago\b", re.IGNORECASE), 62.0, 0.0),
]
_AGO = re.compile(r"\b(?P<n>\d{1,3}|a|one|two|three|four|five|six|seven)\s+(?P<unit>day|week|month)s?\s+ago\b",
                  re.IGNORECASE)
_NUMBERS = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30}


@dataclass(frozen=True)
class Window:
    """When a question's answer was said: epoch seconds ``[after, before)``, either end open
    (None), and the phrase it was read from."""

    after: float | None
    before: float | None
    phrase: str

    def holds(self, timestamp: float | None) -> bool:
        if not timestamp:
            return False
        return (self.after is None or timestamp >= self.after) and (self.before is None or timestamp < self.before)


def _local(year: int, month: int, day: int = 1) -> float | None:
    try:
        return datetime(year, month, day).timestamp()
    except (ValueError, OverflowError, OSError):
        return None


def _next_month(year: int, month: int) -> float | None:
    return _local(year + month // 12, month % 12 + 1)


def query_window(text: str, asked_at: Callable[[], float | None]) -> Window | None:
    """The time a question is about, from a date or a relative phrase in its words.

    A day ("on 29 Dec 2023", "09.01.2024", "January 6 2024") means that day and the next (a
    day is often told the day after: "yesterday I..."); a month or a year ("in January 2024",
    "in 2017") that span and one day more; "before" / "after" / "since" open the window on
    one side (inclusive of the named day). Relative phrases ("yesterday", "last week", "3
    days ago") count back from ``asked_at()``, the asking session's time, asked only for such
    a phrase (None: they are not read). Dates are local time, like :func:`parse_when`. None
    when nothing is found."""
    window = _date_window(text)
    if window is not None:
        return window
    match = _IN_YEAR.search(text)
    if match:
        start, end = _local(int(match["year"]), 1), _local(int(match["year"]) + 1, 1)
        if start is not None and end is not None:
            return _bounded(match["lead"], start, end, match.group(0).strip())
    for pattern, back, until in _RELATIVE_PHRASES:
        match = pattern.search(text)
        if match:
            now = asked_at()
            return None if now is None else Window(now - back * _DAY, now - until * _DAY + _DAY, match.group(0))
    match = _AGO.search(text)
    if match:
        now = asked_at()
        if now is None:
            return None
        count = int(match["n"]) if match["n"].isdigit() else _NUMBERS[match["n"].lower()]
        days = count * _UNIT_DAYS[match["unit"].lower()]
        slack = max(1.0, days / 4)
        return Window(now - (days + slack) * _DAY, now - (days - slack) * _DAY + _DAY, match.group(0))
    return None


def _date_window(text: str) -> Window | None:
    """The window of the first date in ``text`` (pattern order), skipping version numbers."""
    for match in (m for pattern in _DATES for m in pattern.finditer(text)
                  if m["lead"] or not _VERSION_WORD.search(text, 0, m.start())):
        parts = match.groupdict()
        year = int(parts["year"])
        month = _MONTHS[parts["month"].lower()] if parts.get("month") else int(parts["mnum"])
        if parts.get("day"):
            start = _local(year, month, int(parts["day"]))
            end = None if start is None else start + _DAY
        else:
            start, end = _local(year, month), _next_month(year, month)
        if start is not None and end is not None:
            return _bounded(parts.get("lead"), start, end, match.group(0).strip())
    return None


def _bounded(lead: str | None, start: float, end: float, phrase: str) -> Window:
    word = (lead or "").strip().split()[0].lower() if lead else ""
    if word in ("before", "until"):
        return Window(None, end, phrase)
    if word in ("after", "since"):
        return Window(start, None, phrase)
    return Window(start, end + _DAY, phrase)
