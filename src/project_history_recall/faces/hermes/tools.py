"""The Hermes glue for the model's tools: the asker is Hermes's session, plus the one
Hermes-only tool (moving a Hermes session to another project). Schemas and handlers of
the shared tools live in :mod:`project_history_recall.faces.tools`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from project_history_recall.faces import tools
from project_history_recall.faces.tools import Asker
from project_history_recall.tokenizer import scrub

TOOLSET = "project"

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



def _session(context: dict) -> str | None:
    value = context.get("session_id")
    return scrub(value) if isinstance(value, str) else None


def _asker(context: dict) -> Asker:
    return Asker(session_id=_session(context))


def make_handlers(recall_factory: Callable[[], Any]) -> dict[str, tools.Handler]:
    """The shared handlers asked as Hermes's current session, and the move."""
    handlers = tools.make_handlers(recall_factory, _asker)

    def move(args: dict, **context: Any) -> str:
        return tools.reply_for(recall_factory, lambda r: r.move_session(_session(context),
                                                                         tools.arguments_of(args).get("project_id")),
                               quotes_history=False)

    return {**handlers, "project_session_move": move}


SCHEMAS = {**tools.SCHEMAS, "project_session_move": MOVE_SCHEMA}
EMOJI = {"project_history_search": "🧭", "project_session_move": "📦", "project_history": "📜",
         "project_history_index": "🗂️", "project_code_history": "🧬"}
