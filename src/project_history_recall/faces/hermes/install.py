"""``phr install``: make Hermes load the plugin from ``$HERMES_HOME/plugins/``.

For users who prefer a plugin folder to the pip entry point. The folder gets
a manifest and a one-line shim that imports this installed package, and the
plugin is added to ``plugins.enabled`` in ``config.yaml`` (as ``hermes plugins
enable`` would do). The same folder holds the index, so it is a real folder,
not a link into site-packages.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import yaml

from project_history_recall.hermes_home import HermesHome
from project_history_recall.settings import PLUGIN_NAME

SHIM = '''"""Loads the installed project-history-recall package (written by `phr install`)."""

from project_history_recall.faces.hermes.plugin import register  # noqa: F401
'''


def install(home: HermesHome) -> dict:
    folder = home.data_dir
    folder.mkdir(parents=True, exist_ok=True)
    manifest = resources.files(__package__ or "").joinpath("plugin.yaml").read_text(encoding="utf-8")
    (folder / "plugin.yaml").write_text(manifest, encoding="utf-8")
    (folder / "__init__.py").write_text(SHIM, encoding="utf-8")
    enabled = enable_in_config(home.config_path)
    return {"success": True, "plugin_dir": str(folder), "config": str(home.config_path), "enabled": enabled}


def enable_in_config(config_path: Path) -> bool:
    """Add the plugin to ``plugins.enabled`` (and drop it from ``plugins.disabled``)."""
    try:
        data = yaml.safe_load(config_path.read_text(encoding="utf-8")) if config_path.exists() else {}
    except yaml.YAMLError:
        data = None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError(f"{config_path} is not a YAML mapping")
    plugins = data.setdefault("plugins", {})
    if not isinstance(plugins, dict):
        plugins = data["plugins"] = {}
    enabled = plugins.get("enabled")
    enabled = list(enabled) if isinstance(enabled, list) else []
    if PLUGIN_NAME not in enabled:
        enabled.append(PLUGIN_NAME)
    plugins["enabled"] = enabled
    if isinstance(plugins.get("disabled"), list):
        plugins["disabled"] = [p for p in plugins["disabled"] if p != PLUGIN_NAME]
    config_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = config_path.with_name(config_path.name + ".tmp")
    tmp.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    tmp.replace(config_path)
    return True
