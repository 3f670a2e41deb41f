"""Another agent's JSONL transcripts as a :class:`~project_history_recall.sources.Source`,
read incrementally and never written.

Each file is known by its identity (inode, size, mtime) and a high-water mark: the byte
offset after its last complete line, with the bytes just before it to tell an append from
a rewrite. A file that only grew is read from that offset, so appending one line to a live
transcript parses one line; a file rewritten or replaced is read again from its start. What
was parsed is kept in our own index database (``file_messages`` and friends, see
:data:`~project_history_recall.index.store.TRANSCRIPT_TABLES`), never beside the agent's
files, and never for a session a person withheld. When that database cannot be written (no
index yet, a read-only home, a busy writer) the files are parsed whole into memory instead:
the answer is the same, only slower.

Message ids are stable integers derived from where a message sits: a number given to its
file once and for all, its line and its place in that line (:func:`message_id`). They lie
above every Hermes id and below 2**53 (exact in JSON everywhere). These sources have no
global message high-water mark: a file's change already changes its sessions' content
signatures, so :meth:`TranscriptReader.max_message_id` is 0 and the composite's mark stays
Hermes's.

A format (:class:`Format`) turns one parsed line into messages and session facts; it keeps
what it needs between lines in a JSON-able state stored with the file, so parsing resumes
mid-file. Malformed lines, unknown types, oversized lines and a truncated last line are
skipped and counted (``status`` shows the counts), never raised.
"""

from __future__ import annotations

import datetime
import fnmatch
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from project_history_recall.index.store import TRANSCRIPT_TABLES, Index, transaction
from project_history_recall.redaction import strip_private
from project_history_recall.sources import SourceMessage, SourceSession, ToolCall
from project_history_recall.sources.file_watch import FileWatch
from project_history_recall.sources.withholding import Withholding, withheld_ids

ID_BASE = 1 << 52
_FILE_SHIFT, _LINE_SHIFT = 30, 6
MAX_FILES = 1 << 22
MAX_LINES = 1 << 24
PER_LINE = 1 << _LINE_SHIFT
#: A line longer than this (a pasted log, a huge tool result) is skipped and counted.
MAX_LINE_BYTES = 16 << 20
#: A tool result is kept only as far as anything reads it (a head for search, a failure flag).
RESULT_CHARS = 1_000
_TAIL_BYTES = 64
FILES_PER_TRANSACTION = 200
_BATCH = 2_000


def message_id(file_no: int, line: int, part: int) -> int:
    """The id of the ``part``-th message of line ``line`` (1-based) of file ``file_no``."""
    return ID_BASE + (file_no << _FILE_SHIFT) + (line << _LINE_SHIFT) + part


def file_id_range(file_no: int) -> tuple[int, int]:
    low = ID_BASE + (file_no << _FILE_SHIFT)
    return low, low + (1 << _FILE_SHIFT) - 1


@dataclass
class SessionFacts:
    """What a format learns about one session as lines go by (kept in the file's state)."""

    parent: str | None = None
    started_at: float = 0.0
    cwd: str | None = None
    git_branch: str | None = None
    title: str | None = None
    hidden: bool = False


@dataclass
class LineResult:
    """One line's messages (``(session id, message)``), or why it was skipped."""

    messages: list[tuple[str, SourceMessage]] = field(default_factory=list)
    skipped: str | None = None


class Format(Protocol):
    """One agent's transcript layout."""

    name: str

    def files(self, root: Path) -> Iterator[str]:
        """The transcript files under ``root`` (none when it is missing), cheaply: this runs
        before every read."""
        ...

    def parse(self, path: Path, state: dict, sessions: dict[str, SessionFacts], record: dict,
              ids: IdMaker) -> LineResult:
        """One line's JSON object; ``state``/``sessions`` carry over to the next line."""
        ...


class IdMaker:
    """Ids for the messages of one line; more than :data:`PER_LINE` are dropped."""

    def __init__(self, file_no: int, line: int) -> None:
        self.file_no, self.line, self.used = file_no, line, 0

    def next(self) -> int | None:
        if self.used >= PER_LINE:
            return None
        self.used += 1
        return message_id(self.file_no, self.line, self.used - 1)


