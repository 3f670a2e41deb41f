"""The plugin's own SQLite index: schema, migrations, and the one connection rule.

One file per Hermes profile (``$HERMES_HOME/plugins/project-history-recall/index.db``).
It can always be rebuilt from the source, so a damaged file is moved aside and
built again rather than trusted. Schema changes are appended to
:data:`MIGRATIONS` (``PRAGMA user_version`` counts how many ran); never edit one
that has shipped.
"""

from __future__ import annotations

import contextlib
import datetime
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path

from project_history_recall.errors import RecallError
from project_history_recall.index.vector_codec import from_float32
from project_history_recall.locks import exclusive
from project_history_recall.tokenizer import FTS_TOKENIZE, TOKENIZER_VERSION

INDEX_FILENAME = "index.db"

_V1 = f"""
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    parent_session_id TEXT,
    started_at REAL NOT NULL DEFAULT 0,
    ended_at REAL,
    end_reason TEXT,
    cwd TEXT,
    git_branch TEXT,
    git_repo_root TEXT,
    repo_root TEXT,
    branch TEXT,
    title TEXT,
    archived INTEGER NOT NULL DEFAULT 0,
    hidden INTEGER NOT NULL DEFAULT 0,
    message_count INTEGER NOT NULL DEFAULT 0,
    entry_count INTEGER NOT NULL DEFAULT 0,
    last_active REAL,
    signature TEXT NOT NULL,
    content_signature TEXT NOT NULL,
    indexed_at REAL NOT NULL
);
CREATE TABLE entries (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    message_id INTEGER,
    position INTEGER NOT NULL,
    kind TEXT NOT NULL,
    role TEXT NOT NULL,
    tool_name TEXT,
    timestamp REAL NOT NULL,
    text TEXT NOT NULL,
    context TEXT
);
CREATE INDEX entries_session ON entries(session_id, position);
CREATE INDEX entries_message ON entries(message_id);
CREATE VIRTUAL TABLE entries_fts USING fts5(tokens, content='', tokenize="{FTS_TOKENIZE}");
CREATE TABLE probes (cwd TEXT PRIMARY KEY, repo_root TEXT, branch TEXT, probed_at REAL NOT NULL);
"""

# Semantic search (seed 000 §4.4): one vector per chunk of an entry, keyed by content
# hash and model fingerprint so nothing unchanged is embedded twice and vectors of
# different models are never compared.
_V2 = """
CREATE TABLE chunks (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    message_id INTEGER NOT NULL,
    chunk_index INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    model_fingerprint TEXT NOT NULL,
    vector BLOB NOT NULL,
    created_at REAL NOT NULL,
    UNIQUE(session_id, message_id, chunk_index, model_fingerprint)
);
CREATE INDEX chunks_fingerprint_session ON chunks(model_fingerprint, session_id);
CREATE INDEX chunks_hash ON chunks(content_hash, model_fingerprint)
"""

# The coding scene (seed 003, written by index.edit_phase): one row per recorded edit
# of one file. ``path`` is relative to the checkout the edit was made in, ``abs_path`` is
# where it landed when known (for "is it still in the file"). ``raw`` is the edit's raw
# material (Hermes's diff, the V4A section, a quoted diff): patches and symbols are made
# from it at query time (see index.edits.render_edit). No project identity and no
# branch here: both come from ``sessions`` at query time. ``said``/``said_message_id``
# are the user's words that asked for the edit. The UPDATE makes the next refresh re-read
# every session, so an index built before this table gets its edits too.
_V3 = """
CREATE TABLE edits (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    message_id INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    timestamp REAL NOT NULL,
    path TEXT NOT NULL,
    abs_path TEXT,
    form TEXT NOT NULL,
    old_text TEXT,
    new_text TEXT,
    raw TEXT,
    said TEXT,
    said_message_id INTEGER
);
CREATE INDEX edits_path ON edits(path, timestamp);
CREATE INDEX edits_session ON edits(session_id, message_id);
UPDATE sessions SET content_signature = ''
"""

