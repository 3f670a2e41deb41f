"""Hermes plugin entry point: ``register(ctx)`` adds the tools and ``/recall``.

Importing this module stays light: the index, numpy and the embedding model
load on first use, not when Hermes starts.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from project_history_recall.recall import Recall

logger = logging.getLogger(__name__)


def _recall() -> Recall:
    from project_history_recall.recall import Recall

    # Inside Hermes a large embedding backlog is worked off by a background thread.
    return Recall(background_embedding=True)


def check_available() -> bool:
    """Registered whenever a Hermes home exists; a missing state.db is reported per call."""
    from project_history_recall.hermes_home import HermesHome

    return HermesHome.current().root.exists()


def session_start_hook(recall_factory: Callable[[], Recall]) -> Callable[..., None]:
    """``on_session_start`` callback: everything, even reading config, happens off the agent's thread."""

    def run() -> None:
        try:
            recall_factory().kick()
        except Exception:
            logger.debug("project-history-recall: session-start refresh failed", exc_info=True)

    def on_session_start(**_: Any) -> None:
        threading.Thread(target=run, name="phr-session-start", daemon=True).start()

    return on_session_start


def register(ctx: Any) -> None:
    from project_history_recall.faces.hermes import commands
    from project_history_recall.faces.hermes.tools import EMOJI, SCHEMAS, TOOLSET, make_handlers

    for name, handler in make_handlers(_recall).items():
        ctx.register_tool(
            name=name,
            toolset=TOOLSET,
            schema=SCHEMAS[name],
            handler=handler,
            check_fn=check_available,
            description=SCHEMAS[name]["description"],
            emoji=EMOJI.get(name, ""),
        )
    ctx.register_command(commands.NAME, commands.make_handler(ctx, _recall), description=commands.DESCRIPTION,
                         args_hint=commands.ARGS_HINT)
    # Kept fresh with nothing to do: each new session starts a background refresh (never waits).
    ctx.register_hook("on_session_start", session_start_hook(_recall))
