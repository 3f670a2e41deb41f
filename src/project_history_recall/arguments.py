"""Checking the arguments a face hands over (pure).

Tool arguments come from a model, so every value may have the wrong type, be
empty or be out of range. Each check either returns the clean value or raises
``bad_argument`` with a sentence the model can act on; none of them guesses.
"""

from __future__ import annotations

from project_history_recall.errors import bad_argument

MAX_TEXT_CHARS = 4000


def require_text(value: object, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise bad_argument(f"{name} must be a non-empty string")
    return value[:MAX_TEXT_CHARS].strip()


def optional_text(value: object, name: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise bad_argument(f"{name} must be a string")
    return value.strip() or None


def choice(value: object, allowed: tuple[str, ...], name: str, default: str) -> str:
    if value is None or value == "":
        return default
    if not isinstance(value, str) or value.strip().lower() not in allowed:
        raise bad_argument(f"{name} must be one of {', '.join(allowed)}")
    return value.strip().lower()


def clamped_int(value: object, name: str, default: int, low: int, high: int) -> int:
    """A whole number, capped at ``high`` (a documented maximum); below ``low`` is an error,
    not a guess: ``limit: 0`` or ``-3`` means the caller wanted something else."""
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise bad_argument(f"{name} must be a whole number")
    try:
        number = int(float(value)) if isinstance(value, str | int | float) else None
    except (ValueError, OverflowError):
        number = None
    if number is None:
        raise bad_argument(f"{name} must be a whole number")
    if number < low:
        raise bad_argument(f"{name} must be at least {low} (got {number})")
    return min(high, number)


def flag(value: object) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def kinds(value: object, allowed: tuple[str, ...]) -> tuple[str, ...] | None:
    if value is None or value == "" or value == []:
        return None
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(k, str) for k in items):
        raise bad_argument(f"kinds must be a list of: {', '.join(allowed)}")
    chosen = tuple(dict.fromkeys(k.strip().lower() for k in items if k.strip()))
    unknown = [k for k in chosen if k not in allowed]
    if unknown:
        raise bad_argument(f"unknown kinds {unknown}; use {', '.join(allowed)}")
    return chosen or None