# The edit chain became its own phase after the keyword index (issue 13): which content
# signature each session's edits were extracted from. Empty after this migration, so the
# next refresh extracts every session's edits once more (the rows there stay until replaced).
_V4 = """
CREATE TABLE edit_state (session_id TEXT PRIMARY KEY, content_signature TEXT NOT NULL)
"""


def _v5_compact_vectors(conn: sqlite3.Connection) -> None:
    """Vectors stored in a quarter of the bytes (issue 17): int8 with a per-vector scale
    (:mod:`.vector_codec`), the model fingerprint once in ``models`` instead of in every row
    and two of its indexes, and the content hash as its first 16 bytes instead of 64 hex
    characters. Existing vectors are converted, not re-embedded."""
    conn.execute("CREATE TABLE models (id INTEGER PRIMARY KEY, fingerprint TEXT NOT NULL UNIQUE)")
    conn.execute("""
        CREATE TABLE compact_chunks (
            id INTEGER PRIMARY KEY,
            model_id INTEGER NOT NULL,
            session_id TEXT NOT NULL,
            message_id INTEGER NOT NULL,
            chunk_index INTEGER NOT NULL,
            content_hash BLOB NOT NULL,
            vector BLOB NOT NULL,
            UNIQUE(model_id, session_id, message_id, chunk_index)
        )""")
    conn.execute("INSERT INTO models(fingerprint) SELECT DISTINCT model_fingerprint FROM chunks")
    old = conn.execute("SELECT m.id, c.session_id, c.message_id, c.chunk_index, c.content_hash, c.vector "
                       "FROM chunks c JOIN models m ON m.fingerprint = c.model_fingerprint")
    conn.executemany(
        "INSERT INTO compact_chunks(model_id, session_id, message_id, chunk_index, content_hash, vector) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        ((model, sid, mid, idx, short_hash(digest), from_float32(vector))
         for model, sid, mid, idx, digest, vector in old))
    conn.execute("DROP TABLE chunks")
    conn.execute("ALTER TABLE compact_chunks RENAME TO chunks")
    conn.execute("CREATE INDEX chunks_hash ON chunks(content_hash, model_id)")


def short_hash(content_hash: str) -> bytes:
    """A chunk's SHA-256 (hex) as the 16 bytes the index keeps (``b""`` for the empty marker)."""
    return bytes.fromhex(content_hash)[:16]


# The plugin's own recall tool calls are no longer indexed (issue 19.4): every session is
# read once more, so the calls already indexed go.
_V6 = """
UPDATE sessions SET content_signature = ''
"""

# ``<private>`` spans are no longer indexed (issue 15): every session is read again, its edits
# extracted again, and the vectors of messages that held such a span are made again.
_V7 = """
DELETE FROM chunks WHERE message_id IN (SELECT message_id FROM entries WHERE text LIKE '%<private>%');
DELETE FROM edit_state;
UPDATE sessions SET content_signature = ''
"""

# A probe remembers how its folder looked (:func:`.probes.folder_marker`), so a folder
# re-pointed under the index is probed again (issue 18 §3); older probes have none and are
# probed once more.
_V8 = """
ALTER TABLE probes ADD COLUMN folder_marker TEXT
"""

# Other agents' transcripts (issue 16): JSONL files read incrementally. ``source_files`` is the
# per-file manifest (identity, the byte offset read up to, the parser's state), ``file_number``
# numbers each file for good so message ids stay stable (see sources.transcripts.message_id);
# ``file_sessions``/``file_messages`` hold what was parsed, so an appended line is all that is
# read next time. Everything here is rebuilt from the agents' files when missing.
TRANSCRIPT_TABLES = """
CREATE TABLE file_numbers (file_no INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE);
CREATE TABLE source_files (
    path TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    file_no INTEGER NOT NULL,
    inode INTEGER,
    size INTEGER NOT NULL DEFAULT 0,
    mtime_ns INTEGER NOT NULL DEFAULT 0,
    offset INTEGER NOT NULL DEFAULT 0,
    tail BLOB,
    generation INTEGER NOT NULL DEFAULT 0,
    lines INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL DEFAULT '{}',
    skipped TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE file_sessions (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    file_no INTEGER NOT NULL,
    parent_session_id TEXT,
    started_at REAL NOT NULL DEFAULT 0,
    cwd TEXT,
    git_branch TEXT,
    title TEXT,
    hidden INTEGER NOT NULL DEFAULT 0,
    message_count INTEGER NOT NULL DEFAULT 0,
    signature TEXT NOT NULL DEFAULT '',
    content_signature TEXT NOT NULL DEFAULT ''
);
CREATE INDEX file_sessions_file ON file_sessions(file_no);
CREATE TABLE file_messages (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    timestamp REAL NOT NULL,
    tool_calls TEXT,
    tool_name TEXT,
    tool_call_id TEXT,
    failed INTEGER
);
CREATE INDEX file_messages_session ON file_messages(session_id, id)
"""
_V9 = TRANSCRIPT_TABLES

