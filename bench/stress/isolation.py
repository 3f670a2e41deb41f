"""Isolation as a property: random project layouts and random histories; every search's
every result belongs to the asking session's project.

The expected project of each session is computed here from the layout the generator
built (which folders are repos, which are worktrees of which repo, where each symlink
points, which folders were deleted, which projects hold which folders) — never by
calling the plugin's resolver or Hermes's git probe. The rule it applies is the
documented one (``docs/architecture.md``, ``attribution.py``): the Hermes project with
the deepest folder that holds the session's cwd or its repo root, the cwd's at equal
depth; else the repo (a
linked worktree folds into its main repo); else the cwd itself; Home for no cwd or a
junk root.
"""

from __future__ import annotations

import os
import posixpath
import random
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import world

SHARED = "zebrafish"


@dataclass
class Folder:
    path: str  # as sessions record it (lexical, under the layout root)
    repo: str | None  # the main repo root holding it (real path), None outside any repo
    real: str  # where it really is (a symlink resolved)
    exists: bool = True


@dataclass
class SessionSpec:
    id: str
    cwd: str | None
    recorded_root: str | None = None
    archived: bool = False
    hidden: bool = False
    token: str = ""
    moved_from: str | None = None


@dataclass
class Layout:
    root: Path
    home: Path
    folders: dict[str, Folder] = field(default_factory=dict)
    projects: list[tuple[str, str, list[str]]] = field(default_factory=list)  # (id, name, folders)
    sessions: list[SessionSpec] = field(default_factory=list)
    junk: tuple[str, ...] = ()

    def folder_of(self, path: str) -> Folder | None:
        return self.folders.get(posixpath.normpath(path))


def _key(path: str | None) -> str:
    if not path:
        return ""
    text = posixpath.normpath(path.strip())
    if text.startswith("//"):
        text = "/" + text.lstrip("/")
    return text.rstrip("/") or "/"


def _under(child: str, ancestor: str) -> bool:
    return bool(child and ancestor) and (child == ancestor or ancestor == "/" or child.startswith(ancestor + "/"))


def _depth(key: str) -> int:
    return 0 if key in ("", "/") else key.strip("/").count("/") + 1


def expected_root(layout: Layout, spec: SessionSpec) -> str | None:
    if spec.cwd is None:
        return spec.recorded_root
    folder = layout.folder_of(spec.cwd)
    if folder is not None and folder.exists:
        return folder.repo
    if folder is None and _key(spec.cwd) in layout.junk:
        return None  # the user's home or /tmp: they exist and are no repository (checked by the generator)
    if spec.recorded_root:
        return spec.recorded_root
    # Gone, nothing recorded: the nearest existing folder decides (never a junk root).
    current = _key(spec.cwd)
    while True:
        parent = posixpath.dirname(current)
        if parent == current or parent in layout.junk:
            return None
        current = parent
        known = layout.folders.get(current)
        if known is not None and known.exists:
            return known.repo
        if known is None and os.path.isdir(current):
            return None  # an existing folder outside the layout (above the root): no repo


def _deepest_project(layout: Layout, key: str) -> tuple[int, str, str] | None:
    """(depth, id, name) of the project with the deepest folder that is ``key`` or holds it."""
    found = [(_depth(_key(folder)), pid, name) for pid, name, folders in layout.projects
             for folder in folders if _under(key, _key(folder))]
    return max(found, default=None)


def expected_identity(layout: Layout, spec: SessionSpec) -> dict[str, Any]:
    cwd_key, root_key = _key(spec.cwd), _key(expected_root(layout, spec))
    by_cwd, by_root = _deepest_project(layout, cwd_key), _deepest_project(layout, root_key)
    # At equal depth the cwd's project wins (a symlink from one project's folder into another's repo).
    best = by_root if by_root is not None and (by_cwd is None or by_root[0] > by_cwd[0]) else by_cwd
    if best is not None:
        return {"kind": "explicit", "id": best[1], "name": best[2]}
    if root_key and root_key not in layout.junk:
        return {"kind": "auto", "key": root_key, "name": root_key.rstrip("/").rsplit("/", 1)[-1] or root_key}
    if cwd_key and cwd_key not in layout.junk:
        return {"kind": "auto", "key": cwd_key, "name": cwd_key.rstrip("/").rsplit("/", 1)[-1] or cwd_key}
    return {"kind": "home"}


def _scope_key(identity: dict) -> str:
    return {"explicit": f"explicit:{identity.get('id')}", "auto": f"auto:{identity.get('key')}"}.get(
        identity["kind"], "home")


# -- generating a layout ---------------------------------------------------------------------------


