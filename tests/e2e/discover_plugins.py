"""Run Hermes plugin discovery in a fresh process and print what it found, as JSON.

    HERMES_HOME=... python tests/e2e/discover_plugins.py [--hide-entry-point NAME ...]

``--hide-entry-point NAME`` removes that ``hermes_agent.plugins`` entry point before
discovery, to see what a directory plugin (``$HERMES_HOME/plugins/<name>/``) does on its
own: ``PluginManager`` dedups manifests by key and the LAST source wins, and entry points
are scanned last (bundled -> user -> project -> entrypoint), so an installed entry point
with the same key always shadows a user directory plugin.

Output keys: ``plugins`` (``PluginManager.list_plugins()``), ``scanned`` (every manifest
found per source before dedup), ``tools`` (plugin tool name -> toolset / schema name),
``plugin_toolsets`` and ``cli_toolsets`` (what ``hermes -z`` would enable for platform cli).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import sys


def _hide_entry_points(names: set[str]) -> None:
    """Make ``importlib.metadata.entry_points()`` forget some ``hermes_agent.plugins`` entries."""
    if not names:
        return
    seen: set[tuple[str, str, str]] = set()
    everything = []
    for dist in importlib.metadata.distributions():
        for ep in dist.entry_points:
            ident = (ep.group, ep.name, ep.value)
            if ident in seen or (ep.group == "hermes_agent.plugins" and ep.name in names):
                continue
            seen.add(ident)
            everything.append(ep)
    kept = importlib.metadata.EntryPoints(everything)

    def filtered(**params: str) -> importlib.metadata.EntryPoints:
        return kept.select(**params) if params else kept  # type: ignore[arg-type]

    importlib.metadata.entry_points = filtered  # type: ignore[assignment]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hide-entry-point", action="append", default=[])
    args = ap.parse_args(argv)
    _hide_entry_points(set(args.hide_entry_point))

    from hermes_cli.config import load_config
    from hermes_cli.plugins import get_plugin_manager, get_plugin_toolsets
    from hermes_constants import get_hermes_home
    from tools.registry import registry

    manager = get_plugin_manager()
    scanned = []
    for source, manifests in (
        ("user", manager._scan_directory(get_hermes_home() / "plugins", source="user")),
        ("entrypoint", manager._scan_entry_points()),
    ):
        for m in manifests:
            scanned.append({"source": source, "key": m.key or m.name, "name": m.name, "path": m.path})

    manager.discover_and_load()
    tools = {}
    for name in sorted(manager._plugin_tool_names):
        entry = registry.get_entry(name)
        if entry is not None:
            tools[name] = {"toolset": entry.toolset, "schema_name": (entry.schema or {}).get("name")}

    from hermes_cli.tools_config import _get_platform_tools

    out = {
        "plugins": [p for p in manager.list_plugins() if p["source"] != "bundled"],
        "scanned": scanned,
        "tools": tools,
        "plugin_toolsets": [ts for ts, _label, _desc in get_plugin_toolsets()],
        "cli_toolsets": sorted(_get_platform_tools(load_config(), "cli")),
    }
    json.dump(out, sys.stdout, indent=1, default=str)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
