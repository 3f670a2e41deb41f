"""Which project a session belongs to (pure: data in, identity out).

A session's project is a function of its working directory and repo root,
computed whenever it is needed — never stored — so moving a session is
nothing more than changing its cwd.

1. Explicit: the Hermes project (``projects.db``) with the *deepest* folder
   that is the session's cwd or repo root, or one of their ancestors; at equal
   depth the cwd's match wins (Hermes's sidebar rule).
2. Auto: the git repo root; outside any repo, the cwd itself.
3. Home: no cwd at all, or a cwd that is a junk root (the user's home, ``/``,
   a temp dir) outside any repo. Home is not a project: it has no scope.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from project_history_recall.paths import depth, is_same_or_under, path_key


@dataclass(frozen=True)
class ProjectFolder:
    path: str
    is_primary: bool = False


@dataclass(frozen=True)
class ExplicitProject:
    """A project from Hermes's projects store (archived ones are left out by the caller)."""

    id: str
    name: str
    slug: str = ""
    primary_path: str | None = None
    folders: tuple[ProjectFolder, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Identity:
    """The resolved project: ``kind`` is ``explicit``, ``auto`` or ``home``."""

    kind: str
    id: str | None = None
    name: str | None = None
    key: str | None = None

    @property
    def is_home(self) -> bool:
        return self.kind == "home"

    @property
    def scope_key(self) -> str:
        """One string that is equal exactly when two identities are the same project."""
        if self.kind == "explicit":
            return f"explicit:{self.id}"
        if self.kind == "auto":
            return f"auto:{self.key}"
        return "home"

    def as_dict(self) -> dict:
        if self.kind == "explicit":
            return {"kind": "explicit", "id": self.id, "name": self.name}
        if self.kind == "auto":
            return {"kind": "auto", "key": self.key, "name": self.name}
        return {"kind": "home"}


HOME = Identity("home")


@dataclass(frozen=True)
class Environment:
    """The facts about the machine that attribution needs, passed in as data."""

    home: str = ""
    junk_roots: tuple[str, ...] = ("/",)

    def junk_keys(self) -> frozenset[str]:
        keys = {path_key(p, self.home) for p in (*self.junk_roots, self.home) if p}
        return frozenset(k for k in keys if k)


def _folder_index(projects: Iterable[ExplicitProject], home: str) -> list[tuple[str, ExplicitProject]]:
    pairs = []
    for project in projects:
        paths = [f.path for f in project.folders] or ([project.primary_path] if project.primary_path else [])
        for folder in paths:
            key = path_key(folder, home)
            if key:
                pairs.append((key, project))
    # Deepest folder first; ties broken by id so the answer never depends on input order.
    pairs.sort(key=lambda kp: (-depth(kp[0]), -len(kp[0]), kp[1].id))
    return pairs


class Resolver:
    """``resolve_project`` with the project folder index built once for many sessions."""

    def __init__(self, projects: Sequence[ExplicitProject], env: Environment | None = None) -> None:
        self.env = env or Environment()
        #: The explicit projects, in the order Hermes lists them.
        self.projects = tuple(projects)
        self._folders = _folder_index(self.projects, self.env.home)
        self._junk = self.env.junk_keys()
        #: Equal for two resolvers that resolve every path the same way (for caches).
        self.key = (tuple((k, p.id, p.name) for k, p in self._folders), tuple(sorted(self._junk)))

    def _deepest(self, key: str) -> tuple[int, ExplicitProject] | None:
        """The project with the deepest folder that is ``key`` or holds it, with that depth."""
        if not key:
            return None
        for folder_key, project in self._folders:
            if is_same_or_under(key, folder_key):
                return depth(folder_key), project
        return None

    def folders_of(self, identity: Identity) -> list[str]:
        """The folders (keys) that make up a project: an explicit project's folders, an auto
        project's root; Home has none."""
        if identity.kind == "explicit":
            return [key for key, project in self._folders if project.id == identity.id]
        return [identity.key] if identity.kind == "auto" and identity.key else []

    def resolve(self, cwd: str | None, repo_root: str | None) -> Identity:
        cwd_key = path_key(cwd, self.env.home)
        root_key = path_key(repo_root, self.env.home)
        # As Hermes's sidebar (``project_tree._project_for_session``): the deepest folder holding
        # the cwd; the repo root's match wins only when it is strictly deeper.
        by_cwd, by_root = self._deepest(cwd_key), self._deepest(root_key)
        best = by_root if by_root is not None and (by_cwd is None or by_root[0] > by_cwd[0]) else by_cwd
        if best is not None:
            project = best[1]
            return Identity("explicit", id=project.id, name=project.name)
        if root_key and root_key not in self._junk:
            return Identity("auto", key=root_key, name=_basename(root_key))
        if cwd_key and cwd_key not in self._junk:
            return Identity("auto", key=cwd_key, name=_basename(cwd_key))
        return HOME


def resolve_project(
    session_row: dict, projects: Sequence[ExplicitProject], env: Environment | None = None
) -> Identity:
    """Resolve one session row (``cwd``, ``git_repo_root``) to its project identity."""
    return Resolver(projects, env).resolve(session_row.get("cwd"), session_row.get("git_repo_root"))


def _basename(key: str) -> str:
    return key.rstrip("/").rsplit("/", 1)[-1] or key
