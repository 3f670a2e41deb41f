"""Times as people write them: ISO dates, epoch seconds, or ``7d``/``12h``/``2w`` ago (pure)."""

from __future__ import annotations

import re
import time
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
