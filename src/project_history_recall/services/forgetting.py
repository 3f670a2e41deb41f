"""A person's forget and exclude (``phr forget``, ``phr exclude``, ``/recall forget``).

Forgetting writes a tombstone (:mod:`.withheld`) and refreshes: the index then no longer
sees the session, so its entries, vectors and edit rounds go the way of a session Hermes
deleted, and no refresh (``--force`` included) brings it back. A forgotten session takes
its descendants with it (continuations after compression, delegated subagents — they carry
the same conversation on), also ones created later; ``--undo`` on it brings them all back.
Only a person can do this: no model-facing tool forgets or excludes. Hermes's ``state.db``
is read, never written.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from pathlib import Path

from project_history_recall.errors import RecallError, bad_argument
from project_history_recall.locks import exclusive
from project_history_recall.paths import path_key
from project_history_recall.services import browse
from project_history_recall.services.withheld import Exclusion, Rules, all_exclusions, load_rules, save_rules
from project_history_recall.services.workspace import Workspace
from project_history_recall.sources.withholding import WithholdingReader

RULES_LOCK_WAIT = 10.0


def _bare(target: str) -> str:
    wanted = target.strip()
    if wanted.startswith(browse.LINK_PREFIX):
        wanted = wanted[len(browse.LINK_PREFIX):].strip()
    if not wanted:
        raise bad_argument("a session id (or @session: link) is needed")
    return wanted


def _edit_rules(workspace: Workspace) -> AbstractContextManager[None]:
    return exclusive(workspace.home.data_dir / "withheld.lock", RULES_LOCK_WAIT,
                     "another process is changing what is withheld")


def _find_session(workspace: Workspace, target: str) -> str:
    """A full id, link or unique prefix of an indexed session, else an exact id Hermes has."""
    wanted = _bare(target)
    conn = workspace.index.connect_readonly()
    if conn is not None:
        try:
            return browse.resolve_session_id(conn, wanted)
        except RecallError as exc:
            if exc.code != "not_found":
                raise
        finally:
            conn.close()
    if workspace.histories.exists():
        with workspace.histories.read() as reader:
            if wanted in reader.sessions([wanted]):
                return wanted
    raise RecallError(f"no session matches {wanted!r}", "not_found")


def _refresh(workspace: Workspace) -> None:
    if workspace.histories.exists():
        workspace.refresh()


def forget(workspace: Workspace, target: str) -> dict:
    sid = _find_session(workspace, target)
    data_dir: Path = workspace.home.data_dir
    with _edit_rules(workspace):
        rules = load_rules(data_dir)
        already = sid in rules.forgotten
        rules.forgotten.setdefault(sid, time.time())
        save_rules(data_dir, rules)
    _refresh(workspace)
    withheld = _withheld_now(workspace)
    return {"success": True, "forgotten": sid, "already": already,
            "sessions_withheld": len(withheld), "message": (
                f"Forgot {sid} (and any session continued from it): it is out of the index and stays out; "
                f"`phr forget --undo {sid}` brings it back")}


def undo(workspace: Workspace, target: str) -> dict:
    wanted = _bare(target)
    data_dir = workspace.home.data_dir
    with _edit_rules(workspace):
        rules = load_rules(data_dir)
        matches = [sid for sid in rules.forgotten if sid == wanted] or [
            sid for sid in rules.forgotten if sid.startswith(wanted)]
        if not matches:
            raise RecallError(f"no forgotten session matches {wanted!r}", "not_found")
        if len(matches) > 1:
            raise RecallError(f"{wanted!r} matches {len(matches)} forgotten sessions; give more of the id",
                              "ambiguous_id")
        del rules.forgotten[matches[0]]
        save_rules(data_dir, rules)
    _refresh(workspace)
    return {"success": True, "restored": matches[0],
            "message": f"{matches[0]} is no longer forgotten: it is indexed again"}


def _exclusion(workspace: Workspace, project: str | None, path: str | None) -> Exclusion:
    if bool(project) == bool(path):
        raise bad_argument("give one of --project NAME|ID|FOLDER or --path GLOB")
    if path:
        return Exclusion(path=path_key(path, str(Path.home())) if not any(c in path for c in "*?[") else path)
    assert project is not None
    wanted = project.strip()
    for explicit in workspace.home.load_projects():
        if wanted in (explicit.id, explicit.slug) or wanted.casefold() == explicit.name.casefold():
            return Exclusion(project=explicit.id, name=explicit.name)
    if wanted.startswith(("/", "~")):  # a project by its folder (a repo, or a folder with no project)
        return Exclusion(path=path_key(wanted, str(Path.home())))
    raise RecallError(f"no project named {wanted!r} (give its name, id or folder)", "not_found")


def exclude(workspace: Workspace, *, project: str | None = None, path: str | None = None,
            remove: bool = False) -> dict:
    rule = _exclusion(workspace, project, path)
    data_dir = workspace.home.data_dir
    with _edit_rules(workspace):
        rules = load_rules(data_dir)
        present = rule in rules.exclude
        if remove:
            if not present:
                if Exclusion(path=rule.path, from_config=True) in all_exclusions(Rules(), workspace.settings):
                    raise RecallError(f"{rule.path!r} is excluded in config.yaml: remove it there",
                                      "excluded_in_config")
                raise RecallError("no such exclusion (see `phr exclude --list`)", "not_found")
            rules.exclude.remove(rule)
        elif not present:
            rules.exclude.append(rule)
        save_rules(data_dir, rules)
    _refresh(workspace)
    what = rule.name or rule.path
    return {"success": True, "exclusion": rule.as_dict(), "removed": remove,
            "message": f"{what} is indexed again" if remove else f"{what} is kept out of the index"}


def _withheld_now(workspace: Workspace) -> set[str]:
    if not workspace.histories.exists():
        return set()
    with workspace.source.read() as reader:
        return reader.hidden if isinstance(reader, WithholdingReader) else set()


def summary(workspace: Workspace) -> dict:
    """Counts only (never an excluded session's id, title or text): for ``status`` and listings."""
    rules = load_rules(workspace.home.data_dir)
    return {"forgotten": len(rules.forgotten),
            "exclusions": len(all_exclusions(rules, workspace.settings)),
            "sessions_withheld": len(_withheld_now(workspace))}


def listing(workspace: Workspace) -> dict:
    """What a person withheld (``phr exclude --list``): the rules, and the forgotten ids."""
    rules = load_rules(workspace.home.data_dir)
    return {"success": True, "exclusions": [e.as_dict() for e in all_exclusions(rules, workspace.settings)],
            "forgotten": sorted(rules.forgotten), **{"sessions_withheld": len(_withheld_now(workspace))}}
