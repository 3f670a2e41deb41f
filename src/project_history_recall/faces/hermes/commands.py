"""``/recall``: the slash command, the same library as the tools, as text for a person.

``/recall`` (= ``status``), ``/recall index [--force]``, ``/recall search <words>``,
``/recall projects``, ``/recall sessions [all]``, ``/recall consent [all|revoke]`` (the user's
consent for a remote embedding provider: only a person types a slash command),
``/recall forget <session id|@session:…> [--undo]`` (never index that session again).

A command handler runs on the host's own thread (the CLI's input loop, the
gateway's event loop), so every subcommand is bounded: reads wait for the
freshness check at most as long as a tool would, and ``index`` waits at most
:data:`COMMAND_WAIT` seconds before handing the work to its background job.
There is no session id here: the asker is the live session when Hermes exposes
one (``HERMES_SESSION_ID``), else the process's working directory.

With ``inject_results: true`` the text is also queued into the conversation as a
notice (``ctx.inject_message``, which only enqueues and so cannot re-enter the
agent loop from inside the handler). Off by default.
"""

from __future__ import annotations

import logging
import os
import shlex
from collections.abc import Callable
from typing import Any

from project_history_recall.errors import RecallError
from project_history_recall.faces import humanize
from project_history_recall.tokenizer import scrub

logger = logging.getLogger(__name__)

NAME = "recall"
DESCRIPTION = "Project history: index status, indexing, search, projects, recent sessions"
ARGS_HINT = ("[status | index [--force] | search <words> | projects | sessions [all] | consent [all|revoke]"
             " | forget <id> [--undo]]")
USAGE = f"usage: /recall {ARGS_HINT}"
COMMAND_WAIT = 5.0
SEARCH_LIMIT = humanize.SEARCH_PREVIEW


def live_session_id() -> str | None:
    """The session this process is serving, when Hermes has told us."""
    try:
        from gateway.session_context import get_session_env

        return get_session_env("HERMES_SESSION_ID") or None
    except Exception:
        return os.environ.get("HERMES_SESSION_ID") or None


def _words(raw_args: str) -> list[str]:
    try:
        return shlex.split(raw_args or "")
    except ValueError:  # an unbalanced quote: take the words as typed
        return (raw_args or "").split()


def run(raw_args: str, recall_factory: Callable[[], Any]) -> tuple[str, Any]:
    """The text for ``/recall <raw_args>``, and the Recall that served it (None on a usage error)."""
    words = _words(scrub(raw_args) if isinstance(raw_args, str) else "")
    sub = words[0].lower() if words else "status"
    rest = words[1:]
    if sub in ("help", "-h", "--help"):
        return USAGE, None
    if sub not in ("status", "index", "search", "projects", "sessions", "consent", "forget"):
        return f"unknown subcommand {sub!r}\n{USAGE}", None
    if sub == "search" and not rest:
        return f"search needs some words\n{USAGE}", None
    targets = [w for w in rest if w != "--undo"]
    if sub == "forget" and len(targets) != 1:
        return f"forget needs one session id\n{USAGE}", None
    recall = recall_factory()
    session_id, cwd = live_session_id(), os.getcwd()
    try:
        if sub == "status":
            return humanize.status(recall.status(session_id=session_id, cwd=cwd)), recall
        if sub == "index":
            force = "--force" in rest or "-f" in rest
            return humanize.index(recall.request_index(force=force, reason="command", budget=COMMAND_WAIT)), recall
        if sub == "search":
            payload = recall.answer(lambda: recall.search(" ".join(rest), session_id=session_id, cwd=cwd,
                                                                     limit=SEARCH_LIMIT))
            return humanize.search(payload), recall
        if sub == "forget":
            return humanize.withheld(recall.forget(targets[0], undo="--undo" in rest)), recall
        if sub == "consent":
            words_ = {w.lower() for w in rest}
            payload = recall.consent(session_id=session_id, cwd=cwd, everywhere="all" in words_,
                                     revoke="revoke" in words_)
            return humanize.consent(payload), recall
        if sub == "projects":
            return humanize.projects(recall.answer(lambda: recall.projects(session_id=session_id, cwd=cwd))), recall
        scope = "all" if any(w.lower() in ("all", "--all") for w in rest) else "project"
        timeline = recall.answer(lambda: recall.timeline(session_id=session_id, cwd=cwd, scope=scope))
        return humanize.timeline(timeline), recall
    except RecallError as exc:
        return humanize.error(exc.as_dict()), recall


def make_handler(ctx: Any, recall_factory: Callable[[], Any]) -> Callable[[str], str]:
    """The ``register_command`` handler: ``fn(raw_args) -> str``, never raises."""

    def handler(raw_args: str = "") -> str:
        try:
            text, recall = run(raw_args, recall_factory)
        except Exception as exc:
            logger.exception("/recall failed")
            return f"/recall failed: {type(exc).__name__}: {exc}"
        if recall is not None and recall.settings.inject_results:
            _inject(ctx, raw_args, text)
        return text

    return handler


def _inject(ctx: Any, raw_args: str, text: str) -> None:
    command = f"/recall {raw_args}".strip()
    try:
        ctx.inject_message(f"Output of {command}, for context (no reply needed):\n{text}", role="notice")
    except Exception:
        logger.debug("/recall: inject_message failed", exc_info=True)
