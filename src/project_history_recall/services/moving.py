"""Moving a session to another project: the plugin's one write to Hermes.

A project is a function of the cwd, so a move is ``SessionDB.update_session_cwd``
to the target's primary folder (or Home), with the target's git facts.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path

from project_history_recall.errors import RecallError, no_db
from project_history_recall.hermes_home import HermesHome
from project_history_recall.index.probes import Probe


def _call_update_cwd(home: HermesHome, session_id: str, cwd: str, branch: str | None, root: str | None) -> None:
    from hermes_state import SessionDB

    db = SessionDB(db_path=home.state_db)
    try:
        kwargs: dict[str, object] = {"git_branch": branch or None, "git_repo_root": root or None}
        # Newer Hermes can clear stale git fields; 0.19.0 cannot. Never pass it blindly.
        if "replace_git_meta" in inspect.signature(db.update_session_cwd).parameters:
            kwargs["replace_git_meta"] = True
        db.update_session_cwd(session_id, cwd, **kwargs)
    finally:
        db.close()


def move_session(home: HermesHome, session_id: str | None, project_id: object, probe: Probe,
                 session_exists: bool) -> dict:
    if not isinstance(project_id, str):
        raise RecallError("project_id must be a string ('' moves the session to Home)", "bad_argument")
    if not session_id:
        raise RecallError("no current session to move", "no_session")
    if not home.state_db.is_file():
        raise no_db(home.state_db)
    if not session_exists:
        raise RecallError(f"session not found: {session_id}", "session_not_found")
    project_id = project_id.strip()
    if project_id:
        project = next((p for p in home.load_projects() if project_id in (p.id, p.slug)), None)
        if project is None:
            raise RecallError(f"project not found: {project_id}", "project_not_found")
        target = project.primary_path or next((f.path for f in project.folders), None)
        if not target or not os.path.isdir(target):
            raise RecallError(f"project folder not found: {target}", "folder_not_found")
        label = f"project {project.name}"
    else:
        settings = home.settings()
        target = os.path.expanduser(settings.home_cwd or "~")
        if not os.path.isdir(target):
            raise RecallError(f"project folder not found: {target}", "folder_not_found")
        label = "Home (no project)"
    target = str(Path(target))
    root, branch = probe(target)
    _call_update_cwd(home, session_id, target, branch, root)
    return {"cwd": target, "git_branch": branch, "git_repo_root": root, "label": label}