def generate(root: Path, rng: random.Random, max_sessions: int = 28) -> Layout:
    from hermes_cli import projects_db
    from hermes_state import SessionDB

    if root.exists():
        shutil.rmtree(root)
    base = Path(os.path.realpath(root)) / "w"
    base.mkdir(parents=True)
    home = Path(os.path.realpath(root)) / "hermes"
    layout = Layout(root, home, junk=tuple(_key(p) for p in ("/", str(Path.home()), tempfile.gettempdir(), "/tmp",
                                                             "/var/tmp", str(home))))
    for outside in (str(Path.home()), "/tmp"):
        probe = subprocess.run(["git", "-C", outside, "rev-parse", "--show-toplevel"], capture_output=True)
        if probe.returncode == 0:
            raise RuntimeError(f"{outside} is inside a git repository: the expected projects would be wrong")

    def add(path: Path, repo: str | None, real: Path | None = None) -> str:
        key = _key(str(path))
        layout.folders[key] = Folder(key, repo, _key(str(real or path)))
        return key

    add(base, None)
    repos: list[Path] = []
    for i in range(rng.randint(1, 3)):
        repo = world.git_init(base / f"r{i}")
        repos.append(repo)
        add(repo, str(repo))
        for j in range(rng.randint(0, 2)):
            sub = repo / f"s{j}" / ("deep" if rng.random() < 0.4 else "")
            sub.mkdir(parents=True, exist_ok=True)
            add(repo / f"s{j}", str(repo))
            add(sub, str(repo))
        if rng.random() < 0.5:
            tree = world.add_worktree(repo, base / f"r{i}-wt", f"feature-{i}")
            add(tree, str(repo))
            (tree / "pkg").mkdir()
            add(tree / "pkg", str(repo))
        if rng.random() < 0.4:  # a sibling whose name extends the repo's: not inside it
            (base / f"r{i}-extra").mkdir()
            add(base / f"r{i}-extra", None)
    for i in range(rng.randint(1, 2)):
        plain = base / f"p{i}"
        (plain / "a").mkdir(parents=True)
        add(plain, None)
        add(plain / "a", None)
        if rng.random() < 0.35:  # a repo nested in a plain folder
            inner = world.git_init(plain / "inner")
            add(inner, str(inner))
    if rng.random() < 0.6:  # a symlink from one folder into another
        sources = [f for f in layout.folders.values() if f.exists and f.path != _key(str(base))]
        target = rng.choice(sources)
        holder = rng.choice(sources)
        link = Path(holder.path) / f"link{rng.randrange(100)}"
        if not link.exists():
            link.symlink_to(target.path, target_is_directory=True)
            layout.folders[_key(str(link))] = Folder(_key(str(link)), target.repo, target.real)
    gone: list[str] = []
    if rng.random() < 0.5:  # a folder that will be deleted after its session was recorded
        parent = rng.choice([f for f in layout.folders.values() if f.exists and "link" not in f.path])
        doomed = Path(parent.path) / "gone-soon"
        doomed.mkdir(exist_ok=True)
        add(doomed, parent.repo)
        gone.append(_key(str(doomed)))

    # Explicit projects over random folders (never two projects on one folder).
    candidates = [f.path for f in layout.folders.values() if "link" not in f.path and "gone" not in f.path]
    rng.shuffle(candidates)
    taken: set[str] = set()
    projects_db_path = home / "projects.db"
    home.mkdir(parents=True, exist_ok=True)
    getattr(projects_db, "_INITIALIZED_PATHS", set()).discard(str(projects_db_path))
    with projects_db.connect_closing(projects_db_path) as conn:
        for n in range(rng.randint(0, 3)):
            folders = [f for f in candidates[n * 2 : n * 2 + rng.randint(1, 2)] if f not in taken]
            if not folders:
                continue
            taken.update(folders)
            name = f"Proj{n}"
            pid = projects_db.create_project(conn, name=name, folders=folders)
            layout.projects.append((pid, name, folders))

    # Sessions.
    places: list[str | None] = [f.path for f in layout.folders.values()]
    places += [None, str(Path.home()), "/tmp"]
    db = SessionDB(db_path=home / "state.db")
    clock = 1_767_000_000.0
    try:
        for n in range(rng.randint(8, max_sessions)):
            cwd = rng.choice(places)
            if cwd and rng.random() < 0.15:  # the same folder, spelled oddly
                cwd = rng.choice([cwd + "/", cwd.replace("/w/", "/w/./", 1), cwd.replace("/w/", "//w//", 1)])
            spec = SessionSpec(f"sess-{n:03d}", cwd, token=f"uq{rng.randrange(10**9):09d}x")
            folder = layout.folder_of(cwd) if cwd else None
            if folder is not None and folder.repo and rng.random() < 0.7:
                spec.recorded_root = folder.repo
            roll = rng.random()
            spec.archived = roll < 0.08
            spec.hidden = 0.08 <= roll < 0.14
            db.create_session(spec.id, "subagent" if spec.hidden else "cli", cwd=cwd)
            if cwd and spec.recorded_root:
                db.update_session_cwd(spec.id, cwd, git_branch="main", git_repo_root=spec.recorded_root)
            for k in range(rng.randint(1, 3)):
                clock += 30
                db.append_message(spec.id, "user" if k % 2 == 0 else "assistant",
                                  f"{SHARED} notes {spec.token} part {k}", timestamp=clock)
            if spec.archived:
                db.set_session_archived(spec.id, True)
            if rng.random() < 0.15:  # moved to another folder (Hermes keeps a recorded root it is not given)
                target = rng.choice([p for p in places if p])
                target_folder = layout.folder_of(target)
                new_root = target_folder.repo if target_folder is not None else None
                db.update_session_cwd(spec.id, target, git_repo_root=new_root)
                spec.moved_from, spec.cwd = spec.cwd, target
                spec.recorded_root = new_root or spec.recorded_root
            layout.sessions.append(spec)
    finally:
        db.close()
    for key in gone:
        shutil.rmtree(key, ignore_errors=True)
        layout.folders[key].exists = False
    world.write_config(home)
    return layout


