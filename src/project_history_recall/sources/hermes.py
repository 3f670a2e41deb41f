"""Hermes's ``state.db``, read-only.

Opened with ``mode=ro`` so nothing here can write it; the plugin's one write to
Hermes (``SessionDB.update_session_cwd``) lives in :mod:`project_history_recall.services.moving`.
Columns are discovered with ``PRAGMA table_info`` so a ``state.db`` from an
older or newer Hermes still reads (missing columns get their defaults).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from project_history_recall.errors import RecallError, no_db
from project_history_recall.sources import Source, SourceMessage, SourceSession, ToolCall

_CONTENT_JSON_PREFIX = "\x00json:"
HIDDEN_SOURCES = ("subagent", "tool")
RACY_SECONDS = 1.0
_SESSION_DEFAULTS = {
    "parent_session_id": "NULL",
    "ended_at": "NULL",
    "end_reason": "NULL",
    "cwd": "NULL",
    "git_branch": "NULL",
    "git_repo_root": "NULL",
    "title": "NULL",
    "archived": "0",
    "message_count": "0",
    "rewind_count": "0",
    "model_config": "NULL",
    "source": "'unknown'",
    "started_at": "0",
}
_MESSAGE_DEFAULTS = {
    "content": "NULL",
    "tool_calls": "NULL",
    "tool_name": "NULL",
    "tool_call_id": "NULL",
    "timestamp": "0",
    "active": "1",
}


def connect_readonly(path: Path, timeout: float = 1.0) -> sqlite3.Connection:
    """A read-only connection; raises ``no_db`` when the file is missing."""
    if not path.is_file():
        raise no_db(path)
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=timeout,
                               isolation_level=None, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        # One message with invalid UTF-8 must not stop every refresh: keep it, with U+FFFD.
        conn.text_factory = lambda raw: raw.decode("utf-8", "replace")
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone()
    except sqlite3.DatabaseError as exc:
        raise RecallError(f"cannot read session database {path}: {exc}", "db_unreadable") from exc
    return conn


@dataclass
class _Watch:
    conn: sqlite3.Connection
    inode: int
    token: str


#: Watched databases, least recently used first. A process serves one Hermes home (the test
#: suite: hundreds), and an open connection also keeps SQLite from closing the file handles
#: of every other connection to that file, so only the last few are kept.
_watches: OrderedDict[str, _Watch] = OrderedDict()
_watches_lock = threading.Lock()
MAX_WATCHES = 4


def _close_beyond_bound(registry: OrderedDict[str, _Watch] | OrderedDict[str, _Pooled]) -> None:
    """Close the least recently used connections of ``registry`` (caller holds its lock)
    beyond :data:`MAX_WATCHES`."""
    while len(registry) > MAX_WATCHES:
        registry.popitem(last=False)[1].conn.close()


def _data_version(path: Path, inode: int) -> str | None:
    """``PRAGMA data_version`` of a long-lived read-only connection to ``path``, which
    changes whenever another connection commits. Its values mean something only on that
    connection, so the marker carries a token of it; a replaced file (new inode) gets a
    new connection. The connection never holds a transaction, so it never holds Hermes
    up."""
    key = str(path)
    with _watches_lock:
        watch = _watches.get(key)
        try:
            if watch is None or watch.inode != inode:
                if watch is not None:
                    watch.conn.close()
                watch = _watches[key] = _Watch(connect_readonly(path, timeout=0.1), inode, uuid.uuid4().hex)
                _close_beyond_bound(_watches)
            _watches.move_to_end(key)
            version = watch.conn.execute("PRAGMA data_version").fetchone()[0]
        except (RecallError, sqlite3.DatabaseError):
            if watch is not None:
                watch.conn.close()
            _watches.pop(key, None)
            return None
        return f"{watch.token}:{version}"


def data_version(path: Path) -> str | None:
    """:func:`_data_version` of the file at ``path`` now: equal on two calls exactly when no
    connection other than the watching one committed to it in between (None: cannot tell)."""
    try:
        inode = path.stat().st_ino
    except OSError:
        return None
    return _data_version(path, inode)


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def _select_list(available: set[str], defaults: dict[str, str], required: tuple[str, ...]) -> str:
    missing = [c for c in required if c not in available]
    if missing:
        raise RecallError(
            f"state.db has no column(s) {', '.join(missing)}: not a Hermes session database this "
            "plugin understands", "unsupported_schema")
    cols = list(required) + [f"{c}" if c in available else f"{d} AS {c}" for c, d in defaults.items()]
    return ", ".join(dict.fromkeys(cols))


def _number(value: object) -> float:
    """A numeric column as Hermes means it; a row someone wrote text into reads as 0."""
    try:
        number = float(value) if value is not None else 0.0  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0
    return number if number == number and abs(number) != float("inf") else 0.0


def decode_content(value: object) -> str:
    """Message content as text: multimodal parts keep their text, other parts are dropped."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    text = str(value)
    if text.startswith(_CONTENT_JSON_PREFIX):
        try:
            parts = json.loads(text[len(_CONTENT_JSON_PREFIX):])
        except (ValueError, TypeError, RecursionError):
            return text[len(_CONTENT_JSON_PREFIX):]
        return _parts_text(parts)
    return text


