"""Browsing the history: one session, a timeline, the projects, over the same index.

Everything reads the plugin's index (never Hermes's database, except to place a
window anchor the index has no entry for), so it is as fast as search and
sees what the last refresh saw. Scope is search's: a project's sessions are the
ones attribution puts there (``search.compute_scope``), archived and hidden
(subagent) sessions left out, ``branch`` narrowing while keeping sessions of
unknown branch. Opening a session by id is the exception: an explicit id opens
whatever session it names, hidden ones included.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from project_history_recall.attribution import Identity, Resolver
from project_history_recall.errors import RecallError, not_found
from project_history_recall.search.scope import compute_scope, session_identities
from project_history_recall.sources import SourceMessage
from project_history_recall.when import format_when

HEAD_ENTRIES = 20
TAIL_ENTRIES = 10
ENTRY_CHARS = 1500
LABEL_CHARS = 80
WINDOW_DEFAULT = 5
WINDOW_MAX = 20
TIMELINE_DEFAULT = 20
TIMELINE_MAX = 100
CANDIDATES_SHOWN = 10
LINK_PREFIX = "@session:"


@dataclass
class AmbiguousId(RecallError):
    """A prefix that names several sessions: the error carries them, so the next call can pick."""

    candidates: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {**super().as_dict(), "candidates": self.candidates}


# -- one session ------------------------------------------------------------------------


Allowed = Callable[[str], bool]


def not_in_project(what: str) -> RecallError:
    """Another project's session: said so, with nothing of it (no title, no content)."""
    return RecallError(
        f"{what} belongs to another project; this conversation can read only its own project's history "
        "(a person can open it with /recall or phr; the model's tools may read other projects only with "
        "config plugins.entries.project-history-recall.allow_cross_project: true)", "not_in_project")


def resolve_session_id(conn: sqlite3.Connection, text: str, allowed: Allowed | None = None) -> str:
    """A full id, an ``@session:`` link or a unique prefix, to the full id. With ``allowed``
    (the reader's scope) only its sessions are opened or offered as candidates."""
    wanted = text.strip()
    if wanted.startswith(LINK_PREFIX):
        wanted = wanted[len(LINK_PREFIX):].strip()
    if not wanted:
        raise RecallError("session_id must be a non-empty string", "bad_argument")
    if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (wanted,)).fetchone():
        if allowed is not None and not allowed(wanted):
            raise not_in_project(f"session {wanted!r}")
        return wanted
    escaped = wanted.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    rows = conn.execute(
        "SELECT id, title, started_at, message_count FROM sessions WHERE id LIKE ? ESCAPE '\\' "
        "ORDER BY started_at DESC, id", (escaped + "%",)).fetchall()
    if not rows:
        raise not_found(f"no session matches {wanted!r}")
    if allowed is not None:
        rows = [r for r in rows if allowed(r["id"])]
        if not rows:
            raise not_in_project(f"every session matching {wanted!r}")
    if len(rows) > 1:
        shown = rows[:CANDIDATES_SHOWN]
        more = " (and more)" if len(rows) > CANDIDATES_SHOWN else ""
        raise AmbiguousId(
            f"{wanted!r} matches {len(shown)}{more} sessions; give more of the id", "ambiguous_id",
            [{"session_id": r["id"], "title": r["title"], "when": format_when(r["started_at"]),
              "message_count": r["message_count"]} for r in shown])
    return rows[0]["id"]


def _relation(child: sqlite3.Row, parent: sqlite3.Row | None) -> str:
    """Why a child session exists. Hermes records it only indirectly: subagents are
    hidden, a compression or /branch parent ended with that reason."""
    if child["hidden"]:
        return "delegate"
    reason = parent["end_reason"] if parent is not None else None
    if reason == "compression":
        return "compression"
    if reason == "branched":
        return "branch"
    return "child"


def _brief(row: sqlite3.Row, relation: str | None = None) -> dict:
    brief = {"session_id": row["id"], "link": LINK_PREFIX + row["id"], "title": row["title"],
             "when": format_when(row["started_at"]), "message_count": row["message_count"]}
    if relation:
        brief["relation"] = relation
    return brief


