"""The model's tools, whatever the host: schemas and handlers (JSON in, JSON out, never a traceback).

One definition serves every model face (the Hermes plugin, the MCP server): the
host only says who is asking (a Hermes session id, or the MCP server's folder).
Handlers only parse arguments, call :class:`~project_history_recall.recall.Recall`
and format; rules live in the library.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from project_history_recall.errors import RecallError, bad_argument
from project_history_recall.index.entries import KINDS
from project_history_recall.quoting import UNTRUSTED_NOTICE
from project_history_recall.services import code_history as chain
from project_history_recall.services import updates
from project_history_recall.tokenizer import scrub

logger = logging.getLogger(__name__)

SEARCH_SCHEMA: dict[str, Any] = {
    "name": "project_history_search",
    "description": (
        "Search past conversations in the SAME project as this one. Returns actual messages from "
        "other sessions, with @session: links. Use when the user asks about prior work on this "
        "codebase: 'what did we decide about X', 'where did we leave Y', 'what command did we run'. "
        "Modes: 'hybrid' (default, keyword + semantic), 'keyword' (exact terms), 'semantic' "
        "(similar meaning). Works for English and Chinese. Each result has a confidence (high / medium / "
        "low: how likely its session holds the answer), the session's next best message "
        "('also'), and, when its message asks something, the reply that followed; when message says "
        "'no confident match', tell the user the history may not hold the answer instead of presenting "
        "a low result as one. " + UNTRUSTED_NOTICE
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
                "items": {"type": "string", "enum": list(KINDS)},
                "description": "Only these kinds of entries (default: all).",
            },
            "scope": {
                "type": "string",
                "enum": ["project", "all"],
                "default": "project",
                "description": ("'project' (default): this project only. 'all': every project, only when "
                                "the user enabled allow_cross_project."),
            },
            "branch": {
                "type": "string",
                "description": "Narrow to sessions on this git branch (unknown-branch sessions stay).",
            },
        },
        "required": ["query"],
    },
}

HISTORY_SCHEMA: dict[str, Any] = {
    "name": "project_history",
    "description": (
        "Browse past conversations of THIS project (read-only). Operations: 'session' opens one "
        "session by id, @session: link or unique id prefix (metadata, its messages, parent and child "
        "sessions; with around_message_id a window of messages around one message, e.g. a search hit); "
        "'timeline' lists sessions newest first (filter with after/before; scope 'all' for every "
        "project); 'projects' lists every project with session counts; 'status' reports the history "
        "index (size, freshness, background indexing progress). Use project_history_search to find "
        "something by content. " + UNTRUSTED_NOTICE
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "operation": {
                "type": "string",
                "enum": ["session", "timeline", "projects", "status"],
                "description": "What to do (see the tool description).",
            },
            "session_id": {
                "type": "string",
                "description": "For 'session': the session to open (full id, @session: link, or unique prefix).",
            },
            "around_message_id": {
                "type": "integer",
                "description": "For 'session': show only a window of messages around this message id.",
            },
            "window": {
                "type": "integer",
                "default": 5,
                "description": "For 'session' with around_message_id: messages on each side (default 5, max 20).",
            },
            "scope": {
                "type": "string",
                "enum": ["project", "all"],
                "default": "project",
                "description": ("For 'timeline': 'project' (default) or 'all' projects (only when the user "
                                "enabled allow_cross_project)."),
            },
            "after": {
                "type": "string",
                "description": "For 'timeline': sessions active at or after this time: '2026-11-01', ISO, or '7d'.",
            },
            "before": {"type": "string", "description": "For 'timeline': sessions started before this time."},
            "limit": {"type": "integer", "default": 20, "description": "For 'timeline': max sessions (max 100)."},
            "branch": {
                "type": "string",
                "description": "Narrow to sessions on this git branch (unknown-branch sessions stay).",
            },
        },
        "required": ["operation"],
    },
}

INDEX_SCHEMA: dict[str, Any] = {
    "name": "project_history_index",
    "description": (
        "Build or refresh the index behind project_history_search and project_history. Normally not "
        "needed: the index builds itself on first use and refreshes before every search. Use it when "
        "status says there is no index or it is stale, or with force=true to rebuild from scratch. A "
        "large history continues as a background job: the answer carries a job_id, and "
        "project_history operation=status reports its progress."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "force": {
                "type": "boolean",
                "default": False,
                "description": "Rebuild from scratch (the old index keeps answering until the new one is done).",
            },
        },
    },
}

OPERATIONS = ("session", "timeline", "projects", "status")


def _payload(fn: Callable[[], dict]) -> dict:
    try:
        return fn()
    except RecallError as exc:
        return exc.as_dict()
    except Exception as exc:
        logger.exception("project-history-recall tool failed")
        return {"success": False, "error": f"internal error: {type(exc).__name__}: {exc}", "code": "internal"}


def _dumps(payload: dict) -> str:
    return json.dumps(payload, ensure_ascii=False, default=str)


def arguments_of(args: object) -> dict:
    """The model's arguments as a dict, scrubbed (anything else counts as no arguments)."""
    return _scrubbed(args) if isinstance(args, dict) else {}


