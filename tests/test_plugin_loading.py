"""Hermes finds and loads the plugin: through the pip entry point, and through the
plugin folder that ``phr install`` writes into ``$HERMES_HOME/plugins/``.

How Hermes 0.19.0 dedups (``hermes_cli.plugins.PluginManager._discover_and_load_inner``):
manifests are gathered bundled -> user dir -> project dir -> entry points and put in a
dict by key, so the LAST source wins.  A user folder ``plugins/project-history-recall/``
(key = manifest ``name``) and the entry point ``project-history-recall`` have the same key,
hence with the package pip-installed the entry point is what loads; the folder alone is
seen (source ``user``) when the entry point is hidden.  ``hermes plugins list`` applies
the same rule.

In-process tests reset Hermes's singletons: ``hermes_cli.plugins._plugin_manager`` is
replaced by a fresh manager, and tools added to ``tools.registry.registry`` during the
test are deregistered afterwards.  Whole-process checks run in subprocesses.
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

try:
    from e2e import harness
except ImportError:
    from tests.e2e import harness  # type: ignore[no-redef]

PLUGIN = "project-history-recall"
TOOLS = {"project_history_search", "project_session_move", "project_history", "project_history_index",
         "project_code_history"}
TOOLSET = "project"
DISCOVER = Path(harness.__file__).resolve().parent / "discover_plugins.py"


def _plugins_list(home: Path) -> list[dict[str, Any]]:
    r = harness.run_command(home, [harness.hermes_executable(), "plugins", "list", "--json", "--no-bundled"])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _discover(home: Path, *hide: str) -> dict[str, Any]:
    cmd = [sys.executable, str(DISCOVER)]
    for name in hide:
        cmd += ["--hide-entry-point", name]
    r = harness.run_command(home, cmd)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _only(items: list[dict[str, Any]], **match: Any) -> dict[str, Any]:
    found = [i for i in items if all(i.get(k) == v for k, v in match.items())]
    assert len(found) == 1, (match, items)
    return found[0]


# -- (a) pip entry point -----------------------------------------------------------


def test_entry_point_is_declared() -> None:
    eps = {
        (ep.name, ep.value)
        for ep in importlib.metadata.entry_points(group="hermes_agent.plugins")
        if ep.name == PLUGIN
    }
    assert eps == {(PLUGIN, "project_history_recall.faces.hermes.plugin")}
    module = next(
        ep for ep in importlib.metadata.entry_points(group="hermes_agent.plugins") if ep.name == PLUGIN
    ).load()
    assert callable(module.register)


def test_hermes_plugins_list_shows_it_enabled(tmp_path: Path) -> None:
    home = harness.make_hermes_home(tmp_path / "hermes", plugins_enabled=[PLUGIN])
    entry = _only(_plugins_list(home), name=PLUGIN)
    assert entry["status"] == "enabled"
    assert entry["source"] == "entrypoint"


def test_not_loaded_until_enabled(tmp_path: Path) -> None:
    home = harness.make_hermes_home(tmp_path / "hermes")
    assert _only(_plugins_list(home), name=PLUGIN)["status"] == "not enabled"
    found = _discover(home)
    plugin = _only(found["plugins"], key=PLUGIN)
    assert plugin["enabled"] is False
    assert not TOOLS & set(found["tools"])


def test_hermes_plugins_enable(tmp_path: Path) -> None:
    home = harness.make_hermes_home(tmp_path / "hermes")
    r = harness.run_command(home, [harness.hermes_executable(), "plugins", "enable", PLUGIN])
    assert r.returncode == 0, r.stdout + r.stderr
    cfg = yaml.safe_load((home / "config.yaml").read_text())
    assert PLUGIN in cfg["plugins"]["enabled"]
    assert _only(_plugins_list(home), name=PLUGIN)["status"] == "enabled"


@pytest.fixture()
def hermes_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Fresh Hermes plugin manager bound to a temp HERMES_HOME; registry cleaned afterwards."""
    import hermes_cli.plugins as hermes_plugins
    from tools.registry import registry

    home = harness.make_hermes_home(tmp_path / "hermes", plugins_enabled=[PLUGIN])
    for key, value in harness.hermes_env(home).items():
        if key.startswith("HERMES_"):
            monkeypatch.setenv(key, value)
    monkeypatch.setattr(hermes_plugins, "_plugin_manager", None)
    before = set(registry.get_all_tool_names())
    try:
        yield hermes_plugins
    finally:
        # only what plugins added: built-in tools register once, at module import
        manager = hermes_plugins._plugin_manager
        added = set(manager._plugin_tool_names) if manager is not None else set()
        for name in added - before:
            registry.deregister(name)