def _entry(row: sqlite3.Row, anchor: int | None = None) -> dict:
    text = row["text"]
    entry: dict = {"message_id": row["message_id"], "position": row["position"], "kind": row["kind"],
                   "when": format_when(row["timestamp"])}
    if row["tool_name"]:
        entry["tool_name"] = row["tool_name"]
    if len(text) > ENTRY_CHARS:
        entry["text"] = text[:ENTRY_CHARS] + "…"
        entry["text_truncated"] = len(text)
    else:
        entry["text"] = text
    if row["context"]:
        entry["result"] = row["context"]
    if anchor is not None and row["message_id"] == anchor:
        entry["anchor"] = True
    return entry


def _lineage_root(conn: sqlite3.Connection, sid: str) -> str:
    seen = {sid}
    while True:
        row = conn.execute("SELECT parent_session_id FROM sessions WHERE id = ?", (sid,)).fetchone()
        parent = row["parent_session_id"] if row else None
        if not parent or parent in seen:
            return sid
        seen.add(parent)
        sid = parent


SourceMessages = Callable[[str], list[SourceMessage]]


def _anchor_position(conn: sqlite3.Connection, sid: str, message_id: int,
                     source_messages: SourceMessages | None) -> tuple[str, int, str | None]:
    """Where ``message_id`` sits: in ``sid``, else in a session of the same lineage
    (compression and delegation move messages to children; rebound, with a warning)."""
    row = conn.execute("SELECT position FROM entries WHERE session_id = ? AND message_id = ? LIMIT 1",
                       (sid, message_id)).fetchone()
    if row is not None:
        return sid, int(row["position"]), None
    if source_messages is not None:  # a message with no entry of its own (a tool result): Hermes knows its place
        for position, message in enumerate(source_messages(sid)):
            if message.id == message_id:
                return sid, position, None
    row = conn.execute("SELECT session_id, position FROM entries WHERE message_id = ? LIMIT 1",
                       (message_id,)).fetchone()
    if row is not None and _lineage_root(conn, row["session_id"]) == _lineage_root(conn, sid):
        owner = row["session_id"]
        return owner, int(row["position"]), (
            f"around_message_id {message_id} lives in {owner} (same lineage as {sid}); opened that session")
    raise not_found(f"around_message_id {message_id} is not in session {sid}")


