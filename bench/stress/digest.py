"""What an index holds, as comparable data: two indexes with the same digest answer
every question the same way.

Row ids and timestamps of our own making (``indexed_at``, ``probed_at``,
``created_at``, ``generation``, ``last_index_at``) are left out: an interrupted
build that was resumed assigns other row ids than an uninterrupted one, and
that is fine. Everything else is in: the sessions mirror, the entries, the FTS
postings of every entry (read back through ``fts5vocab``, keyed by the entry's
content rather than its rowid, so an orphaned posting shows), the FTS answers
to a set of queries (with BM25 scores), the vector chunks and the edits.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import defaultdict
from pathlib import Path
from typing import Any

SESSION_SKIP = {"indexed_at"}


def _h(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False, sort_keys=True, default=repr).encode(
        "utf-8", "surrogatepass")).hexdigest()


def open_plain(path: Path) -> sqlite3.Connection:
    """A plain connection for inspection (not the plugin's): temp tables allowed, nothing written."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
    conn.row_factory = sqlite3.Row
    return conn


def integrity(conn: sqlite3.Connection) -> str:
    rows = conn.execute("PRAGMA integrity_check").fetchall()
    return "ok" if [tuple(r) for r in rows] == [("ok",)] else "; ".join(str(r[0]) for r in rows)[:500]


def fts_integrity(conn: sqlite3.Connection) -> str:
    """FTS5's own structural check, on a scratch copy (the command writes nothing but needs a writable handle)."""
    try:
        scratch = sqlite3.connect(":memory:")
        conn.backup(scratch)
        scratch.execute("INSERT INTO entries_fts(entries_fts) VALUES ('integrity-check')")
        scratch.close()
        return "ok"
    except sqlite3.DatabaseError as exc:
        return f"{type(exc).__name__}: {exc}"


def tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}


def _entry_keys(conn: sqlite3.Connection) -> dict[int, tuple]:
    return {
        r["id"]: (r["session_id"], r["message_id"], r["position"], r["kind"], r["role"], r["tool_name"],
                  r["timestamp"], r["text"], r["context"])
        for r in conn.execute("SELECT * FROM entries")
    }


def _key_hashes(keys: dict[int, tuple]) -> dict[int, str]:
    return {i: hashlib.sha256(repr(k).encode("utf-8", "surrogatepass")).hexdigest() for i, k in keys.items()}


def session_rows(conn: sqlite3.Connection) -> dict[str, dict]:
    out = {}
    for row in conn.execute("SELECT * FROM sessions"):
        out[row["id"]] = {k: row[k] for k in row.keys() if k not in SESSION_SKIP}  # noqa: SIM118 - a sqlite3.Row
    return out


def per_session(conn: sqlite3.Connection) -> dict[str, str]:
    """One hash per indexed session: its mirror row and its entries (for 'fully old or fully new')."""
    entries: dict[str, list] = defaultdict(list)
    for key in _entry_keys(conn).values():
        entries[key[0]].append(key)
    out = {}
    for sid, row in session_rows(conn).items():
        out[sid] = _h([row, sorted(entries.get(sid, []), key=repr)])
    for sid in set(entries) - set(out):  # entries of a session without its row: never valid
        out[sid] = "orphan-entries:" + _h(sorted(entries[sid], key=repr))
    return out


def fts_postings(conn: sqlite3.Connection, keys: dict[int, str]) -> dict[str, Any]:
    """Every (entry, term, count) posting, keyed by entry content; orphans and missing docs counted."""
    conn.execute("DROP TABLE IF EXISTS temp.stress_vocab")
    conn.execute("CREATE VIRTUAL TABLE temp.stress_vocab USING fts5vocab(main, entries_fts, instance)")
    try:
        per_doc: dict[int, dict[str, int]] = defaultdict(dict)
        for term, doc, count in conn.execute("SELECT term, doc, COUNT(*) FROM temp.stress_vocab GROUP BY term, doc"):
            per_doc[doc][term] = count
    finally:
        conn.execute("DROP TABLE IF EXISTS temp.stress_vocab")
    docs = {r[0] for r in conn.execute("SELECT id FROM entries_fts_docsize")}
    orphans = sorted(set(per_doc) - set(keys)) + sorted(docs - set(keys))
    postings = sorted((keys[doc], sorted(terms.items())) for doc, terms in per_doc.items() if doc in keys)
    missing = [i for i in keys if i not in docs]
    return {"postings": _h(postings), "orphans": len(set(orphans)), "missing_docs": len(missing),
            "documents": len(docs)}


def fts_answers(conn: sqlite3.Connection, keys: dict[int, str], queries: list[str]) -> dict[str, Any]:
    from project_history_recall.tokenizer import plan_query

    out = {}
    for query in queries:
        plan = plan_query(query)
        if not plan.units:
            continue
        rows = conn.execute("SELECT rowid, bm25(entries_fts) FROM entries_fts WHERE entries_fts MATCH ?",
                            (plan.match_any(),)).fetchall()
        out[query] = sorted((keys.get(r[0], f"orphan:{r[0]}"), round(r[1], 6)) for r in rows)
    return {q: _h(v) for q, v in out.items()}


def chunk_rows(conn: sqlite3.Connection) -> list[tuple]:
    if "chunks" not in tables(conn):
        return []
    return sorted(
        (r["session_id"], r["message_id"], r["chunk_index"], r["content_hash"], r["model_id"],
         hashlib.sha256(r["vector"]).hexdigest())
        for r in conn.execute("SELECT * FROM chunks"))


def digest(path: Path, queries: list[str]) -> dict[str, Any]:
    """The comparable content of the index at ``path`` (main file + WAL, as committed)."""
    conn = open_plain(path)
    try:
        keys = _entry_keys(conn)
        hashes = _key_hashes(keys)
        meta = {r[0]: r[1] for r in conn.execute("SELECT key, value FROM meta")}
        parts: dict[str, Any] = {
            "user_version": conn.execute("PRAGMA user_version").fetchone()[0],
            "meta": {k: meta.get(k) for k in ("max_message_id", "tokenizer_version")},
            "sessions": _h(sorted(session_rows(conn).items())),
            "session_count": conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0],
            "entries": _h(sorted(hashes.values())),
            "entry_count": len(keys),
            "fts": fts_postings(conn, hashes),
            "fts_answers": _h(fts_answers(conn, hashes, queries)),
            "chunks": _h(chunk_rows(conn)),
            "chunk_count": len(chunk_rows(conn)),
            "probes": _h(sorted(tuple(r) for r in conn.execute("SELECT cwd, repo_root, branch FROM probes"))),
        }
        if "edits" in tables(conn):
            parts["edits"] = _h(sorted(tuple(r)[1:] for r in conn.execute("SELECT * FROM edits")))
    finally:
        conn.close()
    parts["all"] = _h(parts)
    return parts


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return sorted(k for k in set(a) | set(b) if k != "all" and a.get(k) != b.get(k))
