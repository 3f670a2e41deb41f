"""Which git repo a folder is in, asked once and re-asked when the answer may have changed.

Asking git costs a subprocess (milliseconds), so the answer for each cwd is kept in the
index's ``probes`` table. It goes stale when the folder is re-pointed or re-shaped under
the index: a symlink retargeted to another repo, a folder that became its own repo
(``git init``), a repo whose ``.git`` was removed. All of them change what
:func:`folder_marker` sees — the folder's real path and the identity of the nearest
``.git`` above it — which costs a few ``stat`` calls, so every refresh can compare it.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType

Probe = Callable[[str], tuple[str | None, str | None]]


def _hermes_git() -> ModuleType | None:
    """Hermes's own git probe (``tui_gateway.git_probe``), or None when Hermes is absent or
    broken: then no folder is in a repo, as for a folder git does not know."""
    try:
        from tui_gateway import git_probe as hermes_git
    except Exception:
        return None
    return hermes_git


def git_probe(cwd: str) -> tuple[str | None, str | None]:
    """Repo root (linked worktrees folded into the main repo) and branch, via Hermes's own probe."""
    root = git_repo_root(cwd)
    hermes_git = _hermes_git()
    if root is None or hermes_git is None:
        return root, None
    try:
        return root, hermes_git.branch(cwd) or None
    except Exception:
        return root, None


def git_repo_root(cwd: str) -> str | None:
    """:func:`git_probe`'s repo root alone (Hermes keeps it for the life of the process): no
    ``git`` subprocess for the branch."""
    hermes_git = _hermes_git()
    if not cwd or hermes_git is None or not os.path.isdir(cwd):
        return None
    try:
        return hermes_git.common_repo_root(cwd) or None
    except Exception:
        return None


def repo_root_probe(probe: Probe) -> Callable[[str], str | None]:
    """What ``probe`` says a folder's repo root is, without its branch when it is git's."""
    return git_repo_root if probe is git_probe else (lambda cwd: probe(cwd)[0])


def _forget_hermes_roots() -> None:
    """Hermes's probe keeps a found repo root for the life of the process: drop it before
    asking about a folder that changed."""
    hermes_git = _hermes_git()
    if hermes_git is None:
        return
    try:
        hermes_git.invalidate()
    except Exception:
        return


def folder_marker(cwd: str) -> str:
    """The folder's own identity (device, inode: a retargeted symlink names another folder)
    and the nearest ``.git`` above it on its path (folder, device, inode).

    A ``.git`` file (a linked worktree) counts like a directory. Commits inside a ``.git``
    do not change it: they change no repo root. The walk follows the path as written, not
    its real path (``realpath`` costs one ``lstat`` per component, on every check): a
    repo made in a folder that is only an ancestor of a symlink's target goes unseen
    until ``--force``."""
    st = os.stat(cwd)
    folder = cwd
    while True:
        try:
            git = os.lstat(os.path.join(folder, ".git"))
        except OSError:
            parent = os.path.dirname(folder)
            if parent == folder:
                return f"{st.st_dev}:{st.st_ino}"
            folder = parent
            continue
        return f"{st.st_dev}:{st.st_ino}\0{folder}\0{git.st_dev}:{git.st_ino}"


def cached_probe(conn: sqlite3.Connection, cwd: str, probe: Probe) -> tuple[str | None, str | None]:
    """The repo root and branch of an existing folder: the cached answer, else a new probe."""
    row = conn.execute("SELECT repo_root, branch FROM probes WHERE cwd = ?", (cwd,)).fetchone()
    if row is not None:
        return row["repo_root"], row["branch"]
    return _probe_and_store(conn, cwd, probe)


def probed_ahead(conn: sqlite3.Connection, cwds: Iterable[str | None], probe: Probe) -> Probe:
    """``probe``, answering at once for those of ``cwds`` that exist and have no cached answer
    yet: they are probed side by side first. A first build asks git about a few dozen folders,
    one subprocess wait after another otherwise (0.2 s at M)."""
    folders = [cwd for cwd in dict.fromkeys(cwds) if cwd]
    if len(folders) < 2:  # a Hermes turn: one session
        return probe
    cached = {row[0] for row in conn.execute("SELECT cwd FROM probes")}
    missing = [cwd for cwd in folders if cwd not in cached and os.path.isdir(cwd)]
    if len(missing) < 2:
        return probe
    with ThreadPoolExecutor(min(8, len(missing))) as pool:
        answers = dict(zip(missing, pool.map(probe, missing), strict=True))
    return lambda cwd: answers[cwd] if cwd in answers else probe(cwd)


def _probe_and_store(conn: sqlite3.Connection, cwd: str, probe: Probe) -> tuple[str | None, str | None]:
    repo_root, branch = probe(cwd)
    conn.execute("INSERT OR REPLACE INTO probes(cwd, repo_root, branch, probed_at, folder_marker) "
                 "VALUES (?, ?, ?, ?, ?)", (cwd, repo_root, branch, time.time(), folder_marker(cwd)))
    return repo_root, branch


def probe_markers(conn: sqlite3.Connection) -> dict[str, str]:
    """``{cwd: folder marker}`` of every cached probe (``""`` for one made before markers)."""
    return {row[0]: row[1] or "" for row in conn.execute("SELECT cwd, folder_marker FROM probes")}


def moved(markers: dict[str, str]) -> list[str]:
    """The probed cwds whose folder no longer looks as it did when it was probed (a folder
    that is gone is left alone: its sessions keep the answer they had)."""
    stale = []
    for cwd, marker in markers.items():
        try:
            if folder_marker(cwd) != marker:
                stale.append(cwd)
        except OSError:
            continue
    return stale


def reprobe(conn: sqlite3.Connection, cwds: list[str], probe: Probe) -> dict[str, tuple[str | None, str | None]]:
    """Probe ``cwds`` again and keep the new answers; returns those that changed."""
    _forget_hermes_roots()
    changed = {}
    for cwd in cwds:
        old = conn.execute("SELECT repo_root, branch FROM probes WHERE cwd = ?", (cwd,)).fetchone()
        new = _probe_and_store(conn, cwd, probe)
        if old is None or tuple(old) != new:
            changed[cwd] = new
    return changed
