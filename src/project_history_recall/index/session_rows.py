"""The index's rows of one session: its entries with their FTS rows, and its ``sessions`` row.

The indexer decides what to write and when; these functions are how, inside the caller's
transaction. Entries live in two tables: ``entries`` (the text and where it came from) and the
contentless ``entries_fts`` (its tokens), which forgets a row only when told its tokens again.
"""

from __future__ import annotations

import sqlite3
import time
from collections import Counter
from collections.abc import Sequence

from project_history_recall.index.entries import Entry, entry_tokens
from project_history_recall.index.preparing import Prepared
from project_history_recall.index.store import REMOVALS, bump, chunks_deleted, scope_changed
from project_history_recall.sources import SourceSession


def insert_entries(conn: sqlite3.Connection, sid: str, entries: Sequence[tuple],
                   tokens: list[str] | None = None) -> None:
    """Two ``executemany`` per session instead of two statements per entry. The ids are
    the ones SQLite would pick (one past the largest), given here so that the FTS rows
    can take them without a round trip per entry. ``entries`` have :class:`~.entries.Entry`'s
    fields (:attr:`Prepared.entries`); ``tokens``: each entry's, when made ahead."""
    if not entries:
        return
    first = conn.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM entries").fetchone()[0]
    conn.executemany(
        "INSERT INTO entries(id, session_id, message_id, position, kind, role, tool_name, timestamp, "
        "text, context) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(first + i, sid, *e) for i, e in enumerate(entries)],
    )
    if tokens is None:
        tokens = [entry_tokens(kind, text) for _, _, kind, _, _, _, text, _ in entries]
    conn.executemany("INSERT INTO entries_fts(rowid, tokens) VALUES (?, ?)",
                     [(first + i, t) for i, t in enumerate(tokens)])


def replace_entries(conn: sqlite3.Connection, sid: str, entries: Sequence[tuple]) -> list[tuple]:
    """Delete the session's entries that are not among ``entries`` and return those of
    ``entries`` still to insert. A turn appends a message or two to a session: rewriting
    all of it (each old entry tokenized again for the contentless FTS ``delete``, each
    new one for its insert) was 45 ms a turn in a real 291-message session."""
    wanted = Counter(entries)
    gone = []
    for row in conn.execute("SELECT id, message_id, position, kind, role, tool_name, timestamp, text, context "
                            "FROM entries WHERE session_id = ?", (sid,)):
        old = tuple(row)[1:]
        if wanted[old]:
            wanted[old] -= 1
        else:
            gone.append(row)
    _forget_entries(conn, gone)
    new = []
    for entry in entries:
        if wanted[entry]:
            wanted[entry] -= 1
            new.append(entry)
    return new


def delete_entries(conn: sqlite3.Connection, sid: str, kinds: tuple[str, ...] | None = None) -> None:
    """The session's entries (only those of ``kinds`` when given) and their FTS rows."""
    sql = "SELECT id, kind, text FROM entries WHERE session_id = ?"
    params: list[object] = [sid]
    if kinds:
        sql += f" AND kind IN ({','.join('?' * len(kinds))})"
        params.extend(kinds)
    _forget_entries(conn, conn.execute(sql, params).fetchall())


def _forget_entries(conn: sqlite3.Connection, rows: list[sqlite3.Row]) -> None:
    """Delete entry ``rows`` (with their ``id``, ``kind`` and ``text``) and their FTS rows."""
    for row in rows:
        conn.execute("INSERT INTO entries_fts(entries_fts, rowid, tokens) VALUES ('delete', ?, ?)",
                     (row["id"], entry_tokens(row["kind"], row["text"])))
    if rows:
        conn.execute(f"DELETE FROM entries WHERE id IN ({','.join('?' * len(rows))})",
                     [r["id"] for r in rows])


def delete_session(conn: sqlite3.Connection, sid: str) -> None:
    """A session gone from the source (deleted, forgotten, excluded): its vectors too."""
    delete_entries(conn, sid)
    conn.execute("DELETE FROM sessions WHERE id = ?", (sid,))
    bump(conn, REMOVALS)
    scope_changed(conn)
    chunks_deleted(conn, conn.execute("DELETE FROM chunks WHERE session_id = ?", (sid,)).rowcount)


def upsert_session(conn: sqlite3.Connection, session: SourceSession, prepared: Prepared) -> None:
    """The session's row as the source and its preparation (counts, effective git) say."""
    repo_root, branch = prepared.git
    conn.execute(
        "INSERT OR REPLACE INTO sessions(id, source, parent_session_id, started_at, ended_at, end_reason, "
        "cwd, git_branch, git_repo_root, repo_root, branch, title, archived, hidden, message_count, "
        "entry_count, last_active, signature, content_signature, indexed_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (session.id, session.source, session.parent_session_id, session.started_at, session.ended_at,
         session.end_reason, session.cwd, session.git_branch, session.git_repo_root, repo_root, branch,
         session.title, int(session.archived), int(session.hidden), prepared.message_count,
         len(prepared.entries), prepared.last_active, session.signature, session.content_signature,
         time.time()),
    )


def update_session_meta(conn: sqlite3.Connection, session: SourceSession,
                        git: tuple[str | None, str | None]) -> None:
    """A session whose metadata alone changed: its row, and its title entry when the title did;
    ``git`` is its effective repo root and branch."""
    scope_changed(conn)  # what attributes it may have changed (a move, an archive)
    old = conn.execute("SELECT title FROM sessions WHERE id = ?", (session.id,)).fetchone()
    if old is not None and old["title"] != session.title:
        delete_entries(conn, session.id, ("title",))
        if session.title:
            insert_entries(conn, session.id, [
                Entry(None, -1, "title", "title", None, session.started_at, session.title[:500])])
    repo_root, branch = git
    conn.execute(
        "UPDATE sessions SET source=?, parent_session_id=?, ended_at=?, end_reason=?, cwd=?, git_branch=?, "
        "git_repo_root=?, repo_root=?, branch=?, title=?, archived=?, hidden=?, signature=?, indexed_at=? "
        "WHERE id=?",
        (session.source, session.parent_session_id, session.ended_at, session.end_reason, session.cwd,
         session.git_branch, session.git_repo_root, repo_root, branch, session.title,
         int(session.archived), int(session.hidden), session.signature, time.time(), session.id),
    )


def attribution_of(conn: sqlite3.Connection, sid: str) -> tuple | None:
    """What the scope of a session is computed from (:mod:`..search.scope` reads the same)."""
    row = conn.execute("SELECT cwd, repo_root, branch, archived, hidden, started_at FROM sessions WHERE id = ?",
                       (sid,)).fetchone()
    return tuple(row) if row is not None else None