def _parts_text(parts: object) -> str:
    if isinstance(parts, str):
        return parts
    if isinstance(parts, dict):
        parts = [parts]
    if not isinstance(parts, list):
        return ""
    texts = [p.get("text", "") for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return "\n".join(t for t in texts if t)


def decode_tool_calls(value: object) -> tuple[ToolCall, ...]:
    """Tool calls from the JSON column; anything malformed is skipped, never raised."""
    if not value:
        return ()
    try:
        data = json.loads(value) if isinstance(value, str | bytes) else value
    except (ValueError, TypeError, RecursionError):
        return ()
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        return ()
    calls = []
    for item in data:
        if not isinstance(item, dict):
            continue
        nested = item.get("function")
        function: dict = nested if isinstance(nested, dict) else item
        name = function.get("name")
        if not isinstance(name, str) or not name:
            continue
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            try:
                arguments = json.dumps(arguments, ensure_ascii=False)
            except (TypeError, ValueError):
                arguments = str(arguments)
        calls.append(ToolCall(id=str(item.get("id") or ""), name=name, arguments=arguments))
    return tuple(calls)


def _is_delegate(model_config: object) -> bool:
    if not model_config:
        return False
    try:
        data = json.loads(model_config) if isinstance(model_config, str | bytes) else model_config
    except (ValueError, TypeError, RecursionError):
        return False
    return isinstance(data, dict) and bool(data.get("_delegate_from"))


_SIGNATURE_COLUMNS = ("source", "parent_session_id", "ended_at", "end_reason", "cwd", "git_branch", "git_repo_root",
                      "title", "archived", "model_config")
_CONTENT_COLUMNS = ("message_count", "rewind_count")
#: The newest messages by their rowid: a range seek, however many messages there are.
MESSAGES_AFTER_SQL = "SELECT session_id FROM messages WHERE id > ?"


def _signature_sql(available: set[str], columns: tuple[str, ...]) -> str:
    return "||'|'||".join(f"quote({c if c in available else _SESSION_DEFAULTS[c]})" for c in columns)


class _Seen:
    """What a pooled reader connection saw of ``sessions`` at its last committed read: the
    columns the signatures are made of, in a TEMP table of that connection, and the signatures.

    Building every session's signature (a dozen ``quote()``s each) was most of the first check
    after a commit. With this, a read builds signatures only for the rows whose columns differ
    from the ones seen (a join on the rowid, ``IS NOT`` byte for byte, the id included) and
    takes the rest from memory. A signature is a function of those columns; the one change
    ``IS NOT`` cannot see is an integer becoming the equal real (``quote`` gives ``1`` and
    ``1.0``), which Hermes's typed columns never store and which changes no value the index
    keeps. The TEMP table is written in the read's transaction, so a read that fails leaves
    both as they were.

    The TEMP table is keyed by the rowid (one b-tree step per session instead of an index
    lookup and then the row) and holds one row per id (``UNIQUE``: a row written replaces
    the one of the same rowid and the one of the same id), each the row its id's signature
    was built from. So a row that matches its TEMP row exactly has the signature in memory,
    whatever renumbered the rowids; a row that does not is read again. The ids seen are
    those of the sessions unless the counts differ (rows were deleted), and then the ids
    gone are found. Hermes's ``sessions`` has a rowid; one without (``schema`` says so) is
    read whole each time."""

    def __init__(self) -> None:
        self.columns = ""
        self.signatures: dict[str, tuple[str, str]] | None = None
        self.pending: dict[str, tuple[str, str]] | None = None
        #: ``state.db``'s schema version, and what :class:`HermesReader` discovers from the
        #: schema (``PRAGMA table_info`` twice, a tenth of the first check after a commit).
        self.schema: tuple[int, tuple[str, str, list[str], str, bool]] | None = None

    def read(self, conn: sqlite3.Connection, columns: list[str], signatures_sql: str) -> dict[str, tuple[str, str]]:
        names = [f"c{i}" for i in range(len(columns))]
        selected = ", ".join(f"{c} AS {n}" for c, n in zip(columns, names, strict=True))
        if self.signatures is None or self.columns != "|".join(columns):
            conn.execute("DROP TABLE IF EXISTS temp.phr_seen")
            conn.execute(f"CREATE TEMP TABLE phr_seen (rid INTEGER PRIMARY KEY, id UNIQUE, signature, "
                         f"content_signature, {', '.join(names)})")
            conn.execute(f"INSERT INTO temp.phr_seen SELECT rowid, id, {signatures_sql}, {selected} FROM sessions")
            self.columns = "|".join(columns)
            self.pending = {r[0]: (r[1], r[2]) for r in conn.execute(
                "SELECT id, signature, content_signature FROM temp.phr_seen")}
            return dict(self.pending)
        differs = " OR ".join(f"{c} IS NOT t.{n} COLLATE BINARY" for c, n in zip(columns, names, strict=True))
        changed = conn.execute(f"SELECT s.rowid, s.id, {signatures_sql}, {selected} FROM sessions s "
                               f"LEFT JOIN temp.phr_seen t ON t.rid = s.rowid "
                               f"WHERE t.rid IS NULL OR s.id IS NOT t.id COLLATE BINARY OR {differs}").fetchall()
        signatures = self.signatures
        if changed:
            signatures = dict(signatures)
            conn.executemany(f"INSERT OR REPLACE INTO temp.phr_seen VALUES ({', '.join('?' * len(changed[0]))})",
                             changed)
            signatures.update((r[1], (r[2], r[3])) for r in changed)
        if conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] != len(signatures):
            present = {r[0] for r in conn.execute("SELECT id FROM sessions")}
            gone = [sid for sid in signatures if sid not in present]
            conn.executemany("DELETE FROM temp.phr_seen WHERE id = ?", [(sid,) for sid in gone])
            signatures = {sid: signature for sid, signature in signatures.items() if sid in present}
        self.pending = signatures
        return dict(signatures)

    def committed(self) -> None:
        if self.pending is not None:
            self.signatures, self.pending = self.pending, None


