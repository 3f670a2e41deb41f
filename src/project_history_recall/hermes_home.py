"""The Hermes home this plugin serves: where its files are, its config and its projects.

Everything is read-only. ``projects.db`` is opened with ``mode=ro`` and handed
to Hermes's own ``projects_db.list_projects`` (which only SELECTs), because
``projects_db.connect()`` would run schema DDL on the user's file.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from project_history_recall.attribution import Environment, ExplicitProject, ProjectFolder
from project_history_recall.settings import PLUGIN_NAME, Settings


@dataclass(frozen=True)
class HermesHome:
    root: Path

    @classmethod
    def current(cls) -> HermesHome:
        """The active profile's home, as Hermes itself resolves it."""
        try:
            from hermes_constants import get_hermes_home

            return cls(Path(get_hermes_home()))
        except Exception:
            return cls(Path(os.environ.get("HERMES_HOME") or Path.home() / ".hermes"))

    @property
    def state_db(self) -> Path:
        return self.root / "state.db"

    @property
    def projects_db(self) -> Path:
        return self.root / "projects.db"

    @property
    def config_path(self) -> Path:
        return self.root / "config.yaml"

    @property
    def env_path(self) -> Path:
        return self.root / ".env"

    @property
    def data_dir(self) -> Path:
        """The plugin's own folder: index, consent, jobs. One per Hermes profile."""
        return self.root / "plugins" / PLUGIN_NAME

    @property
    def profile(self) -> str:
        return self.root.name if self.root.parent.name == "profiles" else "default"

    def load_config(self) -> dict[str, Any]:
        try:
            data = yaml.safe_load(self.config_path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError, UnicodeDecodeError):
            return {}
        return data if isinstance(data, dict) else {}

    def settings(self) -> Settings:
        return Settings.from_config(self.load_config())

    def env_value(self, name: str) -> str | None:
        """A secret from the process environment, else from ``$HERMES_HOME/.env``."""
        if os.environ.get(name):
            return os.environ[name]
        try:
            from dotenv import dotenv_values

            return dotenv_values(self.env_path).get(name) or None
        except Exception:
            return None

    def projects_mtime(self) -> tuple[int, int]:
        try:
            stat = self.projects_db.stat()
        except OSError:
            return (0, 0)
        wal = self.projects_db.with_name(self.projects_db.name + "-wal")
        wal_mtime = wal.stat().st_mtime_ns if wal.exists() else 0
        return (stat.st_mtime_ns, stat.st_size + wal_mtime)

    def load_projects(self) -> list[ExplicitProject]:
        """Hermes's explicit projects (not archived); none when projects.db is missing."""
        if not self.projects_db.is_file():
            return []
        try:
            from hermes_cli import projects_db

            conn = sqlite3.connect(f"{self.projects_db.resolve().as_uri()}?mode=ro", uri=True, timeout=1.0)
            conn.row_factory = sqlite3.Row
            try:
                projects = projects_db.list_projects(conn)
            finally:
                conn.close()
        except Exception:
            return []
        return [
            ExplicitProject(
                id=p.id,
                name=p.name,
                slug=p.slug,
                primary_path=p.primary_path,
                folders=tuple(ProjectFolder(f.path, bool(f.is_primary)) for f in p.folders),
            )
            for p in projects
        ]

    def environment(self) -> Environment:
        home = str(Path.home())
        junk = ("/", home, tempfile.gettempdir(), "/tmp", "/var/tmp", str(self.root))
        return Environment(home=home, junk_roots=tuple(dict.fromkeys(junk)))
