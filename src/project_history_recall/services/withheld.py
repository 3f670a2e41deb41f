"""What a person keeps out of the index: tombstones of forgotten sessions and exclusions.

They live in ``<data dir>/withheld.json``, beside the index and not in it: a ``--force``
rebuild, or a damaged index moved aside and rebuilt, must not bring a forgotten session
back (the index is rebuildable from the source, the person's decision is not)::

    {"forgotten": {"<session id>": <unix time>},
     "exclude": [{"project": "<explicit project id>", "name": "<its name>"}, {"path": "<glob>"}]}

``exclude`` globs from config (``plugins.entries.project-history-recall.exclude``) join
these. A glob matches a session's cwd (also its real path, through symlinks) or its repo
root, and covers what lies under a matched folder; ``*`` also crosses ``/``.
"""

from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from project_history_recall.attribution import Resolver
from project_history_recall.errors import RecallError
from project_history_recall.hermes_home import HermesHome
from project_history_recall.paths import path_key
from project_history_recall.services.consent import atomic_write_json
from project_history_recall.settings import Settings
from project_history_recall.sources import SourceSession
from project_history_recall.sources.withholding import Withholding

WITHHELD_FILE = "withheld.json"


@dataclass(frozen=True)
class Exclusion:
    """One rule: an explicit project (by id) or a path glob."""

    project: str | None = None
    name: str | None = None
    path: str | None = None
    from_config: bool = False

    def as_dict(self) -> dict:
        out: dict = {"project": self.project, "name": self.name} if self.project else {"path": self.path}
        if self.from_config:
            out["from"] = "config"
        return out


@dataclass
class Rules:
    forgotten: dict[str, float] = field(default_factory=dict)
    exclude: list[Exclusion] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"forgotten": dict(sorted(self.forgotten.items())),
                "exclude": [e.as_dict() for e in self.exclude if not e.from_config]}


def withheld_path(data_dir: Path) -> Path:
    return data_dir / WITHHELD_FILE


def load_rules(data_dir: Path) -> Rules:
    """The file's rules; none when it is missing. An unreadable file is an error, not "nothing
    withheld": reading it as empty would index what a person forgot."""
    path = withheld_path(data_dir)
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Rules()
    except OSError as exc:
        raise RecallError(f"{path} cannot be read: {exc}", "withheld_unreadable") from exc
    try:
        data = json.loads(raw)
        forgotten = {str(k): float(v) for k, v in data.get("forgotten", {}).items()}
        exclude = [Exclusion(project=e.get("project"), name=e.get("name"), path=e.get("path"))
                   for e in data.get("exclude", []) if e.get("project") or e.get("path")]
    except (ValueError, TypeError, AttributeError) as exc:
        raise RecallError(f"{path} is not valid (fix or delete it): {exc}", "withheld_unreadable") from exc
    return Rules(forgotten, exclude)


def save_rules(data_dir: Path, rules: Rules) -> None:
    atomic_write_json(withheld_path(data_dir), rules.as_dict())


def token(home: HermesHome, settings: Settings) -> str:
    """Cheap, and different whenever the rules may have changed (the file was replaced, the
    config's globs changed, or projects.db changed the folders of an excluded project)."""
    try:
        stat = withheld_path(home.data_dir).stat()
        mark = f"{stat.st_ino}:{stat.st_mtime_ns}:{stat.st_size}:{home.projects_mtime()}"
    except OSError:
        mark = "-"
    return f"{mark}|{json.dumps(settings.exclude)}" if (mark != "-" or settings.exclude) else ""


def all_exclusions(rules: Rules, settings: Settings) -> list[Exclusion]:
    return [*rules.exclude, *(Exclusion(path=glob, from_config=True) for glob in settings.exclude)]


def glob_matches(key: str, glob: str) -> bool:
    """``key`` (a path key) is matched by ``glob`` or lies under a folder it matches."""
    if not key:
        return False
    pattern = glob.rstrip("/") or "/"
    return fnmatch.fnmatchcase(key, pattern) or fnmatch.fnmatchcase(key, pattern.rstrip("/") + "/*")


def withholding(home: HermesHome, settings: Settings) -> Withholding:
    rules = load_rules(home.data_dir)
    exclusions = all_exclusions(rules, settings)
    if not exclusions:
        return Withholding(frozenset(rules.forgotten))
    globs = [os.path.expanduser(e.path) for e in exclusions if e.path]
    project_ids = {e.project for e in exclusions if e.project}
    resolver = Resolver(home.load_projects(), home.environment()) if project_ids else None

    def excluded(session: SourceSession) -> bool:
        places = [path_key(session.cwd), path_key(session.git_repo_root)]
        if session.cwd and os.path.isdir(session.cwd):
            places.append(path_key(os.path.realpath(session.cwd)))
        if any(glob_matches(place, glob) for place in places for glob in globs):
            return True
        if resolver is None:
            return False
        identity = resolver.resolve(session.cwd, session.git_repo_root)
        return identity.kind == "explicit" and identity.id in project_ids

    return Withholding(frozenset(rules.forgotten), excluded)
