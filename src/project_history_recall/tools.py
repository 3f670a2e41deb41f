"""The model's tools: schemas and handlers (JSON in, JSON out, never a traceback).

Handlers only parse arguments, call :class:`~project_history_recall.recall.Recall`
and format; rules live in the library.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from .errors import RecallError

logger = logging.getLogger(__name__)
TOOLSET = "project"

SEARCH_SCHEMA: dict[str, Any] = {
    "name": "project_history_search",
    "description": (
        "Search past conversations in the SAME project as this one. Returns actual messages from "
        "other sessions, with @session: links. Use when the user asks about prior work on this "
        "codebase: 'what did we decide about X', 'where did we leave Y', 'what command did we run'. "
        "Modes: 'hybrid' (default, keyword + semantic), 'keyword' (exact terms), 'semantic' "
        "(similar meaning). Works for English and Chinese."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Search query. Keywords, phrases, or natural language."},
            "mode": {
                "type": "string",
                "enum": ["hybrid", "keyword", "semantic"],
                "default": "hybrid",
                "description": (
                    "'hybrid' (default): keyword + semantic combined. 'keyword': exact terms only. "
                    "'semantic': similar meaning only. Use 'keyword' for code symbols/error codes; "
                    "'semantic' for 'how did we handle X' when exact words differ."
                ),
            },
            "limit": {"type": "integer", "default": 3, "description": "Max sessions to return (default 3, max 10)."},
            "after": {
                "type": "string",
                "description": "Only messages at or after this time: '2026-11-01', an ISO time, or '7d' ago.",
            },
            "before": {"type": "string", "description": "Only messages before this time (same forms as 'after')."},
            "kinds": {
                "type": "array",
                "items": {"type": "string", "enum": ["user", "assistant", "tool_call", "title"]},
                "description": "Only these kinds of entries (default: all).",
            },
            "scope": {
                "type": "string",
                "enum": ["project", "all"],
                "default": "project",
                "description": "'project' (default): this project only. 'all': every project, on purpose.",
            },
            "branch": {
                "type": "string",
                "description": "Narrow to sessions on this git branch (unknown-branch sessions stay).",
            },
        },
        "required": ["query"],
    },
}

MOVE_SCHEMA: dict[str, Any] = {
    "name": "project_session_move",
    "description": (
        "Move this conversation to a different project. The working directory switches to the "
        "target project's folder, and future history searches will look in the new project. Use "
        "when the user says 'move this to X' or 'this belongs to project Y'."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "project_id": {
                "type": "string",
                "description": (
                    "Target project ID (e.g. 'p_abc123') or slug. Use '' to remove from any project "
                    "(moves to Home). The conversation's working directory changes to the project's "
                    "primary folder."
                ),
            },
        },
        "required": ["project_id"],
    },
}


def json_reply(fn: Callable[[], dict]) -> str:
    """Run ``fn`` and always answer JSON: library errors keep their code; anything
    unexpected is logged and reported as ``internal`` instead of reaching Hermes."""
    try:
        payload = fn()
    except RecallError as exc:
        payload = exc.as_dict()
    except Exception as exc:
        logger.exception("project-history-recall tool failed")
        payload = {"success": False, "error": f"internal error: {type(exc).__name__}: {exc}", "code": "internal"}
    return json.dumps(payload, ensure_ascii=False, default=str)


def _args(args: object) -> dict:
    return args if isinstance(args, dict) else {}


def make_handlers(recall_factory: Callable[[], Any]) -> dict[str, Callable[..., str]]:
    """Handlers bound to a factory, so every call sees the current profile and config."""

    def search(args: dict, **kwargs: Any) -> str:
        a = _args(args)
        return json_reply(lambda: recall_factory().search(
            a.get("query"), session_id=kwargs.get("session_id"), mode=a.get("mode"), limit=a.get("limit"),
            after=a.get("after"), before=a.get("before"), kinds=a.get("kinds"), scope=a.get("scope"),
            branch=a.get("branch")))

    def move(args: dict, **kwargs: Any) -> str:
        a = _args(args)
        return json_reply(lambda: recall_factory().move_session(kwargs.get("session_id"), a.get("project_id")))

    return {"project_history_search": search, "project_session_move": move}


SCHEMAS = {"project_history_search": SEARCH_SCHEMA, "project_session_move": MOVE_SCHEMA}
EMOJI = {"project_history_search": "🧭", "project_session_move": "📦"}