# Keyword search checks the scope of every BM25 match (thousands a query) by its entry's
# session: looked up in ``entries`` itself, whose rows hold the texts, that was a third of the
# ranking query. This covering index answers it from a few small pages (issue 17.2).
ENTRY_SESSION_INDEX = "entries_id_session"
_V10 = f"""
CREATE INDEX {ENTRY_SESSION_INDEX} ON entries(id, session_id)
"""

REQUIRED_TABLES = frozenset({"meta", "sessions", "entries", "entries_fts", "probes", "chunks", "edits",
                             "edit_state", "models", "file_numbers", "source_files", "file_sessions",
                             "file_messages"})

Migration = str | Callable[[sqlite3.Connection], None]
MIGRATIONS: list[Migration] = [_V1, _V2, _V3, _V4, _v5_compact_vectors, _V6, _V7, _V8, _V9, _V10]


def schema_version() -> int:
    return len(MIGRATIONS)


#: How large the write-ahead log file stays: SQLite cuts it back to this when it restarts the log
#: (``journal_size_limit``; its own checkpoint runs at 1,000 pages, 4 MB), and a refresh that
#: leaves it larger empties it (:meth:`Index.trim_log`).
WAL_LIMIT_BYTES = 4 << 20


def _configure(conn: sqlite3.Connection) -> None:
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA journal_size_limit={WAL_LIMIT_BYTES}")
    conn.execute("PRAGMA busy_timeout=5000")
    conn.execute("PRAGMA temp_store=MEMORY")


#: Migrations applied by this process: part of :meth:`Index.identity`, so that what a
#: process knew about an index before migrating it is not trusted after.
_migrations_applied = 0


def _migrate(conn: sqlite3.Connection) -> None:
    global _migrations_applied
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    if current > len(MIGRATIONS):
        raise RecallError(
            f"index schema version {current} is newer than this plugin understands ({len(MIGRATIONS)})",
            "index_future_version",
        )
    for version, migration in enumerate(MIGRATIONS[current:], start=current + 1):
        with transaction(conn):
            if isinstance(migration, str):
                for statement in migration.split(";"):
                    if statement.strip():
                        conn.execute(statement)
            else:
                migration(conn)
            conn.execute(f"PRAGMA user_version = {version}")
            conn.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('tokenizer_version', ?)",
                (str(TOKENIZER_VERSION),),
            )
            # A new schema may need what the last refresh skipped: the next one compares again.
            conn.execute("DELETE FROM meta WHERE key = 'source_marker'")
        _migrations_applied += 1


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


#: One idle reader per index file of this process, with what its files looked like then, least
#: recently used first; a process that served many homes (a gateway) keeps the last few open.
_kept_readers: OrderedDict[str, tuple[tuple, sqlite3.Connection]] = OrderedDict()
MAX_KEPT_READERS = 4
_kept_readers_lock = threading.Lock()