class HermesReader:
    """One read transaction over ``state.db``: every call sees the same snapshot."""

    def __init__(self, conn: sqlite3.Connection, seen: _Seen | None = None,
                 source: HermesSource | None = None) -> None:
        self._conn = conn
        self._seen = seen
        self._source = source
        version = conn.execute("PRAGMA schema_version").fetchone()[0]
        if seen is not None and seen.schema is not None and seen.schema[0] == version:
            schema = seen.schema[1]
        else:
            schema = self._schema(conn)
            if seen is not None:
                seen.schema = (version, schema)
        self._session_cols, self._signatures, self._signature_columns, self._message_cols, self._rowid = schema

    @staticmethod
    def _schema(conn: sqlite3.Connection) -> tuple[str, str, list[str], str, bool]:
        """The select lists for this ``state.db``'s columns, and whether ``sessions`` has a rowid."""
        available = _columns(conn, "sessions")
        signatures = (f"{_signature_sql(available, _SIGNATURE_COLUMNS)} AS signature, "
                      f"{_signature_sql(available, _CONTENT_COLUMNS)} AS content_signature")
        signature_columns = [c if c in available else _SESSION_DEFAULTS[c]
                             for c in (*_SIGNATURE_COLUMNS, *_CONTENT_COLUMNS)]
        try:
            conn.execute("SELECT rowid FROM sessions LIMIT 0")
            rowid = True
        except sqlite3.OperationalError:  # a WITHOUT ROWID table
            rowid = False
        return (_select_list(available, _SESSION_DEFAULTS, ("id",)), signatures, signature_columns,
                _select_list(_columns(conn, "messages"), _MESSAGE_DEFAULTS, ("id", "session_id", "role")), rowid)

    def signatures(self) -> dict[str, tuple[str, str]]:
        if self._seen is not None and self._rowid:
            return self._seen.read(self._conn, self._signature_columns, self._signatures)
        return {r[0]: (r[1], r[2]) for r in self._conn.execute(f"SELECT id, {self._signatures} FROM sessions")}

    def sessions(self, ids: Iterable[str] | None = None) -> dict[str, SourceSession]:
        result = {}
        sql = f"SELECT {self._session_cols}, {self._signatures} FROM sessions"
        params: tuple = ()
        if ids is not None:
            sql += " WHERE id IN (SELECT value FROM json_each(?))"
            params = (json.dumps(list(ids)),)
        for row in self._conn.execute(sql, params):
            source = str(row["source"] or "unknown")
            result[row["id"]] = SourceSession(
                id=row["id"],
                source=source,
                started_at=_number(row["started_at"]),
                parent_session_id=row["parent_session_id"],
                ended_at=row["ended_at"],
                end_reason=row["end_reason"],
                cwd=row["cwd"] or None,
                git_branch=row["git_branch"] or None,
                git_repo_root=row["git_repo_root"] or None,
                title=row["title"] or None,
                archived=bool(row["archived"]),
                hidden=source in HIDDEN_SOURCES or _is_delegate(row["model_config"]),
                message_count=int(_number(row["message_count"])),
                rewind_count=int(_number(row["rewind_count"])),
                signature=row["signature"],
                content_signature=row["content_signature"],
            )
        return result

    def max_message_id(self) -> int:
        return int(self._conn.execute("SELECT COALESCE(MAX(id), 0) FROM messages").fetchone()[0])

    def sessions_with_messages_after(self, message_id: int) -> set[str]:
        """The sessions of the messages newer than ``message_id``. Deduplicated here, not by
        ``DISTINCT``: with it SQLite scans the whole ``(session_id, timestamp)`` index instead of
        seeking the rowid range (23 ms instead of 0.07 at M, on every check after a turn)."""
        return {r[0] for r in self._conn.execute(MESSAGES_AFTER_SQL, (message_id,))}

    def _rows(self, sql: str, params: tuple = ()) -> sqlite3.Cursor:
        """Message rows as plain tuples, in the order of ``_message_cols`` (what :meth:`_message`
        unpacks): a full build reads every message, and looking columns up by name was a
        tenth of its time."""
        cursor = self._conn.cursor()
        cursor.row_factory = None
        return cursor.execute(sql, params)

    @staticmethod
    def _message(row: tuple) -> SourceMessage:
        mid, _, role, content, tool_calls, tool_name, tool_call_id, timestamp, _ = row
        return SourceMessage(
            int(mid),
            str(role),
            decode_content(content),
            _number(timestamp),
            decode_tool_calls(tool_calls) if tool_calls else (),
            tool_name,
            tool_call_id,
        )

    def messages(self, session_id: str) -> list[SourceMessage]:
        """One session's messages, their text decoded by SQLite's own UTF-8 decoder (in C: the
        connection's replacing decoder is a Python call per text value, 4 % of a full build);
        a session whose rows hold invalid UTF-8 fails that decoder and is read again with the
        replacing one, so the messages are the same either way."""
        sql = f"SELECT {self._message_cols} FROM messages WHERE session_id = ? AND active = 1 ORDER BY id"
        replacing = self._conn.text_factory
        self._conn.text_factory = str
        try:
            rows = self._rows(sql, (session_id,)).fetchall()
        except sqlite3.OperationalError:  # not UTF-8 (a real error is raised again below)
            rows = None
        finally:
            self._conn.text_factory = replacing
        if rows is None:
            rows = self._rows(sql, (session_id,)).fetchall()
        return [self._message(r) for r in rows]

    def iter_all_messages(self) -> Iterator[tuple[str, SourceMessage]]:
        rows = self._rows(f"SELECT {self._message_cols} FROM messages WHERE active = 1 ORDER BY session_id, id")
        for row in rows:
            yield row[1], self._message(row)

    def portable(self) -> tuple[Source, Collection[str]] | None:
        """The database's path is all another process needs: every session can be read there."""
        return None if self._source is None else (self._source, self.signatures().keys())


