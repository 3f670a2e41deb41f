"""project-history-recall: find what was said and done in earlier sessions of the same project."""

from __future__ import annotations

__version__ = "0.1.0"


def register(ctx):
    """Hermes loads directory plugins by calling ``register`` on the package."""
    from .plugin import register as _register

    _register(ctx)