class Index:
    """Paths and connections for one index file."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.path = data_dir / INDEX_FILENAME
        self.lock_path = data_dir / "index.lock"

    def exists(self) -> bool:
        return self.path.is_file() and self.path.stat().st_size > 0

    def identity(self) -> tuple[int, int, int] | None:
        """Which file is the index right now (it changes when one is moved aside and rebuilt,
        and when this process migrates it)."""
        try:
            stat = self.path.stat()
        except OSError:
            return None
        return (stat.st_dev, stat.st_ino, _migrations_applied)


    def connect(self) -> sqlite3.Connection:
        """Open (creating and migrating when needed). A file that is not a usable
        index is moved aside and replaced: the index is always rebuildable."""
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RecallError(f"the plugin's data folder {self.data_dir} is not usable: {exc}",
                              "data_dir_unusable") from exc
        try:
            return self._open()
        except RecallError as exc:
            if exc.code not in ("index_corrupt", "index_future_version"):
                raise
            self.move_aside(exc.code)
            return self._open()

    def _open(self) -> sqlite3.Connection:
        conn = None
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=5.0)
            _configure(conn)
            _migrate(conn)
            row = conn.execute("SELECT value FROM meta WHERE key = 'tokenizer_version'").fetchone()
            if row is None or row[0] != str(TOKENIZER_VERSION):
                raise RecallError("index was written by another tokenizer", "index_corrupt")
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not tables >= REQUIRED_TABLES:
                raise RecallError(f"index is missing {sorted(REQUIRED_TABLES - tables)}", "index_corrupt")
        except sqlite3.DatabaseError as exc:
            if conn is not None:
                conn.close()
            raise RecallError(f"index file is damaged: {exc}", "index_corrupt") from exc
        except RecallError:
            if conn is not None:
                conn.close()
            raise
        return conn

    def connect_readonly(self) -> sqlite3.Connection | None:
        """A reader for an index that exists and is current; None otherwise. Never creates a file."""
        if not self.exists():
            return None
        try:
            conn, version = self._reader("mode=ro")
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", None) != sqlite3.SQLITE_CANTOPEN:
                return None
            # A WAL index in a folder nobody may write to (a read-only home) cannot get its
            # shared-memory file: read the file as it stands; the refresh says it is stale.
            try:
                conn, version = self._reader("mode=ro&immutable=1")
            except sqlite3.DatabaseError:
                return None
        except sqlite3.DatabaseError:
            return None
        if version != len(MIGRATIONS):
            conn.close()
            return None
        return conn

    @contextlib.contextmanager
    def reading(self) -> Iterator[sqlite3.Connection | None]:
        """:meth:`connect_readonly`'s reader, kept for the next read of this process when this
        one ends well. A new connection opens the file, parses the schema and starts with an
        empty page cache: about 2 ms of a keyword search on the real corpus. Outside a
        transaction a kept connection sees every commit. It is closed instead of reused when the
        files look different (:meth:`_reader_key`): moved aside or migrated, and also when the
        file was checkpointed or written in place (a truncated file must fail its next read, not
        be answered from the old connection's cache), which a commit alone never does. Two reads
        at once each get their own."""
        identity = self._reader_key()
        with _kept_readers_lock:
            kept = _kept_readers.pop(str(self.path), None)
        if kept is not None and kept[0] != identity:
            kept[1].close()
            kept = None
        conn = kept[1] if kept is not None else self.connect_readonly()
        try:
            yield conn
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        if conn is None:
            return
        if conn.in_transaction:
            conn.close()
            return
        with _kept_readers_lock:
            previous = _kept_readers.pop(str(self.path), None)  # another read's, ended meanwhile
            closing = [previous] if previous is not None else []
            _kept_readers[str(self.path)] = (identity, conn)
            while len(_kept_readers) > MAX_KEPT_READERS:
                closing.append(_kept_readers.popitem(last=False)[1])
        for _, old in closing:
            old.close()

    def _reader_key(self) -> tuple:
        """The index file's identity, size and mtime, and which WAL and shared-memory files are
        beside it: what a kept reader was opened on."""
        parts: list[object] = [self.identity()]
        for suffix in ("", "-wal", "-shm"):
            try:
                stat = self.path.with_name(self.path.name + suffix).stat()
            except OSError:
                parts.append(None)
                continue
            parts.append(stat.st_ino if suffix else (stat.st_size, stat.st_mtime_ns))
        return tuple(parts)

    def _reader(self, flags: str) -> tuple[sqlite3.Connection, int]:
        conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?{flags}", uri=True,
                               isolation_level=None, check_same_thread=False, timeout=5.0)
        conn.row_factory = sqlite3.Row
        try:
            return conn, conn.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError:
            conn.close()
            raise

    def move_aside(self, reason: str) -> None:
        """Keep a damaged file for inspection and make room for a rebuild."""
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S-%f")  # two in one second keep both
        for suffix in ("", "-wal", "-shm"):
            part = self.path.with_name(self.path.name + suffix)
            if part.exists():
                part.replace(part.with_name(f"{self.path.name}.{reason}-{stamp}{suffix}"))

    def trim_log(self, conn: sqlite3.Connection) -> None:
        """Copy the write-ahead log into the database and empty it, when it is over
        :data:`WAL_LIMIT_BYTES`. SQLite's checkpoint after each commit cannot restart the log
        while a reader holds an older snapshot, and a refresh holds one for its whole length
        (the transcript sources read their parse in one transaction): a first build of the M
        corpus left 172 MB of log beside a 105 MB index, for as long as the process lived.
        Waits for readers up to the connection's busy timeout, then leaves the log as it is."""
        try:
            size = self.path.with_name(self.path.name + "-wal").stat().st_size
        except OSError:
            return
        if size > WAL_LIMIT_BYTES:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def writer(self, timeout: float) -> contextlib.AbstractContextManager[None]:
        """The single-writer lock shared by every process of this profile."""
        return exclusive(self.lock_path, timeout, "another process is updating the index")


def is_damage(exc: BaseException) -> bool:
    """A SQLite error that means the index file itself is bad (not a busy or locked database,
    and not a query FTS5 cannot parse)."""
    text = str(exc).lower()
    return isinstance(exc, sqlite3.DatabaseError) and "syntax error" not in text and any(
        sign in text for sign in ("malformed", "not a database", "no such table", "no such column", "no such index",
                                  "corrupt", "vtable constructor failed", "fts5"))


def get_meta(conn: sqlite3.Connection, key: str, default: str | None = None) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else default


def set_meta(conn: sqlite3.Connection, key: str, value: object) -> None:
    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, str(value)))