def text_parts(value: object) -> str:
    """Text of a string or a list of parts (``{"type": "text", "text": ...}`` and similar)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return ""
    texts = [p["text"] for p in value if isinstance(p, dict) and isinstance(p.get("text"), str)]
    texts += [p for p in value if isinstance(p, str)]
    return "\n".join(t for t in texts if t)


def timestamp(value: object) -> float | None:
    """An ISO 8601 timestamp (``...Z`` included) or epoch number, as epoch seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value) / (1000.0 if value > 1e11 else 1.0)
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def tool_call(call_id: object, name: str, arguments: object) -> ToolCall:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return ToolCall(id=str(call_id or ""), name=name, arguments=args)


def _private(message: SourceMessage) -> SourceMessage:
    """``<private>`` spans are gone before anything is stored (the withholding reader strips
    them again on the way to the index: a no-op by then)."""
    calls = tuple(ToolCall(c.id, c.name, strip_private(c.arguments)) for c in message.tool_calls)
    content = message.content[:RESULT_CHARS] if message.role == "tool" else message.content
    return SourceMessage(message.id, message.role, strip_private(content), message.timestamp, calls,
                         message.tool_name, message.tool_call_id, message.failed)


@dataclass
class _FileRow:
    path: str
    file_no: int
    inode: int | None = None
    size: int = 0
    mtime_ns: int = 0
    offset: int = 0
    tail: bytes | None = None
    generation: int = 0
    lines: int = 0
    state: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)


#: Lines parsed by every transcript source of this process, per source name: what the
#: incremental tests count (an appended line must cost one line, whatever the file's size).
lines_parsed: dict[str, int] = {}
_counter_lock = threading.Lock()


