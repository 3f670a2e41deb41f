"""Errors as values: every failure the faces show has a stable ``code``.

Library functions raise :class:`RecallError`; the faces (tools, commands, CLI)
turn it into ``{"success": false, "error": ..., "code": ...}`` or a readable line.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RecallError(Exception):
    message: str
    code: str

    def __str__(self) -> str:
        return self.message

    def as_dict(self) -> dict:
        return {"success": False, "error": self.message, "code": self.code}


def no_db(path: object) -> RecallError:
    return RecallError(f"session database not found: {path}", "no_db")


def bad_argument(message: str) -> RecallError:
    return RecallError(message, "bad_argument")


def not_found(message: str) -> RecallError:
    return RecallError(message, "not_found")