# Counters in ``meta`` that say that something changed, so that caches and sweeps key on
# one row instead of comparing tables (each is bumped in the transaction of its change):
#: every write of the keyword phase: what readers derive from ``sessions`` and ``entries``;
GENERATION = "generation"
#: every write to ``chunks``: the caches of vectors and of the backlog;
VECTORS_GENERATION = "vectors_generation"
#: ``chunks`` rows were deleted: the in-memory vector matrix is then read again whole; while
#: nothing is deleted, rows are only added, with ids above every earlier one, and it reads those;
VECTORS_REMOVED = "vectors_removed"
#: sessions left the index (deleted, withheld, or all of them for a rebuild): the edit
#: chain sweeps their rows then, not after every write (the sweep reads every edit: 7 ms at M);
REMOVALS = "sessions_removed"
#: sessions came or went, or what attributes one changed (cwd, repo root, branch, archived,
#: hidden, start): the scope cache. A Hermes turn rewrites its session and changes none of
#: them, so the searches after it do not attribute every session again (20 ms at M).
SCOPE_GENERATION = "scope_generation"
#: ... and, of those, every change but sessions coming: a session left, or an indexed one's
#: attributes changed. While it stands, the scope cache attributes only the sessions that came
#: (a new session, a ``/new`` in Hermes, made every search attribute all of them again: 44 ms at M).
SCOPE_REWRITTEN = "scope_rewritten"


def bump(conn: sqlite3.Connection, counter: str) -> None:
    conn.execute("INSERT INTO meta(key, value) VALUES (?, '1') "
                 "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1", (counter,))


def scope_changed(conn: sqlite3.Connection, *, only_added: bool = False) -> None:
    """Record, in the writing transaction, that what attributes sessions changed; with
    ``only_added``, only by sessions new to the index."""
    bump(conn, SCOPE_GENERATION)
    if not only_added:
        bump(conn, SCOPE_REWRITTEN)


def chunks_deleted(conn: sqlite3.Connection, count: int) -> None:
    """Record, in the deleting transaction, that ``count`` rows left ``chunks`` (none: nothing)."""
    if count:
        bump(conn, VECTORS_GENERATION)
        bump(conn, VECTORS_REMOVED)