def open_session(conn: sqlite3.Connection, resolver: Resolver, target: str, *, around_message_id: int | None = None,
                 window: int = WINDOW_DEFAULT, source_messages: SourceMessages | None = None,
                 allowed: Allowed | None = None) -> dict:
    """Metadata, entries (head + tail when long, or a window around one message),
    parent and children of one session. With ``allowed`` (the reader's scope) nothing
    outside it is opened, named or linked: not the session, its parent or its children."""
    sid = resolve_session_id(conn, target, allowed)
    visible: Allowed = allowed if allowed is not None else (lambda _sid: True)
    warning = None
    anchor_position = None
    if around_message_id is not None:
        sid, anchor_position, warning = _anchor_position(conn, sid, around_message_id, source_messages)
        if not visible(sid):
            raise not_in_project(f"the session holding around_message_id {around_message_id}")
    row = conn.execute("SELECT * FROM sessions WHERE id = ?", (sid,)).fetchone()
    identity = resolver.resolve(row["cwd"], row["repo_root"])
    payload: dict = {
        "success": True,
        "operation": "session",
        "session": {
            "session_id": sid,
            "link": LINK_PREFIX + sid,
            "title": row["title"],
            "project": identity.as_dict(),
            "cwd": row["cwd"],
            "branch": row["branch"],
            "source": row["source"],
            "started": format_when(row["started_at"]),
            "last_active": format_when(row["last_active"]),
            "ended": format_when(row["ended_at"]),
            "end_reason": row["end_reason"],
            "message_count": row["message_count"],
            "archived": bool(row["archived"]),
            "hidden": bool(row["hidden"]),
        },
    }
    parent = None
    if row["parent_session_id"]:
        parent = conn.execute("SELECT * FROM sessions WHERE id = ?", (row["parent_session_id"],)).fetchone()
    if parent is not None and not visible(parent["id"]):
        payload["parent"] = {"other_project": True}
    else:
        payload["parent"] = _brief(parent, _relation(row, parent)) if parent is not None else (
            {"session_id": row["parent_session_id"], "indexed": False} if row["parent_session_id"] else None)
    children = conn.execute("SELECT * FROM sessions WHERE parent_session_id = ? ORDER BY started_at, id",
                            (sid,)).fetchall()
    payload["children"] = [_brief(c, _relation(c, row)) for c in children if visible(c["id"])]

    base = "SELECT * FROM entries WHERE session_id = ? AND kind != 'title'"
    total = conn.execute(f"SELECT COUNT(*) FROM ({base})", (sid,)).fetchone()[0]
    payload["entries_total"] = total
    if anchor_position is not None:
        window = max(1, min(WINDOW_MAX, window))
        low, high = anchor_position - window, anchor_position + window
        rows = conn.execute(f"{base} AND position BETWEEN ? AND ? ORDER BY position, id", (sid, low, high)).fetchall()
        last = max(0, int(row["message_count"]) - 1)
        payload.update(mode="window", around_message_id=around_message_id, window=window,
                       entries=[_entry(r, around_message_id) for r in rows],
                       more_before=max(0, low), more_after=max(0, last - high))
    elif total > HEAD_ENTRIES + TAIL_ENTRIES:
        head = conn.execute(f"{base} ORDER BY position, id LIMIT ?", (sid, HEAD_ENTRIES)).fetchall()
        tail = conn.execute(f"{base} ORDER BY position DESC, id DESC LIMIT ?", (sid, TAIL_ENTRIES)).fetchall()
        payload.update(mode="read", truncated=True, elided=total - HEAD_ENTRIES - TAIL_ENTRIES,
                       entries=[_entry(r) for r in head],
                       tail=[_entry(r) for r in reversed(tail)])
        payload["message"] = (
            f"Long session: showing the first {HEAD_ENTRIES} and last {TAIL_ENTRIES} of {total} entries "
            f"({payload['elided']} elided). Pass around_message_id (any message_id above) to read the middle.")
    else:
        rows = conn.execute(f"{base} ORDER BY position, id", (sid,)).fetchall()
        payload.update(mode="read", truncated=False, entries=[_entry(r) for r in rows])
    if warning:
        payload["warning"] = warning
    return payload


# -- timeline ------------------------------------------------------------------------------


def _first_user_words(conn: sqlite3.Connection, ids: list[str]) -> dict[str, str]:
    if not ids:
        return {}
    rows = conn.execute(
        "SELECT e.session_id, e.text FROM entries e WHERE e.kind = 'user' "
        "AND e.session_id IN (SELECT value FROM json_each(?)) "
        "AND e.position = (SELECT MIN(position) FROM entries WHERE session_id = e.session_id AND kind = 'user')",
        (json.dumps(ids),)).fetchall()
    return {r["session_id"]: " ".join(r["text"].split())[:LABEL_CHARS] for r in rows}