class TranscriptSource:
    """The files of one :class:`Format` under ``root``, parsed into ``index`` (see the module)."""

    def __init__(self, fmt: Format, root: Path, index: Index,
                 rules: Callable[[], Withholding] | None = None) -> None:
        self.format = fmt
        self.name = fmt.name
        self.root = root
        self.index = index
        #: What a person withheld: its messages are never kept here (see :meth:`_withhold`).
        self.rules = rules
        #: The files' ``stat`` between searches (the check before each one).
        self.watch = FileWatch(str(root), lambda: self.format.files(self.root))

    def exists(self) -> bool:
        return self.root.is_dir()

    def file_count(self) -> int:
        return sum(1 for _ in self.format.files(self.root))

    def change_marker(self) -> str | None:
        """Every file's inode, size and mtime, folded (an append changes its size), as
        :attr:`watch` keeps them without a ``stat`` of every file each time."""
        count, folded = self.watch.marker()
        return f"{self.name}:{count}:{folded:016x}"

    @contextmanager
    def read(self) -> Iterator[TranscriptReader]:
        stats = self.watch.stats()
        conn = self._writable()
        if conn is None:
            conn = self._in_memory()
        try:
            self._update(conn, stats)
            if conn.execute("SELECT 1 FROM file_sessions WHERE source = ? LIMIT 1", (self.name,)).fetchone() is None:
                # Nothing to read consistently: a snapshot held for the whole refresh would only
                # keep the index's log from being copied back while the refresh writes it.
                yield TranscriptReader(conn, self.name)
                return
            conn.execute("BEGIN")
            try:
                yield TranscriptReader(conn, self.name)
            finally:
                conn.execute("ROLLBACK")
        finally:
            conn.close()

    # -- where the parse lives --

    def _writable(self) -> sqlite3.Connection | None:
        """Our index, when it exists with these tables and can be written right now."""
        if not self.index.exists():
            return None
        try:
            conn = sqlite3.connect(self.index.path, isolation_level=None, check_same_thread=False, timeout=2.0)
            conn.row_factory = sqlite3.Row
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "file_messages" not in tables:
                conn.close()
                return None
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            return None
        return conn

    def _in_memory(self) -> sqlite3.Connection:
        """A private copy of the tables; files keep the numbers the index gave them, if any."""
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        for statement in TRANSCRIPT_TABLES.split(";"):
            if statement.strip():
                conn.execute(statement)
        known = self.index.connect_readonly()
        if known is not None:
            try:
                rows = known.execute("SELECT file_no, path FROM file_numbers").fetchall()
            except sqlite3.Error:
                rows = []
            finally:
                known.close()
            conn.executemany("INSERT INTO file_numbers(file_no, path) VALUES (?, ?)",
                             [(r["file_no"], r["path"]) for r in rows])
        return conn

    # -- bringing the parse up to date --

    def _update(self, conn: sqlite3.Connection, stats: dict[str, os.stat_result]) -> None:
        """In transactions of :data:`FILES_PER_TRANSACTION` files, each file's row read again
        inside its own: a first build does not hold the index's write lock for its whole parse,
        and two processes bringing the same file up to date write the same rows."""
        known = {r["path"]: (r["inode"], r["size"], r["mtime_ns"])
                 for r in conn.execute("SELECT path, inode, size, mtime_ns FROM source_files WHERE source = ?",
                                       (self.name,))}
        changed = [(path, stat) for path, stat in sorted(stats.items())
                   if known.get(path) != (stat.st_ino, stat.st_size, stat.st_mtime_ns)]
        gone_paths = set(known) - set(stats)
        if gone_paths:  # a write transaction only when there is something to write
            with transaction(conn):
                for gone in gone_paths:
                    row = conn.execute("SELECT file_no FROM source_files WHERE path = ?", (gone,)).fetchone()
                    if row is not None:
                        self._drop(conn, row[0])
                    conn.execute("DELETE FROM source_files WHERE path = ?", (gone,))
        for start in range(0, len(changed), FILES_PER_TRANSACTION):
            with transaction(conn):
                for path, stat in changed[start : start + FILES_PER_TRANSACTION]:
                    row = conn.execute("SELECT * FROM source_files WHERE path = ?", (path,)).fetchone()
                    if row is not None and (row["inode"], row["size"], row["mtime_ns"]) == (
                            stat.st_ino, stat.st_size, stat.st_mtime_ns):
                        continue
                    current = _FileRow(path, self._file_no(conn, path)) if row is None else _FileRow(
                        path, row["file_no"], row["inode"], row["size"], row["mtime_ns"], row["offset"], row["tail"],
                        row["generation"], row["lines"], json.loads(row["state"]), json.loads(row["skipped"]))
                    self._parse(conn, current, stat)
        rules = self.rules() if self.rules is not None else None
        if rules is not None and not rules.empty:
            with transaction(conn):
                self._withhold(conn, rules)

    def _withhold(self, conn: sqlite3.Connection, rules: Withholding) -> None:
        """Drop the parsed messages of sessions that are forgotten or excluded now, and mark their
        files unread: what is withheld stays out of our database, and comes back (read again from
        the file) once it is no longer withheld. Such a file is parsed on every read meanwhile."""
        hidden = json.dumps(sorted(withheld_ids(TranscriptReader(conn, self.name).sessions(), rules)))
        conn.execute("DELETE FROM file_messages WHERE session_id IN (SELECT value FROM json_each(?))", (hidden,))
        conn.execute("UPDATE source_files SET inode = NULL WHERE file_no IN (SELECT file_no FROM file_sessions "
                     "WHERE id IN (SELECT value FROM json_each(?)))", (hidden,))

    def _file_no(self, conn: sqlite3.Connection, path: str) -> int:
        row = conn.execute("SELECT file_no FROM file_numbers WHERE path = ?", (path,)).fetchone()
        if row is not None:
            return int(row[0])
        return int(conn.execute("INSERT INTO file_numbers(path) VALUES (?) RETURNING file_no", (path,)).fetchone()[0])

    def _drop(self, conn: sqlite3.Connection, file_no: int) -> None:
        low, high = file_id_range(file_no)
        conn.execute("DELETE FROM file_messages WHERE id BETWEEN ? AND ?", (low, high))
        conn.execute("DELETE FROM file_sessions WHERE file_no = ?", (file_no,))

    def _appended(self, row: _FileRow, stat: os.stat_result, handle: object) -> bool:
        """Did the file only grow since ``row`` (same inode, the bytes before the mark unchanged)?"""
        if row.inode != stat.st_ino or stat.st_size < row.offset or row.offset == 0:
            return False
        start = max(0, row.offset - _TAIL_BYTES)
        handle.seek(start)  # type: ignore[attr-defined]
        return bool(handle.read(row.offset - start) == (row.tail or b""))  # type: ignore[attr-defined]

    def _parse(self, conn: sqlite3.Connection, row: _FileRow, stat: os.stat_result) -> None:
        path = Path(row.path)
        try:
            handle = path.open("rb")
        except OSError:
            return
        with handle:
            if not self._appended(row, stat, handle):
                self._drop(conn, row.file_no)
                row = _FileRow(row.path, row.file_no, generation=row.generation + 1)
            handle.seek(row.offset)
            sessions = {sid: SessionFacts(**facts) for sid, facts in row.state.pop("sessions", {}).items()}
            state = row.state
            skipped = {k: v for k, v in row.skipped.items() if k != "partial"}
            pending: list[tuple] = []
            parsed = 0
            if row.file_no >= MAX_FILES:
                skipped["files_over_limit"] = 1
                handle.seek(0, os.SEEK_END)
                row.offset = handle.tell()
            for length, raw, complete in _lines(handle):
                record: object = None
                if raw is None:
                    reason: str | None = "huge"
                else:
                    try:
                        record = json.loads(raw)
                        reason = None if isinstance(record, dict) else "malformed"
                    except (ValueError, RecursionError):
                        reason = "malformed"
                if not complete and reason is not None:
                    # A live writer's line in progress: read again once it is whole.
                    skipped["partial"] = 1
                    break
                row.offset += length
                row.lines += 1
                parsed += 1
                if raw is not None and not raw.strip():
                    continue
                if row.lines >= MAX_LINES:
                    skipped["lines_over_limit"] = skipped.get("lines_over_limit", 0) + 1
                    continue
                if reason is None:
                    assert isinstance(record, dict)
                    result = self.format.parse(path, state, sessions, record, IdMaker(row.file_no, row.lines))
                    reason = result.skipped
                    for sid, message in result.messages:
                        message = _private(message)
                        pending.append((message.id, sid, message.role, message.content, message.timestamp,
                                        json.dumps([[c.id, c.name, c.arguments] for c in message.tool_calls])
                                        if message.tool_calls else None, message.tool_name, message.tool_call_id,
                                        None if message.failed is None else int(message.failed)))
                    if len(pending) >= _BATCH:
                        _insert(conn, pending)
                if reason is not None:
                    skipped[reason] = skipped.get(reason, 0) + 1
            _insert(conn, pending)
            start = max(0, row.offset - _TAIL_BYTES)
            handle.seek(start)
            row.tail = handle.read(row.offset - start)
        with _counter_lock:
            lines_parsed[self.name] = lines_parsed.get(self.name, 0) + parsed
        self._write_sessions(conn, row, sessions)
        state["sessions"] = {sid: facts.__dict__ for sid, facts in sessions.items()}
        conn.execute(
            "INSERT OR REPLACE INTO source_files(path, source, file_no, inode, size, mtime_ns, offset, tail, "
            "generation, lines, state, skipped) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (row.path, self.name, row.file_no, stat.st_ino, stat.st_size, stat.st_mtime_ns, row.offset, row.tail,
             row.generation, row.lines, json.dumps(state), json.dumps(skipped)))

    def _write_sessions(self, conn: sqlite3.Connection, row: _FileRow, sessions: dict[str, SessionFacts]) -> None:
        for sid, facts in sessions.items():
            count, last = conn.execute("SELECT COUNT(*), COALESCE(MAX(id), 0) FROM file_messages WHERE session_id = ?",
                                       (sid,)).fetchone()
            signature = json.dumps([facts.parent, facts.cwd, facts.git_branch, facts.title, facts.hidden])
            conn.execute(
                "INSERT OR REPLACE INTO file_sessions(id, source, file_no, parent_session_id, started_at, cwd, "
                "git_branch, title, hidden, message_count, signature, content_signature) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (sid, self.name, row.file_no, facts.parent, facts.started_at, facts.cwd, facts.git_branch,
                 facts.title, int(facts.hidden), count, signature, f"{row.generation}:{count}:{last}"))

    def status(self) -> dict:
        """This source's folder, and what the index read of it and skipped (counts, never
        content), from the index as it stands: status reads, it does not parse."""
        info: dict = {"folder": str(self.root), "exists": self.exists()}
        conn = self.index.connect_readonly()
        if conn is None:
            return info
        try:
            info.update(TranscriptReader(conn, self.name).counts())
        except sqlite3.Error:
            pass
        finally:
            conn.close()
        return info


