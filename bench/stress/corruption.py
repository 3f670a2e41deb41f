"""Corruption and version drift: damaged or foreign index files, a missing or odd plugin
folder, a ``state.db`` of a schema the plugin does not know, malformed rows.

Each case damages a copy of one small world and asks through the tool handlers
(the JSON the model sees), twice. A case is *handled* when every answer is either
correct (the same sessions as the undamaged world gives, for every query) or a
clear error (``success: false`` with a code other than ``internal``), when no
answer is ever silently wrong, and — for a damaged index — when the second answer
is correct (the index was rebuilt from the source without anyone's help).
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import world

QUERIES = {"ibex": {"s-alpha", "s-beta"}, "walrus": {"s-gamma"}}
ASKER = "s-now"
INDEX_GROUP = "index"


@dataclass
class World:
    """A pristine home (state.db, projects.db, config, a built index) and what it answers."""

    root: Path
    home: Path
    repo: Path
    other: Path


def build_world(root: Path, filler: int = 120, seed: int = 3) -> World:
    from hermes_cli import projects_db
    from hermes_state import SessionDB

    from project_history_recall.recall import Recall

    if root.exists():
        shutil.rmtree(root)
    home = root / "hermes"
    repo = world.git_init(root / "work" / "repo")
    other = root / "work" / "other"
    other.mkdir(parents=True)
    db = SessionDB(db_path=home / "state.db")
    rng = random.Random(seed)
    words = ["lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed", "tempor"]
    clock = 1_767_000_000.0

    def session(sid: str, cwd: Path, *texts: str, tool: bool = False) -> None:
        nonlocal clock
        db.create_session(sid, "cli", cwd=str(cwd))
        for i, text in enumerate(texts):
            clock += 30
            role = "user" if i % 2 == 0 else "assistant"
            calls = None
            if tool and role == "assistant":
                calls = [{"id": f"c{i}", "type": "function",
                          "function": {"name": "terminal", "arguments": json.dumps({"command": "make ibex-check"})}}]
            db.append_message(sid, role, text, tool_calls=calls, timestamp=clock)

    try:
        session("s-alpha", repo, "the ibex release notes", "answered about the ibex")
        session("s-beta", repo / "src", "ibex rollout checklist", "ran the check", tool=True)
        session("s-gamma", repo, "unrelated words: walrus migration", "done")
        for n in range(filler):
            session(f"s-fill-{n:03d}", repo, " ".join(rng.choice(words) for _ in range(60)),
                    " ".join(rng.choice(words) for _ in range(80)))
        session("s-other", other, "ibex in a different project", "walrus too")
        db.create_session(ASKER, "cli", cwd=str(repo))
    finally:
        db.close()
    with projects_db.connect_closing(home / "projects.db") as conn:
        projects_db.create_project(conn, name="Other", folders=[str(other)])
    world.write_config(home)
    Recall(home).refresh()
    world.checkpoint(world.data_dir(home) / "index.db")
    return World(root, home, repo, other)


def copy_world(base: World, dst: Path) -> World:
    home = world.clone_home(base.home, dst / "hermes")
    folder = world.data_dir(home)
    folder.mkdir(parents=True)
    world.snapshot_index(base.home, folder / "index.db")
    return World(dst, home, base.repo, base.other)


# -- asking ---------------------------------------------------------------------------------


def ask(home: Path, query: str) -> dict:
    from project_history_recall.faces.hermes.tools import make_handlers
    from project_history_recall.recall import Recall

    handlers = make_handlers(lambda: Recall(home))
    raw = handlers["project_history_search"]({"query": query, "mode": "keyword", "limit": 10}, session_id=ASKER)
    return json.loads(raw)


def verdict(reply: dict, expected: set[str]) -> str:
    if reply.get("success") is True:
        if reply.get("index_status") == "building":
            return "building"
        got = {r["session_id"] for r in reply.get("results", [])}
        if got == expected:
            return "correct"
        # An honest answer from an index that says it may be behind (the source could not be read).
        return "stale" if reply.get("index_status") in ("stale", "updating") and reply.get("warning", True) else "wrong"
    code = reply.get("code")
    if not code or code == "internal":
        return "internal"
    return f"error:{code}"


@dataclass
class Case:
    name: str
    group: str
    damage: Callable[[World], None]
    expected: dict[str, set[str]] = field(default_factory=lambda: dict(QUERIES))
    error_ok: tuple[str, ...] = ()  # codes that are the right answer for this case (an unusable source)
    must_recover: bool = False  # a damaged index: the second answer must be correct
    stale_ok: bool = False  # the source is unusable: answering from the index as it stands, saying so, is right


@dataclass
class CaseResult:
    name: str
    group: str
    answers: list[str]
    handled: bool
    why: str = ""
    moved_aside: list[str] = field(default_factory=list)
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)  # the error messages answered, for the record


def run_case(base: World, case: Case, work: Path) -> CaseResult:
    target = copy_world(base, work / case.name)
    try:
        case.damage(target)
    except Exception as exc:
        return CaseResult(case.name, case.group, [], False, f"damage failed: {type(exc).__name__}: {exc}")
    started = time.monotonic()
    answers: list[str] = []
    errors: list[str] = []
    rounds = []
    for _ in range(2):
        round_ = []
        for query, expected in case.expected.items():
            reply = ask(target.home, query)
            round_.append(verdict(reply, expected))
            if reply.get("success") is not True and str(reply.get("error"))[:200] not in errors:
                errors.append(str(reply.get("error"))[:200])
        rounds.append(round_)
        answers.append(",".join(round_))
    seconds = round(time.monotonic() - started, 3)
    folder = world.data_dir(target.home)
    aside = sorted(p.name for p in folder.glob("index.db.*")) if folder.is_dir() else []
    flat = [v for r in rounds for v in r]
    why = ""
    if "wrong" in flat:
        why = "a silently wrong answer"
    elif "internal" in flat:
        why = "an internal error (no clear code)"
    elif "stale" in flat and not case.stale_ok:
        why = "answers stay stale: the index can no longer be brought up to date"
    elif any(v.startswith("error:") and v[6:] not in case.error_ok for v in flat if v != "building"):
        bad = [v for v in flat if v.startswith("error:") and v[6:] not in case.error_ok]
        if case.must_recover or not case.error_ok:
            why = f"error {bad[0]} where an answer was possible"
    if not why and case.must_recover and any(v != "correct" for v in rounds[-1]):
        why = f"not rebuilt: second answers {rounds[-1]}"
    return CaseResult(case.name, case.group, answers, not why, why, aside, seconds, errors)


# -- damage ---------------------------------------------------------------------------------


def _index(w: World) -> Path:
    return world.data_dir(w.home) / "index.db"


def _truncate(fraction: float) -> Callable[[World], None]:
    def damage(w: World) -> None:
        path = _index(w)
        with open(path, "r+b") as fh:
            fh.truncate(int(path.stat().st_size * fraction))
    return damage


def _truncate_bytes(size: int) -> Callable[[World], None]:
    def damage(w: World) -> None:
        with open(_index(w), "r+b") as fh:
            fh.truncate(size)
    return damage


def _garbage(w: World) -> None:
    path = _index(w)
    path.write_bytes(random.Random(1).randbytes(path.stat().st_size))


def _header(w: World) -> None:
    with open(_index(w), "r+b") as fh:
        fh.write(b"NOT SQLITE AT ALL")


def _pages(first: float, last: float, seed: int = 5) -> Callable[[World], None]:
    """Overwrite a range of pages (past each page's first 100 bytes) with random bytes."""
    def damage(w: World) -> None:
        path = _index(w)
        data = bytearray(path.read_bytes())
        pages = len(data) // 4096
        rng = random.Random(seed)
        for page in range(max(1, int(pages * first)), max(2, int(pages * last))):
            start = page * 4096 + 100
            data[start : page * 4096 + 4096] = rng.randbytes(3996)
        path.write_bytes(bytes(data))
    return damage


def damage_page(page: int, seed: int) -> Callable[[World], None]:
    """One whole page (not the first) replaced by random bytes: the stress run's random damage."""
    def damage(w: World) -> None:
        path = _index(w)
        data = bytearray(path.read_bytes())
        pages = len(data) // 4096
        p = 1 + page % max(1, pages - 1)
        data[p * 4096 : p * 4096 + 4096] = random.Random(seed).randbytes(4096)
        path.write_bytes(bytes(data))
    return damage


def _sql_on_index(*statements: str) -> Callable[[World], None]:
    def damage(w: World) -> None:
        conn = sqlite3.connect(_index(w))
        try:
            for statement in statements:
                conn.execute(statement)
            conn.commit()
        finally:
            conn.close()
    return damage


def _wal_garbage(w: World) -> None:
    _sql_on_index("PRAGMA journal_mode=WAL")(w)
    (world.data_dir(w.home) / "index.db-wal").write_bytes(random.Random(2).randbytes(40_000))


def _wal_torn(w: World) -> None:
    """A WAL with committed frames, then cut in the middle of a frame (power loss while appending)."""
    conn = sqlite3.connect(_index(w))
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('stress_marker', 'x')")
    conn.commit()
    conn.execute("UPDATE sessions SET title = 'torn' WHERE id = 's-alpha'")
    conn.commit()
    wal = world.data_dir(w.home) / "index.db-wal"
    shutil.copy2(wal, wal.with_name("keep"))
    conn.close()
    shutil.copy2(wal.with_name("keep"), wal)
    wal.with_name("keep").unlink()
    with open(wal, "r+b") as fh:
        fh.truncate(wal.stat().st_size - 1000)


def _older_schema(w: World) -> None:
    """An index written by an earlier plugin version (schema 1: no chunks, no edits)."""
    _sql_on_index("DROP TABLE IF EXISTS chunks", "DROP TABLE IF EXISTS edits", "PRAGMA user_version = 1")(w)


def _missing_table(w: World) -> None:
    _sql_on_index("DROP TABLE sessions")(w)


def _index_is_directory(w: World) -> None:
    path = _index(w)
    path.unlink()
    path.mkdir()
    (path / "x").write_text("a folder where the index should be")


def _no_plugin_folder(w: World) -> None:
    shutil.rmtree(world.data_dir(w.home))


def _plugin_folder_is_file(w: World) -> None:
    folder = world.data_dir(w.home)
    shutil.rmtree(folder)
    folder.write_text("not a folder")


def _stale_lock(w: World) -> None:
    (world.data_dir(w.home) / "index.lock").write_text("12345")


def _dead_job_record(w: World) -> None:
    jobs_dir = world.data_dir(w.home) / "jobs"
    jobs_dir.mkdir()
    now = time.time()
    (jobs_dir / "20260101-000000-dead00.json").write_text(json.dumps({
        "id": "20260101-000000-dead00", "state": "running", "pid": 2**22 + 7, "created_at": now,
        "updated_at": now, "started_at": now}))


def _garbage_state_files(w: World) -> None:
    folder = world.data_dir(w.home)
    for name in ("consent.json", "embedding_usage.json", "last_refresh.json", "update_check.json"):
        (folder / name).write_bytes(b"\x00{half-written")
    (folder / "jobs").mkdir()
    (folder / "jobs" / "bad.json").write_text("[1, 2")


def _garbage_config(w: World) -> None:
    (w.home / "config.yaml").write_text("plugins: [unclosed\n  - : :")


# -- state.db ------------------------------------------------------------------------------------


def _state(w: World) -> Path:
    return w.home / "state.db"


def _raw(*statements: str, params: tuple = ()) -> Callable[[World], None]:
    """Raw SQL on the copy's state.db: for values Hermes's own API would never write."""
    def damage(w: World) -> None:
        conn = sqlite3.connect(_state(w))
        try:
            for statement in statements:
                conn.execute(statement, params if "?" in statement else ())
            conn.commit()
        finally:
            conn.close()
    return damage


def _hermes(fn: Callable[[Any], None]) -> Callable[[World], None]:
    """Through Hermes's own SessionDB (the values it accepts)."""
    def damage(w: World) -> None:
        from hermes_state import SessionDB

        db = SessionDB(db_path=_state(w))
        try:
            fn(db)
        finally:
            db.close()
    return damage


def _bad_session(db: Any, w: World | None = None) -> None:
    db.create_session("s-bad", "cli", cwd=db._phr_repo)
    db.append_message("s-bad", "user", "a zorblax good message", timestamp=1_767_100_000.0)


def _with_bad(extra: Callable[[Any], None]) -> Callable[[World], None]:
    def damage(w: World) -> None:
        def fn(db: Any) -> None:
            db._phr_repo = str(w.repo)
            _bad_session(db)
            extra(db)
        _hermes(fn)(w)
    return damage


def _then(*steps: Callable[[World], None]) -> Callable[[World], None]:
    def damage(w: World) -> None:
        for step in steps:
            step(w)
    return damage


BAD = {**QUERIES, "zorblax": {"s-bad"}}


def _foreign_state_db(create: str, rows: tuple[str, ...] = ()) -> Callable[[World], None]:
    """A state.db of a schema the plugin does not know, built with sqlite3 directly (negative case)."""
    def damage(w: World) -> None:
        path = _state(w)
        for suffix in ("", "-wal", "-shm"):
            part = Path(str(path) + suffix)
            if part.exists():
                part.unlink()
        conn = sqlite3.connect(path)
        try:
            conn.executescript(create)
            for row in rows:
                conn.execute(row.replace("$REPO", str(w.repo)))
            conn.commit()
        finally:
            conn.close()
    return damage


MINIMAL = """
CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, started_at REAL, cwd TEXT);
CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, content TEXT, timestamp REAL);
"""
MINIMAL_ROWS = (
    "INSERT INTO sessions VALUES ('s-alpha', 'cli', 1, '$REPO')",
    "INSERT INTO sessions VALUES ('s-now', 'cli', 2, '$REPO')",
    "INSERT INTO messages(session_id, role, content, timestamp) VALUES ('s-alpha', 'user', 'ibex minimal', 1)",
)


def cases() -> list[Case]:
    index_cases = [
        Case("index_truncated_half", INDEX_GROUP, _truncate(0.5), must_recover=True),
        Case("index_truncated_to_header", INDEX_GROUP, _truncate_bytes(100), must_recover=True),
        Case("index_truncated_mid_page", INDEX_GROUP, _truncate_bytes(4096 * 3 + 1234), must_recover=True),
        Case("index_zero_bytes", INDEX_GROUP, _truncate_bytes(0), must_recover=True),
        Case("index_garbage", INDEX_GROUP, _garbage, must_recover=True),
        Case("index_header_overwritten", INDEX_GROUP, _header, must_recover=True),
        Case("index_middle_pages_garbage", INDEX_GROUP, _pages(0.33, 0.66), must_recover=True),
        Case("index_last_pages_garbage", INDEX_GROUP, _pages(0.85, 1.0), must_recover=True),
        Case("index_wal_garbage", INDEX_GROUP, _wal_garbage, must_recover=True),
        Case("index_wal_torn_frame", INDEX_GROUP, _wal_torn, must_recover=True),
        Case("index_future_schema", INDEX_GROUP, _sql_on_index("PRAGMA user_version = 99"), must_recover=True),
        Case("index_other_tokenizer", INDEX_GROUP,
             _sql_on_index("UPDATE meta SET value = '999' WHERE key = 'tokenizer_version'"), must_recover=True),
        Case("index_older_schema", INDEX_GROUP, _older_schema, must_recover=True),
        Case("index_missing_table", INDEX_GROUP, _missing_table, must_recover=True),
        # FTS5's structure record (row 10 of the _data shadow table): what one random damaged page
        # hit twice in 60 in the stress run.
        Case("index_fts_structure_garbage", INDEX_GROUP,
             _sql_on_index("UPDATE entries_fts_data SET block = X'0102030405' WHERE id = 10"), must_recover=True),
        Case("index_fts_structure_missing", INDEX_GROUP, _sql_on_index("DELETE FROM entries_fts_data WHERE id = 10"),
             must_recover=True),
        Case("index_is_a_directory", INDEX_GROUP, _index_is_directory, must_recover=True),
    ]
    folder_cases = [
        Case("plugin_folder_missing", "plugin_folder", _no_plugin_folder, must_recover=True),
        Case("plugin_folder_is_a_file", "plugin_folder", _plugin_folder_is_file, error_ok=("data_dir_unusable",)),
        Case("stale_lock_file", "plugin_folder", _stale_lock, must_recover=True),
        Case("dead_job_record", "plugin_folder", _dead_job_record, must_recover=True),
        Case("garbage_state_files", "plugin_folder", _garbage_state_files, must_recover=True),
        Case("garbage_config_yaml", "plugin_folder", _garbage_config, must_recover=True),
    ]
    unusable = ("no_db", "db_unreadable", "unsupported_schema")
    schema_cases = [
        Case("state_db_missing", "state_db", lambda w: _state(w).unlink(), error_ok=unusable),
        Case("state_db_garbage", "state_db", lambda w: _state(w).write_bytes(random.Random(4).randbytes(65536)),
             error_ok=unusable, stale_ok=True),
        Case("state_db_zero_bytes", "state_db", lambda w: _state(w).write_bytes(b""), error_ok=unusable,
             stale_ok=True),
        Case("state_db_minimal_schema", "state_db", _foreign_state_db(MINIMAL, MINIMAL_ROWS),
             expected={"ibex": {"s-alpha"}, "walrus": set()}, error_ok=unusable),
        Case("state_db_no_role_column", "state_db", _foreign_state_db(
            "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, started_at REAL, cwd TEXT);"
            "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, content TEXT, timestamp REAL);",
            MINIMAL_ROWS[:2]), error_ok=unusable),
        Case("state_db_no_messages_table", "state_db", _foreign_state_db(
            "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, started_at REAL, cwd TEXT);", MINIMAL_ROWS[:2]),
             error_ok=unusable),
        Case("state_db_renamed_tables", "state_db", _foreign_state_db(
            "CREATE TABLE conversations (id TEXT PRIMARY KEY);CREATE TABLE turns (id INTEGER PRIMARY KEY);"),
             error_ok=unusable),
        Case("state_db_extra_columns", "state_db", _raw(
            "ALTER TABLE sessions ADD COLUMN future_field TEXT DEFAULT 'x'",
            "ALTER TABLE messages ADD COLUMN future_vector BLOB")),
        Case("state_db_missing_optional_columns", "state_db", _raw(
            "ALTER TABLE sessions DROP COLUMN git_repo_root", "ALTER TABLE sessions DROP COLUMN rewind_count",
            "ALTER TABLE messages DROP COLUMN tool_call_id")),
    ]
    row_cases = [
        Case("row_invalid_json_tool_calls", "rows", _then(_with_bad(lambda db: db.append_message(
            "s-bad", "assistant", "calls", tool_calls=[{"id": "x", "function": {"name": "t", "arguments": "{}"}}])),
            _raw("UPDATE messages SET tool_calls = '[{\"id\": \"x\", \"function\": {' WHERE session_id = 's-bad' "
                 "AND role = 'assistant'")),
             expected=BAD, must_recover=True),
        Case("row_tool_calls_wrong_shape", "rows", _with_bad(lambda db: db.append_message(
            "s-bad", "assistant", "calls", tool_calls=["not a call", 7, {"function": "nope"}, {"id": 1}])),
            expected=BAD, must_recover=True),
        Case("row_tool_calls_deeply_nested", "rows", _then(_with_bad(lambda db: db.append_message(
            "s-bad", "assistant", "calls", tool_calls=[{"id": "x"}])),
            _raw("UPDATE messages SET tool_calls = ? WHERE session_id = 's-bad' AND role = 'assistant'",
                 params=("[" * 100_000,))),
             expected=BAD, must_recover=True),
        Case("row_nul_bytes", "rows", _with_bad(lambda db: db.append_message(
            "s-bad", "assistant", "nul\x00in\x00the\x00middle zorblax\x00"), ),
             expected=BAD, must_recover=True),
        Case("row_lone_surrogates_via_hermes", "rows", _with_bad(lambda db: db.append_message(
            "s-bad", "assistant", "lone \ud800 surrogate \udfff zorblax")),
             expected=BAD, must_recover=True),
        Case("row_invalid_utf8_bytes", "rows", _then(_with_bad(lambda db: None), _raw(
            "INSERT INTO messages(session_id, role, content, timestamp) VALUES "
            "('s-bad', 'assistant', CAST(X'7a6f72626c6178eda080' AS TEXT), 1767100100)")),
             expected=BAD, must_recover=True),
        Case("row_invalid_utf8_title", "rows", _then(_with_bad(lambda db: None), _raw(
            "UPDATE sessions SET title = CAST(X'6f6b20eda080' AS TEXT) WHERE id = 's-bad'")),
             expected=BAD, must_recover=True),
        Case("row_10mb_message", "rows", _with_bad(lambda db: db.append_message(
            "s-bad", "assistant", ("lorem ipsum " * 900_000)[:10_000_000] + " zorblax-tail")),
             expected=BAD, must_recover=True),
        Case("row_empty_session", "rows", _hermes(lambda db: db.create_session("s-empty", "cli", cwd=None))),
        Case("row_null_content", "rows", _with_bad(lambda db: db.append_message("s-bad", "assistant", None)),
             expected=BAD, must_recover=True),
        Case("row_multimodal_bad_json", "rows", _with_bad(lambda db: db.append_message(
            "s-bad", "user", "\x00json:[{\"type\": \"text\", \"text\": \"broken")),
             expected=BAD, must_recover=True),
        Case("row_text_timestamp", "rows", _then(_with_bad(lambda db: db.append_message("s-bad", "assistant", "x")),
                                                 _raw("UPDATE messages SET timestamp = 'yesterday' WHERE "
                                                      "session_id = 's-bad' AND role = 'assistant'")),
             expected=BAD, must_recover=True),
        Case("row_text_started_at", "rows", _then(_with_bad(lambda db: None), _raw(
            "UPDATE sessions SET started_at = 'last week' WHERE id = 's-bad'")),
             expected=BAD, must_recover=True),
        Case("row_text_message_count", "rows", _then(_with_bad(lambda db: None), _raw(
            "UPDATE sessions SET message_count = 'many' WHERE id = 's-bad'")),
             expected=BAD, must_recover=True),
        Case("row_blob_content", "rows", _then(_with_bad(lambda db: None), _raw(
            "INSERT INTO messages(session_id, role, content, timestamp) VALUES ('s-bad', 'user', "
            "X'7a6f72626c6178', 1767100200)")),
             expected=BAD, must_recover=True),
        Case("row_orphan_message", "rows", _raw(
            "INSERT INTO messages(session_id, role, content, timestamp) VALUES ('nobody', 'user', 'ibex orphan', 5)")),
        Case("row_unknown_role", "rows", _with_bad(lambda db: db.append_message("s-bad", "narrator", "ibex narration")),
             expected=BAD, must_recover=True),
        Case("row_huge_timestamp", "rows", _then(_with_bad(lambda db: None), _raw(
            "UPDATE messages SET timestamp = 9e999 WHERE session_id = 's-bad'")),
             expected=BAD, must_recover=True),
        Case("row_cwd_not_text", "rows", _then(_with_bad(lambda db: None), _raw(
            "UPDATE sessions SET cwd = 42 WHERE id = 's-other'"))),
    ]
    return index_cases + folder_cases + schema_cases + row_cases


def run(work: Path, *, random_pages: int = 0, seed: int = 9, only: list[str] | None = None) -> dict[str, Any]:
    """Every case of :func:`cases` (or ``only`` those), then ``random_pages`` single-page damages."""
    started = time.monotonic()
    work.mkdir(parents=True, exist_ok=True)
    base = build_world(work / "base")
    results = [run_case(base, case, work / "cases") for case in cases() if only is None or case.name in only]
    rng = random.Random(seed)
    pages: list[CaseResult] = []
    for i in range(random_pages):
        case = Case(f"random_page_{i:03d}", "random_page", damage_page(rng.randrange(10**6), rng.randrange(10**6)),
                    must_recover=True)
        pages.append(run_case(base, case, work / "pages"))
        shutil.rmtree(work / "pages" / case.name, ignore_errors=True)
    outcomes: dict[str, int] = {}
    for r in pages:
        key = "handled" if r.handled else ("silently_wrong" if "wrong" in r.why else "unhandled")
        outcomes[key] = outcomes.get(key, 0) + 1
    return {
        "seconds": round(time.monotonic() - started, 1),
        "cases_tried": len(results),
        "cases_handled": sum(r.handled for r in results),
        "cases": [dataclasses.asdict(r) for r in results],
        "random_pages_tried": len(pages),
        "random_pages": outcomes,
        "random_page_failures": [dataclasses.asdict(r) for r in pages if not r.handled][:10],
    }


def remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists():
        os.unlink(path)
