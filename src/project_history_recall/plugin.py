"""Hermes plugin entry point: ``register(ctx)`` adds the tools and ``/recall``.

Importing this module stays light: the index, numpy and the embedding model
load on first use, not when Hermes starts.
"""

from __future__ import annotations

from typing import Any


def _recall():
    from .recall import Recall

    # Inside Hermes a large embedding backlog is worked off by a background thread.
    return Recall(background_embedding=True)


def check_available() -> bool:
    """Registered whenever a Hermes home exists; a missing state.db is reported per call."""
    from .host import HermesHome

    return HermesHome.current().root.exists()


def register(ctx: Any) -> None:
    from . import commands
    from .freshness import session_start_hook
    from .tools import EMOJI, SCHEMAS, TOOLSET, make_handlers

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
