"""The edit chain's write side: the rows of ``edits``, from each session's messages.

:class:`EditPhase` is an :class:`~project_history_recall.index.preparing.IndexPhase`: after
each batch of the keyword phase has committed (and after the whole phase, for what the
batches left), it replaces the rows in ``edits`` of every session whose messages changed
with what :func:`~project_history_recall.index.edits.extract_edits` finds. Where an edit
landed is placed here (the checkout, the repo root, a path relative to either).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from project_history_recall.index.edits import (
    EDIT_TOOLS,
    Hints,
    extract_edits,
    resolved_path,
    result_paths,
)
from project_history_recall.index.store import REMOVALS, get_meta, set_meta, transaction
from project_history_recall.paths import path_key, relative_to
from project_history_recall.sources import SourceMessage, SourceReader

PLACEMENT_MEMORY = 50_000


Toplevel = Callable[[str], str | None]


def git_toplevel(cwd: str) -> str | None:
    """The checkout ``cwd`` is in (a linked worktree's own folder, not the main repo), via
    Hermes's probe: repo-relative paths must be relative to the checkout the edit was in."""
    try:
        from tui_gateway import git_probe as hermes_git

        return hermes_git.repo_root(cwd) or None
    except Exception:
        return None


@dataclass
class Placement:
    """Where a session's edits land: its cwd, its checkout and the (common) repo root."""

    cwd: str | None
    checkout: str | None
    repo_root: str | None
    _prefixes: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    def roots(self) -> list[str]:
        return [r for r in dict.fromkeys((self.checkout, self.repo_root)) if r]

    def _candidates(self) -> tuple[str, ...]:
        """Checkout first (a worktree may sit inside the main repo), then the repo, then
        the cwd (outside any repo), each as a normalised ``prefix/``."""
        if self._prefixes is None:
            roots = (*self.roots(), *([self.cwd] if self.cwd else []))
            self._prefixes = tuple(os.path.normpath(r).rstrip("/") + "/" for r in roots)
        return self._prefixes

    def place(self, raw: str, hints: Sequence[str], repo_relative: bool) -> tuple[str, str | None]:
        """``raw`` relative to the checkout (``/`` separators), and the absolute path when known.

        A relative path is anchored where Hermes says it wrote (``resolved_path``), else at
        the session's cwd. Outside every root it stays as given (still matched by suffix)."""
        raw = raw.strip()
        if repo_relative:
            rel = clean_relative(raw)
            base = self.checkout or self.repo_root
            return rel, os.path.join(base, rel) if base else None
        absolute: str | None = None
        if os.path.isabs(raw):
            absolute = os.path.normpath(raw)
        else:
            absolute = next(iter(hints), None)
            if absolute is None or not absolute.endswith("/" + raw):  # the usual case: the path as given
                absolute = None
                tail = "/" + clean_relative(raw)
                for hint in hints:
                    if hint.endswith(tail) or path_key(hint).endswith(tail):
                        absolute = hint
                        break
            if absolute is None and self.cwd:
                absolute = os.path.normpath(os.path.join(self.cwd, raw))
        if absolute is None:
            return clean_relative(raw), None
        if "\\" not in absolute:  # the common case, without normalising anything again
            for prefix in self._candidates():
                if absolute.startswith(prefix):
                    return absolute[len(prefix):], absolute
        for root in (*self.roots(), *([self.cwd] if self.cwd else [])):
            inside = _relative(absolute, root)
            if inside:
                return inside, absolute
        return (clean_relative(raw) if not os.path.isabs(raw) else path_key(absolute)), absolute


_PLAIN_RELATIVE = re.compile(r"^(?![./])(?:[\w\-. ]+/)*[\w\-. ]+$")


def clean_relative(path: str) -> str:
    if "/." not in path and _PLAIN_RELATIVE.match(path):  # nothing to normalise (the usual case)
        return path
    key = path_key(path.replace("\\", "/"))
    while key.startswith("./"):
        key = key[2:]
    return key


def _relative(path: str, root: str) -> str | None:
    rel = relative_to(path_key(path), path_key(root))
    if rel is None:
        rel = relative_to(path_key(os.path.realpath(path)), path_key(os.path.realpath(root)))
    return rel or None


#: Sessions whose edits are stale: new, re-read by the keyword phase since, or never extracted.
_STALE = (
    "SELECT s.id, s.cwd, s.repo_root, s.content_signature FROM sessions s "
    "LEFT JOIN edit_state e ON e.session_id = s.id "
    "WHERE e.content_signature IS NOT s.content_signature"
)
_STALE_SQL = f"{_STALE} ORDER BY s.started_at"
#: Those of some sessions (a batch of the keyword phase, whose sessions follow each other in
#: that order: the edits are written in the same order either way).
_STALE_OF_SQL = f"{_STALE} AND s.id IN (SELECT value FROM json_each(?)) ORDER BY s.started_at"
#: Of those, the ones that may hold an edit: an edit tool call, or a diff in a reply. Only
#: they are read again from the source.
_EDITING_SQL = (
    "SELECT DISTINCT session_id FROM entries WHERE session_id IN (SELECT value FROM json_each(?)) "
    f"AND ((kind = 'tool_call' AND tool_name IN ({', '.join(repr(t) for t in EDIT_TOOLS)})) "
    "OR (kind = 'assistant' AND instr(text, 'diff --git') > 0))"
)
BATCH_SESSIONS = 200


class EditPhase:
    """The edit chain as its own indexing phase: each batch of the keyword phase is committed
    before its edits are extracted, from the messages that batch read, and whatever those left
    (a failed batch, sessions rewritten by an interrupted run, a ``--force`` rebuild) is done
    after the keyword phase, read again from the source.

    ``edit_state`` remembers which content signature each session's edits were extracted
    from, so an interrupted phase resumes where it stopped, and a session's old rows stay
    until its new ones replace them (in one transaction per batch)."""

    name = "edits"

    def __init__(self, toplevel: Toplevel = git_toplevel) -> None:
        self.toplevel = toplevel
        self._checkouts: dict[str, str | None] = {}
        # (cwd, checkout, repo root, path as given, repo-relative, resolved path) -> placement:
        # sessions in one repo edit the same files, and placing is pure given those.
        self._placed: dict[tuple[str | None, str | None, str | None, str, bool, str | None],
                           tuple[str, str | None]] = {}

    def _checkout(self, cwd: str | None) -> str | None:
        if not cwd or not os.path.isdir(cwd):
            return None
        if cwd not in self._checkouts:
            self._checkouts[cwd] = self.toplevel(cwd)
        return self._checkouts[cwd]

    def __getstate__(self) -> dict:
        """What a worker process is given: the probe, not what this process remembers."""
        return {"toplevel": self.toplevel}

    def __setstate__(self, state: dict) -> None:
        EditPhase.__init__(self, state["toplevel"])

    def run(self, conn: sqlite3.Connection, reader: SourceReader, *, force: bool = False) -> int:
        """Bring ``edits`` in step with the sessions the index holds; returns how many
        sessions were looked at."""
        # The rows of sessions gone from the index are swept when sessions have left it since
        # the last sweep (``REMOVALS``): the sweep reads every edit, and the check after
        # a turn, which removes nothing, must not pay for it. Rows it has not swept yet are
        # never shown (every read joins ``sessions``).
        removals = get_meta(conn, REMOVALS, "0")
        if force or get_meta(conn, "edits_swept_removals") != removals:
            with transaction(conn):
                if force:
                    conn.execute("DELETE FROM edit_state")
                conn.execute("DELETE FROM edits WHERE session_id NOT IN (SELECT id FROM sessions)")
                conn.execute("DELETE FROM edit_state WHERE session_id NOT IN (SELECT id FROM sessions)")
                set_meta(conn, "edits_swept_removals", removals)
        stale = conn.execute(_STALE_SQL).fetchall()

        def rows_of(row: sqlite3.Row) -> list[tuple]:
            return self.extract(row["id"], row["cwd"], row["repo_root"], reader.messages(row["id"]))

        for start in range(0, len(stale), BATCH_SESSIONS):
            self._replace(conn, stale[start : start + BATCH_SESSIONS], rows_of)
        return len(stale)

    def store(self, conn: sqlite3.Connection, extracted: Mapping[str, object]) -> int:
        """The edits of a batch the keyword phase has just committed, as :meth:`extract` found
        them in the messages it read (the editing sessions were read a second time in
        :meth:`run`: a sixth of a full build)."""
        stale = conn.execute(_STALE_OF_SQL, (json.dumps(list(extracted)),)).fetchall()
        self._replace(conn, stale, lambda row: cast("list[tuple]", extracted[row["id"]]))
        return len(stale)

    def extract(self, session_id: str, cwd: str | None, repo_root: str | None,
                messages: list[SourceMessage]) -> list[tuple]:
        """The rows of ``edits`` for one session."""
        edits = extract_edits(messages, _LazyCheckout(self, Placement(cwd, None, repo_root)).place)
        prefix = os.path.join(repo_root, "") if repo_root else None
        # Where the edit landed is stored only when the repo root does not say it.
        return [(session_id, e.message_id, e.seq, e.timestamp, e.path,
                 None if prefix and e.abs_path == prefix + e.path else e.abs_path, e.form, e.old_text, e.new_text,
                 e.raw, e.said, e.said_message_id) for e in edits]

    def _replace(self, conn: sqlite3.Connection, stale: list[sqlite3.Row],
                 rows_of: Callable[[sqlite3.Row], list[tuple]]) -> None:
        """Replace the edits of the ``stale`` sessions, in one transaction; only those that may
        hold an edit (:data:`_EDITING_SQL`) have their rows asked for."""
        editing = {r[0] for r in conn.execute(_EDITING_SQL, (json.dumps([row["id"] for row in stale]),))}
        with transaction(conn):
            for row in stale:
                conn.execute("DELETE FROM edits WHERE session_id = ?", (row["id"],))
                if row["id"] in editing:
                    self._write(conn, rows_of(row))
                conn.execute("INSERT OR REPLACE INTO edit_state(session_id, content_signature) VALUES (?, ?)",
                             (row["id"], row["content_signature"]))

    @staticmethod
    def _write(conn: sqlite3.Connection, rows: list[tuple]) -> None:
        if rows:
            conn.executemany(
                "INSERT INTO edits(session_id, message_id, seq, timestamp, path, abs_path, form, old_text, new_text, "
                "raw, said, said_message_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)


if TYPE_CHECKING:
    from project_history_recall.index.preparing import IndexPhase

    _protocol_check: IndexPhase = EditPhase()


class _LazyCheckout:
    """The :data:`~project_history_recall.index.edits.Placer` for one session: probes the
    checkout only when an edit needs placing (most sessions have none), and remembers
    placements in the extension, since sessions edit the same few files again and again."""

    def __init__(self, extension: EditPhase, placement: Placement) -> None:
        self.extension = extension
        self.placement = placement
        self.probed = False

    def place(self, raw: str, result: str | None, repo_relative: bool) -> tuple[str, str | None]:
        first = resolved_path(result) if result and not repo_relative else None
        if not self.probed:
            self.placement.checkout = self.extension._checkout(self.placement.cwd)
            self.probed = True
        p = self.placement
        key = (p.cwd, p.checkout, p.repo_root, raw, repo_relative, first)
        known = self.extension._placed
        placed = known.get(key)
        if placed is not None:
            return placed
        placed = p.place(raw, Hints(result, first) if result else (), repo_relative)
        # Remembered only when no other reported path could have decided it.
        if repo_relative or placed[1] == first or os.path.isabs(raw.strip()) or not result_paths(result):
            if len(known) >= PLACEMENT_MEMORY:
                known.clear()
            known[key] = placed
        return placed
