"""Hermes plugin entry point: ``register(ctx)`` adds the tools and ``/recall``.

Importing this module stays light: the index, numpy and the embedding model
load on first use, not when Hermes starts.
"""

from __future__ import annotations

from typing import Any


def _recall():
    from .recall import Recall

    return Recall()


def check_available() -> bool:
    """Registered whenever a Hermes home exists; a missing state.db is reported per call."""
    from .host import HermesHome

    return HermesHome.current().root.exists()


def register(ctx: Any) -> None:
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
