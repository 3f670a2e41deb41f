"""Plugin settings, read from Hermes's ``config.yaml`` under
``plugins.entries.project-history-recall`` (Hermes's own place for plugin settings)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from project_history_recall.embeddings.base import EmbeddingSettings, ProviderError, parse_settings

PLUGIN_NAME = "project-history-recall"


@dataclass(frozen=True)
class Settings:
    embedding: EmbeddingSettings = field(default_factory=lambda: EmbeddingSettings(enabled=True))
    embedding_error: str | None = None  # a config block we could not use: semantic search is unavailable
    auto_build: bool = True
    auto_index: bool = True
    inject_results: bool = False
    chain_block: bool = False
    update_check: bool = True
    update_check_interval_hours: float = 6.0
    home_cwd: str = ""  # Hermes's terminal.cwd: where a session moved to Home goes
    #: May the model's tools read other projects (``scope: "all"``, another project's session)?
    #: A person's faces (``/recall``, ``phr``) always may.
    allow_cross_project: bool = False
    #: Globs over a session's cwd and repo root (a folder's glob covers what is under it):
    #: those sessions are never indexed nor embedded (``phr exclude`` adds its own beside these).
    exclude: tuple[str, ...] = ()
    #: Which agents' histories are read (``hermes``, ``claude-code``, ``codex``); None: every
    #: one whose folder exists.
    sources: tuple[str, ...] | None = None

    @classmethod
    def from_config(cls, config: dict[str, Any] | None) -> Settings:
        config = config if isinstance(config, dict) else {}
        entries = _section(_section(config, "plugins"), "entries")
        block = _section(entries, PLUGIN_NAME)
        embedding, embedding_error = _embedding(_section(block, "embedding"))
        return cls(
            embedding=embedding,
            embedding_error=embedding_error,
            auto_build=_bool(block.get("auto_build"), True),
            auto_index=_bool(block.get("auto_index"), True),
            inject_results=_bool(block.get("inject_results"), False),
            chain_block=_bool(block.get("chain_block"), False),
            update_check=_bool(block.get("update_check"), True),
            update_check_interval_hours=float(
                _int(block.get("update_check_interval_hours"), 6, 0, 24 * 365)),
            home_cwd=_str(_section(config, "terminal").get("cwd"), ""),
            allow_cross_project=_bool(block.get("allow_cross_project"), False),
            exclude=_strings(block.get("exclude")),
            sources=_strings(block.get("sources")) if "sources" in block else None,
        )


def _embedding(block: dict[str, Any]) -> tuple[EmbeddingSettings, str | None]:
    """The validated embedding block; semantic search is on by default (the local model sends nothing)."""
    raw = {**block, "enabled": _bool(block.get("enabled"), True)}
    try:
        return parse_settings(raw), None
    except ProviderError as exc:
        return EmbeddingSettings(enabled=raw["enabled"]), exc.message


def _section(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _str(value: Any, default: str) -> str:
    return value.strip() if isinstance(value, str) and value.strip() else default


def _strings(value: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    return tuple(item.strip() for item in items if isinstance(item, str) and item.strip())


def _bool(value: Any, default: bool) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"true", "yes", "on", "1", "false", "no", "off", "0"}:
        return value.strip().lower() in {"true", "yes", "on", "1"}
    return default


def _int(value: Any, default: int, low: int, high: int) -> int:
    if isinstance(value, bool):
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        return default
    return max(low, min(high, number))