def agent_home(env_var: str, dot_folder: str, *below: str) -> Path:
    """An agent's history folder: ``$env_var`` when set (how each agent lets its user move it),
    else ``~/dot_folder``; ``below`` is the part under it that holds the transcripts."""
    base = os.environ.get(env_var) or os.path.join(os.path.expanduser("~"), dot_folder)
    return Path(base, *below)


def matching(root: str | Path, *pattern: str) -> Iterator[str]:
    """Paths under ``root`` whose parts match ``pattern`` one folder level each (``fnmatch``
    patterns), found with ``os.scandir``: no ``stat`` of the folders walked through."""
    head, rest = pattern[0], pattern[1:]
    try:
        listing = os.scandir(root)
    except OSError:
        return
    with listing:
        for entry in listing:
            if head != "*" and not fnmatch.fnmatchcase(entry.name, head):
                continue
            if not rest:
                yield entry.path
            elif entry.is_dir(follow_symlinks=False):
                yield from matching(entry.path, *rest)


def _lines(handle: object) -> Iterator[tuple[int, bytes | None, bool]]:
    """``(bytes, line, ends with a newline)`` per line; the last one may lack its newline (a
    writer mid-line). A line over :data:`MAX_LINE_BYTES` comes as None, read past in bounded
    pieces: no line is ever held whole beyond that."""
    limit = MAX_LINE_BYTES
    while True:
        raw = handle.readline(limit + 1)  # type: ignore[attr-defined]
        if not raw:
            return
        if len(raw) <= limit:
            yield len(raw), raw, raw.endswith(b"\n")
            continue
        length, complete = len(raw), raw.endswith(b"\n")
        while not complete:
            more = handle.readline(1 << 20)  # type: ignore[attr-defined]
            if not more:
                break
            length += len(more)
            complete = more.endswith(b"\n")
        yield length, None, complete