# -- checking ------------------------------------------------------------------------------------


@dataclass
class Report:
    layouts: int = 0
    sessions: int = 0
    cases: int = 0
    violations: int = 0
    label_errors: int = 0
    missed: int = 0
    examples: list[dict] = field(default_factory=list)
    seconds: float = 0.0

    def note(self, kind: str, detail: dict) -> None:
        if len(self.examples) < 12:
            self.examples.append({"kind": kind, **detail})


def check_layout(layout: Layout, rng: random.Random, report: Report, queries_per_session: int = 2) -> None:
    from project_history_recall.recall import Recall

    recall = Recall(layout.home)
    recall.refresh()
    identities = {s.id: expected_identity(layout, s) for s in layout.sessions}
    keys = {sid: _scope_key(i) for sid, i in identities.items()}
    visible = {s.id for s in layout.sessions if not (s.archived or s.hidden)}
    by_id = {s.id: s for s in layout.sessions}
    report.layouts += 1
    report.sessions += len(layout.sessions)
    for spec in layout.sessions:
        mine = keys[spec.id]
        peers = set() if mine == "home" else {s for s in visible if keys[s] == mine and s != spec.id}
        others = [s for s in layout.sessions if s.id != spec.id]
        asks = [(SHARED, "project")]
        for _ in range(queries_per_session - 1):
            if others:
                asks.append((rng.choice(others).token, "project"))
        asks.append((SHARED, "all"))
        for query, scope in asks:
            reply = recall.search(query, session_id=spec.id, mode="keyword", limit=10, scope=scope)
            report.cases += 1
            got = [r["session_id"] for r in reply.get("results", [])]
            context = {"layout": str(layout.root), "asker": spec.id, "asker_cwd": spec.cwd, "query": query,
                       "scope": scope, "expected": identities[spec.id]}
            if scope == "all":
                for r in reply.get("results", []):
                    want = identities.get(r["session_id"])
                    if r["session_id"] not in visible:
                        report.violations += 1
                        report.note("hidden_or_archived_returned", {**context, "session": r["session_id"]})
                    elif r.get("project") != want:
                        report.label_errors += 1
                        report.note("wrong_project", {**context, "session": r["session_id"],
                                                      "session_cwd": by_id[r["session_id"]].cwd,
                                                      "labelled": r.get("project"), "want": want})
                continue
            outside = [sid for sid in got if sid not in peers]
            if outside:
                report.violations += 1
                report.note("outside_scope", {**context, "returned": outside,
                                              "their_cwd": [by_id[s].cwd for s in outside if s in by_id],
                                              "their_expected": [identities.get(s) for s in outside]})
            wanted = peers if query == SHARED else {s for s in peers if by_id[s].token == query}
            if len(wanted) <= 10 and set(got) != wanted and not outside:
                report.missed += 1
                report.note("missed", {**context, "missing": sorted(wanted - set(got)),
                                       "missing_cwd": [by_id[s].cwd for s in wanted - set(got)]})


def run(work: Path | None, *, layouts: int, seed: int = 4, max_sessions: int = 28) -> dict[str, Any]:
    """``layouts`` random layouts (seeded); the work folder must not be inside a git repository."""
    started = time.monotonic()
    owned = work is None
    base = Path(tempfile.mkdtemp(prefix="phr-isolation-")) if work is None else work
    report = Report()
    try:
        for n in range(layouts):
            rng = random.Random(f"isolation:{seed}:{n}")
            layout = generate(base / f"layout-{n:04d}", rng, max_sessions)
            check_layout(layout, rng, report)
            shutil.rmtree(layout.root, ignore_errors=True)
    finally:
        if owned:
            shutil.rmtree(base, ignore_errors=True)
    report.seconds = round(time.monotonic() - started, 1)
    data = dict(report.__dict__)
    data["seed"] = seed
    return data