def test_in_process_discovery_registers_tools(hermes_in_process: Any) -> None:
    from hermes_cli.config import load_config
    from hermes_cli.tools_config import _get_platform_tools
    from tools.registry import registry

    hermes_in_process.discover_plugins()
    manager = hermes_in_process.get_plugin_manager()
    loaded = manager._plugins[PLUGIN]
    assert loaded.error is None
    assert loaded.enabled is True
    assert loaded.manifest.source == "entrypoint"
    assert set(loaded.tools_registered) == TOOLS

    for name in TOOLS:
        entry = registry.get_entry(name)
        assert entry is not None, name
        assert entry.toolset == TOOLSET
        assert entry.schema["name"] == name
        assert entry.schema["parameters"]["type"] == "object"

    assert TOOLSET in {ts for ts, _label, _desc in hermes_in_process.get_plugin_toolsets()}
    # plugin toolsets are on by default for the CLI platform, which is what `hermes -z` uses
    assert TOOLSET in _get_platform_tools(load_config(), "cli")

    # a bad call answers JSON, never raises
    out = registry.dispatch("project_history_search", {}, session_id="nope", task_id="t")
    payload = json.loads(out)
    assert payload.get("success") is False or "error" in payload


# -- (b) `phr install` plugin folder ----------------------------------------------


def test_phr_install_writes_a_directory_plugin(tmp_path: Path) -> None:
    home = harness.make_hermes_home(tmp_path / "hermes")  # not enabled yet
    phr = harness.console_script("phr")
    for _ in range(2):  # idempotent
        r = harness.run_command(home, [phr, "install"])
        assert r.returncode == 0, r.stdout + r.stderr

    folder = home / "plugins" / PLUGIN
    assert (folder / "__init__.py").is_file()
    manifest = yaml.safe_load((folder / "plugin.yaml").read_text())
    assert manifest["name"] == PLUGIN

    cfg = yaml.safe_load((home / "config.yaml").read_text())
    assert cfg["plugins"]["enabled"].count(PLUGIN) == 1
    assert cfg["model"]["default"] == harness.FAKE_MODEL  # rest of config.yaml kept

    # With the pip entry point installed too, both sources yield the same key...
    found = _discover(home)
    scanned = {(s["source"], s["key"]) for s in found["scanned"]}
    assert {("user", PLUGIN), ("entrypoint", PLUGIN)} <= scanned
    # ...and the entry point wins the dedup (scanned last): one plugin, tools once.
    plugin = _only(found["plugins"], key=PLUGIN)
    assert plugin["source"] == "entrypoint"
    assert plugin["enabled"] is True and plugin["error"] is None
    assert {n: t["toolset"] for n, t in found["tools"].items() if n in TOOLS} == dict.fromkeys(TOOLS, TOOLSET)
    assert _only(_plugins_list(home), name=PLUGIN)["status"] == "enabled"

    # The folder on its own (entry point hidden) is discovered as a "user" plugin and works.
    alone = _discover(home, PLUGIN)
    assert ("entrypoint", PLUGIN) not in {(s["source"], s["key"]) for s in alone["scanned"]}
    plugin = _only(alone["plugins"], key=PLUGIN)
    assert plugin["source"] == "user"
    assert plugin["enabled"] is True and plugin["error"] is None, plugin
    assert plugin["tools"] == len(TOOLS)
    assert {n: t["toolset"] for n, t in alone["tools"].items() if n in TOOLS} == dict.fromkeys(TOOLS, TOOLSET)
    assert TOOLSET in alone["cli_toolsets"]
