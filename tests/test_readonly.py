"""The plugin never writes state.db or projects.db, except through update_session_cwd."""

from __future__ import annotations

import sqlite3

from builders import History, file_digest, git_init
from project_history_recall.faces.hermes.tools import make_handlers


def _rows(path, table):
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
    finally:
        conn.close()


def test_every_read_operation_leaves_hermes_files_untouched(tmp_path):
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    h.project("Repo", repo)
    h.session("s1", repo, "the quokka deployment", "use blue-green for quokka", title="Quokka")
    h.session("s2", repo)
    state, projects = h.root / "state.db", h.root / "projects.db"
    before = (file_digest(state), file_digest(projects))
    recall = h.recall()
    recall.status()
    recall.refresh()
    for mode in ("keyword", "semantic", "hybrid"):
        recall.search("quokka", session_id="s2", mode=mode)
    recall.search("quokka", session_id="s2", scope="all")
    recall.refresh(force=True)
    recall.status()
    assert (file_digest(state), file_digest(projects)) == before
    h.close()


def test_move_changes_only_the_sessions_cwd_and_git_fields(tmp_path):
    h = History(tmp_path / "hermes")
    a, b = git_init(tmp_path / "a"), git_init(tmp_path / "b")
    pid = h.project("B", b)
    h.session("s1", a, "hello")
    state, projects = h.root / "state.db", h.root / "projects.db"
    messages_before, projects_before = _rows(state, "messages"), file_digest(projects)
    sessions_before = {r[0]: r for r in _rows(state, "sessions")}
    handlers = make_handlers(lambda: h.recall())
    assert '"success": true' in handlers["project_session_move"]({"project_id": pid}, session_id="s1")
    assert _rows(state, "messages") == messages_before
    assert file_digest(projects) == projects_before
    after = h.db.get_session("s1")
    assert after["cwd"] == str(b) and after["git_repo_root"] == str(b)
    # Every other column of every session is as it was.
    conn = sqlite3.connect(f"file:{state}?mode=ro", uri=True)
    columns = [r[1] for r in conn.execute("PRAGMA table_info(sessions)")]
    conn.close()
    changed = {c for c, old, new in zip(columns, sessions_before["s1"], _rows(state, "sessions")[0], strict=True)
               if old != new}
    assert changed <= {"cwd", "git_branch", "git_repo_root"}
    h.close()