def _scrubbed(value: Any) -> Any:
    """Arguments with lone surrogates replaced: a model can send ``\\ud800``, nothing below may see it."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {_scrubbed(k): _scrubbed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrubbed(v) for v in value]
    return value


@dataclass(frozen=True)
class Asker:
    """Who asks, as the host knows it: a Hermes session (its project, itself excluded from
    results) or a folder (an MCP server's project; there is no current session to exclude)."""

    session_id: str | None = None
    cwd: str | None = None


def _history(recall: Any, a: dict, asker: Asker) -> dict:
    operation = a.get("operation")
    if not isinstance(operation, str) or operation.strip().lower() not in OPERATIONS:
        raise bad_argument(f"operation must be one of {', '.join(OPERATIONS)}")
    operation = operation.strip().lower()
    who = {"session_id": asker.session_id, "cwd": asker.cwd}
    if operation == "session":
        return recall.session(a.get("session_id"), around_message_id=a.get("around_message_id"),
                              window=a.get("window"), branch=a.get("branch"), by_model=True, **who)
    if operation == "timeline":
        return recall.timeline(scope=a.get("scope"), after=a.get("after"), before=a.get("before"),
                               branch=a.get("branch"), limit=a.get("limit"), by_model=True, **who)
    if operation == "projects":
        return recall.projects(branch=a.get("branch"), **who)
    return {**recall.status(branch=a.get("branch"), **who), "operation": "status"}


CODE_HISTORY_SCHEMA: dict[str, Any] = {
    "name": "project_code_history",
    "description": (
        "How one file's code evolved across past sessions of THIS project: every recorded edit "
        "(patch, write_file, or a diff shown in a reply), oldest first, each with the user's words "
        "that asked for it, the branch, the enclosing function or class, the patch, and an "
        "@session: link. The last round says whether that version is still in the file. Use for "
        "'why is X like this', 'what did we try for this function', 'which version did we keep'. "
        + UNTRUSTED_NOTICE
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "The file: a path relative to the repo ('src/app/search.py'), or a fragment "
                               "of one ('search.py').",
            },
            "symbol": {"type": "string", "description": "Only edits of this function or class."},
            "query": {"type": "string", "description": "Only edits whose request or patch mention these words."},
            "branch": {
                "type": "string",
                "description": "Only edits made on this git branch (edits on unknown branches stay).",
            },
            "limit": {
                "type": "integer",
                "default": chain.DEFAULT_LIMIT,
                "description": f"Most recent rounds to return (default {chain.DEFAULT_LIMIT}, max {chain.MAX_LIMIT}).",
            },
        },
        "required": ["path"],
    },
}


Handler = Callable[..., str]


def reply_for(recall_factory: Callable[[], Any], fn: Callable[[Any], dict], *, quotes_history: bool = True) -> str:
    """Every tool answer: says how fresh the index was, and carries a pending
    new-version notice (after which a new check may start, in the background); one that
    quotes history says it is untrusted data."""
    recall = None

    def run() -> dict:
        nonlocal recall
        recall = recall_factory()
        return recall.answer(lambda: fn(recall))

    payload = _payload(run)
    if quotes_history and payload.get("success"):
        payload["untrusted_content"] = UNTRUSTED_NOTICE
    if recall is not None:
        updates.after_tool_use(recall.home, recall.settings, payload)
    return _dumps(payload)


def make_handlers(recall_factory: Callable[[], Any], asker_of: Callable[[dict], Asker]) -> dict[str, Handler]:
    """Handlers bound to a factory, so every call sees the current profile and config.
    A handler is called as ``handler(args, **host_context)``; ``asker_of(host_context)``
    says who asks."""

    def reply(fn: Callable[[Any], dict], *, quotes_history: bool = True) -> str:
        return reply_for(recall_factory, fn, quotes_history=quotes_history)

    def search(args: dict, **context: Any) -> str:
        a, who = arguments_of(args), asker_of(context)
        return reply(lambda r: r.search(
            a.get("query"), session_id=who.session_id, cwd=who.cwd, mode=a.get("mode"), limit=a.get("limit"),
            after=a.get("after"), before=a.get("before"), kinds=a.get("kinds"), scope=a.get("scope"),
            branch=a.get("branch"), by_model=True))

    def history(args: dict, **context: Any) -> str:
        return reply(lambda r: _history(r, arguments_of(args), asker_of(context)))

    def index(args: dict, **context: Any) -> str:
        return reply(lambda r: r.request_index(force=arguments_of(args).get("force", False), reason="tool"),
                     quotes_history=False)

    def code_history(args: dict, **context: Any) -> str:
        a, who = arguments_of(args), asker_of(context)
        return reply(lambda r: r.code_history(a.get("path"), session_id=who.session_id, cwd=who.cwd,
                                              symbol=a.get("symbol"), query=a.get("query"),
                                              branch=a.get("branch"), limit=a.get("limit")))

    return {"project_history_search": search, "project_history": history,
            "project_history_index": index, "project_code_history": code_history}


SCHEMAS = {"project_history_search": SEARCH_SCHEMA, "project_history": HISTORY_SCHEMA,
           "project_history_index": INDEX_SCHEMA, "project_code_history": CODE_HISTORY_SCHEMA}