class HermesSource:
    """``$HERMES_HOME/state.db`` as a :class:`~project_history_recall.sources.Source`."""

    name = "hermes"

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path

    def exists(self) -> bool:
        return self.db_path.is_file()

    def change_marker(self) -> str | None:
        """Size and mtime of ``state.db`` and its WAL: every commit touches one of them.

        As with git's racy-index rule, a file modified within the last
        :data:`RACY_SECONDS` may change again inside the same mtime tick without a
        size change. That is the usual moment of a search (Hermes has just written
        the turn that asks), so then SQLite itself says whether anything was
        committed: :func:`_data_version` (a marker only this process can match), or
        no marker when it cannot tell.
        """
        stats: list[os.stat_result | None] = []
        for path in (self.db_path, self.db_path.with_name(self.db_path.name + "-wal")):
            try:
                stats.append(path.stat())
            except OSError:
                stats.append(None)
        parts = [f"{s.st_ino}:{s.st_size}:{s.st_mtime_ns}" if s else "-" for s in stats]
        newest = max((s.st_mtime_ns for s in stats if s), default=0)
        if time.time_ns() - newest < RACY_SECONDS * 1e9:
            db = stats[0]
            version = _data_version(self.db_path, db.st_ino) if db else None
            return None if version is None else "|".join([*parts, version])
        return "|".join(parts)

    @contextmanager
    def read(self) -> Iterator[HermesReader]:
        """One snapshot, on a pooled connection when one is free (:func:`_checkout`), whose
        memory of the last read makes :meth:`HermesReader.signatures` incremental."""
        pooled = _checkout(self.db_path)
        conn, seen = pooled.conn, pooled.seen
        reusable = False
        try:
            conn.execute("BEGIN")
            try:
                yield HermesReader(conn, seen, self)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            # Ends a read of state.db (nothing there is written) and keeps this read's TEMP rows.
            conn.execute("COMMIT")
            seen.committed()
            reusable = True
        except sqlite3.DatabaseError as exc:
            raise RecallError(f"cannot read session database {self.db_path}: {exc}", "db_unreadable") from exc
        finally:
            _checkin(self.db_path, pooled, reusable)


@dataclass
class _Pooled:
    conn: sqlite3.Connection
    inode: int
    seen: _Seen


#: Idle reader connections by database, least recently used first, with what each last saw.
#: Bounded as :data:`_watches` is, and for the same reason; a connection in use is not here,
#: so two reads at once each have their own.
_pool: OrderedDict[str, _Pooled] = OrderedDict()
_pool_lock = threading.Lock()


def _checkout(path: Path) -> _Pooled:
    try:
        inode = path.stat().st_ino
    except OSError:
        inode = -1
    with _pool_lock:
        pooled = _pool.pop(str(path), None)
    if pooled is not None:
        if pooled.inode == inode:
            return pooled
        pooled.conn.close()  # the file was replaced: what this connection saw is not of it
    conn = connect_readonly(path)
    conn.execute("PRAGMA temp_store=MEMORY")
    return _Pooled(conn, inode, _Seen())


def _checkin(path: Path, pooled: _Pooled, reusable: bool) -> None:
    if not reusable:
        pooled.conn.close()
        return
    with _pool_lock:
        old = _pool.pop(str(path), None)
        _pool[str(path)] = pooled
        _close_beyond_bound(_pool)
    if old is not None:
        old.conn.close()