def timeline(conn: sqlite3.Connection, resolver: Resolver, identity: Identity, current_id: str | None, *,
             everywhere: bool = False, after: float | None = None, before: float | None = None,
             branch: str | None = None, limit: int = TIMELINE_DEFAULT) -> dict:
    """Sessions newest first (by last activity). ``after``/``before`` keep the
    sessions active in that span: last active at or after ``after``, started before ``before``."""
    scope = compute_scope(conn, resolver, identity, None, everywhere=everywhere, branch=branch)
    clauses: list[str] = []
    params: list[object] = [json.dumps(scope.session_ids)]
    if after is not None:
        clauses.append("COALESCE(last_active, started_at) >= ?")
        params.append(after)
    if before is not None:
        clauses.append("started_at < ?")
        params.append(before)
    where = "".join(f" AND {c}" for c in clauses)
    sql = f"FROM sessions WHERE id IN (SELECT value FROM json_each(?)){where}"
    total = conn.execute(f"SELECT COUNT(*) {sql}", params).fetchone()[0]
    rows = conn.execute(f"SELECT * {sql} ORDER BY COALESCE(last_active, started_at) DESC, id DESC LIMIT ?",
                        [*params, limit]).fetchall()
    words = _first_user_words(conn, [r["id"] for r in rows if not r["title"]])
    # a parent is named only when it is this project's too (hidden children's parents included)
    in_scope = {sid for sid, (ident, _row) in session_identities(conn, resolver).items()
                if ident.scope_key == identity.scope_key}
    sessions = []
    for r in rows:
        item = {
            "session_id": r["id"],
            "link": LINK_PREFIX + r["id"],
            "title": r["title"],
            "label": r["title"] or words.get(r["id"]) or "(empty session)",
            "when": format_when(r["started_at"]),
            "last_active": format_when(r["last_active"]),
            "message_count": r["message_count"],
            "branch": r["branch"],
        }
        if r["parent_session_id"] and (everywhere or r["parent_session_id"] in in_scope):
            item["parent_session_id"] = r["parent_session_id"]
        if r["id"] == current_id:
            item["current"] = True
        if everywhere:
            item["project"] = scope.identities.get(r["id"], identity).as_dict()
        sessions.append(item)
    payload = {"success": True, "operation": "timeline", "scope": "all" if everywhere else "project",
               "project": identity.as_dict(), "sessions": sessions, "total": total, "shown": len(sessions)}
    warning = scope.branch_warning(branch)
    if warning:
        payload["warning"] = warning
    return payload


# -- projects ------------------------------------------------------------------------------


@dataclass
class _Tally:
    identity: Identity
    sessions: int = 0
    messages: int = 0
    last: float = 0.0


def projects(conn: sqlite3.Connection, resolver: Resolver, current: Identity, *, branch: str | None = None) -> dict:
    """Every project (explicit ones even without sessions, auto ones that have some,
    Home when it has any) with its visible sessions and messages; the asker's marked."""
    tallies: dict[str, _Tally] = {}
    for p in resolver.projects:
        ident = Identity("explicit", id=p.id, name=p.name)
        tallies[ident.scope_key] = _Tally(ident)
    counts = {r["id"]: r for r in conn.execute("SELECT id, message_count, last_active FROM sessions")}
    by_key: dict[str, list[str]] = defaultdict(list)
    for sid, (ident, row) in session_identities(conn, resolver).items():
        if row["archived"] or row["hidden"]:
            continue
        if branch and row["branch"] and row["branch"] != branch:
            continue
        tally = tallies.setdefault(ident.scope_key, _Tally(ident))
        tally.sessions += 1
        tally.messages += int(counts[sid]["message_count"] or 0)
        tally.last = max(tally.last, float(counts[sid]["last_active"] or row["started_at"] or 0))
        by_key[ident.scope_key].append(sid)
    folders = {p.id: [f.path for f in p.folders] or ([p.primary_path] if p.primary_path else [])
               for p in resolver.projects}
    items = []
    for key, t in sorted(tallies.items(), key=lambda kv: (-kv[1].last, kv[1].identity.name or "")):
        item = {**t.identity.as_dict(), "sessions": t.sessions, "messages": t.messages,
                "last_activity": format_when(t.last)}
        if t.identity.kind == "home":
            item["name"] = "Home"
        if t.identity.kind == "explicit":
            item["folders"] = folders.get(t.identity.id or "", [])
        if key == current.scope_key:
            item["current"] = True
        items.append(item)
    return {"success": True, "operation": "projects", "current": current.as_dict(), "projects": items,
            "total": len(items)}


# -- status facts ----------------------------------------------------------------------------


def index_facts(conn: sqlite3.Connection) -> dict:
    """What the index holds, by count."""
    one = lambda sql: conn.execute(sql).fetchone()[0]  # noqa: E731
    facts = {
        "sessions_indexed": one("SELECT COUNT(*) FROM sessions"),
        "messages_indexed": one("SELECT COALESCE(SUM(message_count), 0) FROM sessions"),
        "entries_indexed": one("SELECT COUNT(*) FROM entries"),
    }
    try:
        facts["vectors_indexed"] = one("SELECT COUNT(*) FROM chunks")
    except sqlite3.OperationalError:
        facts["vectors_indexed"] = 0
    return facts