def _insert(conn: sqlite3.Connection, pending: list[tuple]) -> None:
    if pending:
        conn.executemany(
            "INSERT OR REPLACE INTO file_messages(id, session_id, role, content, timestamp, tool_calls, tool_name, "
            "tool_call_id, failed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", pending)
        pending.clear()


class TranscriptReader:
    """A consistent view of one transcript source's parse (one read transaction)."""

    def __init__(self, conn: sqlite3.Connection, source: str) -> None:
        self._conn = conn
        self._source = source

    def signatures(self) -> dict[str, tuple[str, str]]:
        rows = self._conn.execute("SELECT id, signature, content_signature FROM file_sessions WHERE source = ?",
                                  (self._source,))
        return {r[0]: (r[1], r[2]) for r in rows}

    def sessions(self, ids: Iterable[str] | None = None) -> dict[str, SourceSession]:
        sql = "SELECT * FROM file_sessions WHERE source = ?"
        params: tuple = (self._source,)
        if ids is not None:
            sql += " AND id IN (SELECT value FROM json_each(?))"
            params += (json.dumps(list(ids)),)
        return {row["id"]: SourceSession(
            id=row["id"], source=self._source, started_at=row["started_at"],
            parent_session_id=row["parent_session_id"], cwd=row["cwd"], git_branch=row["git_branch"],
            title=row["title"], hidden=bool(row["hidden"]), message_count=row["message_count"],
            signature=row["signature"], content_signature=row["content_signature"],
        ) for row in self._conn.execute(sql, params)}

    def max_message_id(self) -> int:
        return 0

    def sessions_with_messages_after(self, message_id: int) -> set[str]:
        return set()

    @staticmethod
    def _message(row: sqlite3.Row) -> SourceMessage:
        calls = tuple(ToolCall(*c) for c in json.loads(row["tool_calls"])) if row["tool_calls"] else ()
        return SourceMessage(row["id"], row["role"], row["content"], row["timestamp"], calls, row["tool_name"],
                             row["tool_call_id"], None if row["failed"] is None else bool(row["failed"]))

    def messages(self, session_id: str) -> list[SourceMessage]:
        rows = self._conn.execute("SELECT * FROM file_messages WHERE session_id = ? ORDER BY id", (session_id,))
        return [self._message(r) for r in rows]

    def iter_all_messages(self) -> Iterator[tuple[str, SourceMessage]]:
        rows = self._conn.execute(
            "SELECT m.* FROM file_messages m JOIN file_sessions s ON s.id = m.session_id WHERE s.source = ? "
            "ORDER BY m.session_id, m.id", (self._source,))
        for row in rows:
            yield row["session_id"], self._message(row)

    def portable(self) -> None:
        """The parse lives in this refresh's own transaction on the index: read here only."""
        return None

    def counts(self) -> dict:
        files, lines = self._conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(lines), 0) FROM source_files WHERE source = ?", (self._source,)).fetchone()
        skipped: dict[str, int] = {}
        for (text,) in self._conn.execute("SELECT skipped FROM source_files WHERE source = ?", (self._source,)):
            for key, value in json.loads(text).items():
                skipped[key] = skipped.get(key, 0) + int(value)
        return {"files": files, "lines": lines, "sessions": len(self.signatures()), "skipped": skipped}
