"""The coding scene: how a file's code evolved across sessions (seed 003, issue 5).

Write side: :class:`ChainExtension` is an :class:`~project_history_recall.indexer.IndexExtension`.
For every session the indexer re-syncs it replaces that session's rows in ``edits``
with what :func:`~project_history_recall.chain_extract.extract_edits` finds, in the
same transaction, so the chain is never out of step with the keyword index.

Read side: :func:`code_history` (library), :func:`code_history_for` (what the
``project_code_history`` tool and ``phr code-history`` call) and
:func:`chain_summary` (the opt-in ``chain`` block of search results). Nothing about
projects is stored with an edit: which sessions count is decided at query time by
:func:`~project_history_recall.search.compute_scope`, and an edit's branch is its
session's branch, read from ``sessions``.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .chain_extract import (
    Edit,
    Hints,
    Hunk,
    changed_line_symbol,
    definition,
    diff_hunks,
    extract_edits,
    render_edit,
    render_patch,
    resolved_path,
    result_paths,
    symbol_at,
)
from .errors import bad_argument
from .paths import path_key, relative_to
from .search import compute_scope
from .sources import SourceMessage, SourceSession
from .tokenizer import index_tokens, matched_units, plan_query
from .when import format_when

DEFAULT_BUDGET_CHARS = 6000
MIN_PATCH_CHARS = 300
MAX_FILE_BYTES = 2_000_000
DEFAULT_LIMIT = 10
MAX_LIMIT = 50
MAX_CANDIDATES = 20
PLACEMENT_MEMORY = 50_000

Toplevel = Callable[[str], str | None]

CODE_HISTORY_SCHEMA: dict[str, Any] = {
    "name": "project_code_history",
    "description": (
        "How one file's code evolved across past sessions of THIS project: every recorded edit "
        "(patch, write_file, or a diff shown in a reply), oldest first, each with the user's words "
        "that asked for it, the branch, the enclosing function or class, the patch, and an "
        "@session: link. The last round says whether that version is still in the file. Use for "
        "'why is X like this', 'what did we try for this function', 'which version did we keep'."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "The file: a path relative to the repo ('src/app/search.py'), or a fragment "
                               "of one ('search.py').",
            },
            "symbol": {"type": "string", "description": "Only edits of this function or class."},
            "query": {"type": "string", "description": "Only edits whose request or patch mention these words."},
            "branch": {
                "type": "string",
                "description": "Only edits made on this git branch (edits on unknown branches stay).",
            },
            "limit": {
                "type": "integer",
                "default": DEFAULT_LIMIT,
                "description": f"Most recent rounds to return (default {DEFAULT_LIMIT}, max {MAX_LIMIT}).",
            },
        },
        "required": ["path"],
    },
}


# -- write side -----------------------------------------------------------------


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
            rel = _clean_relative(raw)
            base = self.checkout or self.repo_root
            return rel, os.path.join(base, rel) if base else None
        absolute: str | None = None
        if os.path.isabs(raw):
            absolute = os.path.normpath(raw)
        else:
            absolute = next(iter(hints), None)
            if absolute is None or not absolute.endswith("/" + raw):  # the usual case: the path as given
                absolute = None
                tail = "/" + _clean_relative(raw)
                for hint in hints:
                    if hint.endswith(tail) or path_key(hint).endswith(tail):
                        absolute = hint
                        break
            if absolute is None and self.cwd:
                absolute = os.path.normpath(os.path.join(self.cwd, raw))
        if absolute is None:
            return _clean_relative(raw), None
        if "\\" not in absolute:  # the common case, without normalising anything again
            for prefix in self._candidates():
                if absolute.startswith(prefix):
                    return absolute[len(prefix):], absolute
        for root in (*self.roots(), *([self.cwd] if self.cwd else [])):
            inside = _relative(absolute, root)
            if inside:
                return inside, absolute
        return (_clean_relative(raw) if not os.path.isabs(raw) else path_key(absolute)), absolute


_PLAIN_RELATIVE = re.compile(r"^(?![./])(?:[\w\-. ]+/)*[\w\-. ]+$")


def _clean_relative(path: str) -> str:
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


class ChainExtension:
    """Keeps ``edits`` in step with the index (see :class:`~project_history_recall.indexer.IndexExtension`)."""

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

    def session_written(self, conn: sqlite3.Connection, session: SourceSession, messages: list[SourceMessage],
                        repo_root: str | None, branch: str | None) -> None:
        placement = Placement(session.cwd, None, repo_root)
        edits = extract_edits(messages, _LazyCheckout(self, placement).place)
        if repo_root:  # where the edit landed is stored only when the repo root does not say it
            prefix = os.path.join(repo_root, "")
            for edit in edits:
                if edit.abs_path and edit.abs_path == prefix + edit.path:
                    edit.abs_path = None
        if edits:
            conn.executemany(
                "INSERT INTO edits(session_id, message_id, seq, timestamp, path, abs_path, form, old_text, new_text, "
                "raw, said, said_message_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(session.id, e.message_id, e.seq, e.timestamp, e.path, e.abs_path, e.form, e.old_text, e.new_text,
                  e.raw, e.said, e.said_message_id) for e in edits],
            )

    def session_deleted(self, conn: sqlite3.Connection, session_id: str) -> None:
        conn.execute("DELETE FROM edits WHERE session_id = ?", (session_id,))

    def cleared(self, conn: sqlite3.Connection) -> None:
        conn.execute("DELETE FROM edits")


if TYPE_CHECKING:
    from .indexer import IndexExtension

    _protocol_check: IndexExtension = ChainExtension()


class _LazyCheckout:
    """The :data:`~project_history_recall.chain_extract.Placer` for one session: probes the
    checkout only when an edit needs placing (most sessions have none), and remembers
    placements in the extension, since sessions edit the same few files again and again."""

    def __init__(self, extension: ChainExtension, placement: Placement) -> None:
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


def _read_text(path: str) -> str | None:
    try:
        if os.path.getsize(path) > MAX_FILE_BYTES:
            return None
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


# -- read side ------------------------------------------------------------------


@dataclass
class Round:
    """One ``edits`` row, rendered, with its session's branch and roots (joined at query time)."""

    session_id: str
    message_id: int
    seq: int
    timestamp: float
    path: str
    abs_path: str | None
    form: str
    old_text: str | None
    new_text: str | None
    said: str | None
    branch: str | None
    repo_root: str | None
    patch: str = ""
    symbol: str | None = None
    anchor: str | None = None
    content: str | None = None  # the whole file after a write or add
    base_known: bool = True
    hunks: tuple[Hunk, ...] = field(default_factory=tuple)

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Round:
        rendered = render_edit(row["form"], row["path"], row["raw"], row["old_text"], row["new_text"])
        return cls(row["session_id"], row["message_id"], row["seq"], row["timestamp"], row["path"], row["abs_path"],
                   row["form"], row["old_text"], row["new_text"], row["said"], row["branch"], row["repo_root"],
                   rendered.patch, rendered.symbol, rendered.anchor, rendered.content, row["form"] != "write",
                   rendered.hunks)

    def places(self) -> list[str]:
        """Where the file is on disk: where the edit landed, else under the session's repo root."""
        found = [self.abs_path] if self.abs_path else []
        if self.repo_root:
            found.append(os.path.join(self.repo_root, self.path))
        return found


_ROUND_SQL = (
    "SELECT e.session_id, e.message_id, e.seq, e.timestamp, e.path, e.abs_path, e.form, e.old_text, e.new_text, "
    "e.raw, e.said, s.branch, s.repo_root "
    "FROM edits e JOIN sessions s ON s.id = e.session_id "
    "WHERE e.session_id IN (SELECT value FROM json_each(?))"
)


def _branch_sql(branch: str | None) -> tuple[str, list[object]]:
    # Same rule as compute_scope: a session whose branch is unknown is kept.
    return (" AND (s.branch = ? OR s.branch IS NULL)", [branch]) if branch else ("", [])


def match_paths(candidates: Sequence[tuple[str, str | None]], fragment: str) -> list[str]:
    """The recorded paths ``fragment`` names, best tier only: the exact path, then paths
    ending in it (segment-wise), then an absolute path equal to or ending in one, then
    files under a folder of that name."""
    frag = _clean_relative(fragment.strip())
    if not frag:
        return []
    absolute = os.path.isabs(fragment.strip())
    tiers: list[list[str]] = [[], [], [], []]
    for rel, abs_path in candidates:
        if rel == frag:
            tiers[0].append(rel)
        elif not absolute and rel.endswith("/" + frag):
            tiers[1].append(rel)
        elif absolute and (path_key(abs_path) == frag or frag.endswith("/" + rel)):
            tiers[2].append(rel)
        elif ("/" + frag.strip("/") + "/") in ("/" + rel):
            tiers[3].append(rel)
    return next((list(dict.fromkeys(t)) for t in tiers if t), [])


def _load_rounds(conn: sqlite3.Connection, scope: str, path: str, branch: str | None) -> list[Round]:
    extra, params = _branch_sql(branch)
    rows = conn.execute(_ROUND_SQL + " AND e.path = ?" + extra + " ORDER BY e.timestamp, e.message_id, e.seq",
                        [scope, path, *params]).fetchall()
    return [Round.from_row(r) for r in rows]


def _apply(base: str | None, round_: Round) -> str | None:
    """The file after ``round_``, when the content before it is known and the change
    applies in exactly one place (anything less certain is unknown)."""
    if round_.form in ("write", "add", "delete"):
        return round_.content
    if base is None:
        return None
    if round_.form == "replace" and round_.old_text is not None and round_.new_text is not None:
        pairs = [(round_.old_text, round_.new_text)]
    else:
        pairs = [("\n".join(h.old), "\n".join(h.new)) for h in round_.hunks]
    for old, new in pairs:
        if not old or base.count(old) != 1:
            return None
        base = base.replace(old, new, 1)
    return base


def reconstruct(rounds: Sequence[Round]) -> None:
    """Give a whole-file write with an unknown previous version its real diff, when the
    chain before it (same branch) pins that version down."""
    known: dict[str | None, str | None] = {}
    for round_ in rounds:
        base = known.get(round_.branch)
        if round_.form == "write" and base is not None and round_.content is not None:
            hunks = diff_hunks(base, round_.content)
            round_.patch = render_patch(round_.path, hunks).replace(
                f"--- a/{round_.path}", f"--- a/{round_.path} (previous recorded version)", 1)
            round_.hunks = tuple(hunks)
            round_.symbol = changed_line_symbol(base, round_.content)
            round_.base_known = True
        known[round_.branch] = _apply(base, round_)


def locate_symbols(rounds: Sequence[Round]) -> None:
    """For rounds whose own lines do not say where they are: find their new text in the
    file as it is now (read once per file), and take the definition around it."""
    texts: dict[str, str | None] = {}
    for round_ in rounds:
        if round_.symbol or not round_.anchor:
            continue
        for place in round_.places():
            if place not in texts:
                texts[place] = _read_text(place) if os.path.isfile(place) else None
            text = texts[place]
            if text is not None:
                round_.symbol = symbol_at(text, round_.anchor)
                break


def _normalise(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")).strip("\n")


def version_present(file_text: str, round_: Round) -> bool | None:
    """Is what ``round_`` wrote still in ``file_text``? (None: this round cannot tell.)"""
    text = _normalise(file_text)
    if round_.form in ("write", "add"):
        return None if round_.content is None else _normalise(round_.content) == text
    if round_.form == "replace" and round_.new_text is not None:
        if round_.new_text.strip():
            return _normalise(round_.new_text) in text
        return None if not (round_.old_text or "").strip() else _normalise(round_.old_text or "") not in text
    verdicts = []
    for hunk in round_.hunks:
        new, old = _normalise("\n".join(hunk.new)), _normalise("\n".join(hunk.old))
        removes = any(line.startswith("-") and line[1:].strip() for line in hunk.lines)
        if new.strip():
            verdicts.append(new in text and (not removes or old not in text or old in new))
        elif removes and old.strip():
            verdicts.append(old not in text)
    return all(verdicts) if verdicts else None


def still_in_file(round_: Round) -> bool | None:
    """Check the last round against the file on disk: where the edit landed, else the
    path under the session's repo root; None when neither can be read."""
    places = round_.places()
    if round_.form == "delete":
        return None if not places else not any(os.path.exists(p) for p in places)
    for place in places:
        if os.path.isfile(place):
            text = _read_text(place)
            if text is not None:
                return version_present(text, round_)
    return None


def _matches_symbol(round_: Round, symbol: str) -> bool:
    wanted = symbol.strip().lower()
    if round_.symbol and wanted in (round_.symbol.lower(), round_.symbol.rsplit(".", 1)[-1].lower()):
        return True
    if round_.form == "write" and not round_.base_known:
        # Nothing is known about what changed: the write counts when it defines the symbol.
        names = (definition(line) for line in (round_.content or "").splitlines())
        return any(d is not None and d.name.lower() == wanted for d in names)
    wanted_tokens = index_tokens(symbol)
    tokens = set(index_tokens(" ".join([*(h.funcname for h in round_.hunks),
                                        *(c for h in round_.hunks for c in h.changed)])))
    return bool(wanted_tokens) and all(t in tokens for t in wanted_tokens)


def _matches_query(round_: Round, query: str) -> bool:
    plan = plan_query(query)
    if plan.empty:
        return True
    tokens = index_tokens(" ".join(filter(None, (round_.said, round_.symbol, round_.patch))))
    return bool(matched_units(plan, tokens))


def trim_patch(patch: str, limit: int) -> tuple[str, bool]:
    """``patch`` cut at a line boundary to ``limit`` characters, saying how much was left out."""
    if len(patch) <= limit:
        return patch, False
    kept = patch[:limit].rsplit("\n", 1)[0]
    left = patch.count("\n") - kept.count("\n")
    return f"{kept}\n… [{left} more lines]", True


def _round_dict(round_: Round, budget: int) -> dict:
    patch, truncated = trim_patch(round_.patch, budget)
    shown = {
        "session_id": round_.session_id,
        "link": f"@session:{round_.session_id}",
        "message_id": round_.message_id,
        "when": format_when(round_.timestamp),
        "branch": round_.branch,
        "said": round_.said,
        "form": round_.form,
        "symbol": round_.symbol,
        "patch": patch,
    }
    if truncated:
        shown["truncated"] = True
    return shown


def code_history(conn: sqlite3.Connection, scope_session_ids: Sequence[str], path: str, symbol: str | None = None,
                 query: str | None = None, branch: str | None = None, budget_chars: int = DEFAULT_BUDGET_CHARS,
                 limit: int | None = None) -> dict:
    """The rounds of one file among ``scope_session_ids``, oldest first, patches within
    ``budget_chars`` in all; the last round says whether its version is still in the file."""
    scope = json.dumps(list(scope_session_ids))
    extra, params = _branch_sql(branch)
    candidates = [(r[0], r[1]) for r in conn.execute(
        "SELECT DISTINCT e.path, e.abs_path FROM edits e JOIN sessions s ON s.id = e.session_id "
        "WHERE e.session_id IN (SELECT value FROM json_each(?))" + extra, [scope, *params])]
    matched = match_paths(candidates, path)
    if not matched:
        return {"success": True, "path": path, "rounds": [], "total_rounds": 0,
                "message": f"No recorded edits of {path!r} in this project"}
    if len(matched) > 1:
        return {"success": True, "path": path, "rounds": [], "total_rounds": 0,
                "candidates": sorted(matched)[:MAX_CANDIDATES],
                "message": f"{path!r} matches {len(matched)} edited files; ask again with one of the candidates"}
    chosen = matched[0]
    rounds = _load_rounds(conn, scope, chosen, branch)
    reconstruct(rounds)
    locate_symbols(rounds)
    if symbol:
        rounds = [r for r in rounds if _matches_symbol(r, symbol)]
    if query:
        rounds = [r for r in rounds if _matches_query(r, query)]
    total = len(rounds)
    if limit is not None:
        rounds = rounds[-limit:] if limit > 0 else []
    each = max(MIN_PATCH_CHARS, budget_chars // max(1, len(rounds)))
    shown = [_round_dict(r, each) for r in rounds]
    if shown:
        shown[-1]["still_in_file"] = still_in_file(rounds[-1])
    response: dict = {"success": True, "path": chosen, "rounds": shown, "total_rounds": total}
    if not shown:
        response["message"] = f"No recorded edits of {chosen!r} match"
    return response


def chain_summary(conn: sqlite3.Connection, session_id: str, message_id: int | None, *,
                  scope_session_ids: Sequence[str] | None = None) -> dict | None:
    """A short note for a search result whose message made (or asked for) an edit: the
    file, how many rounds it has, which one this is and the last change. ``None`` when
    the message touched no file. Pass the search's scope (plus the hit's session) so the
    count stays inside the project; without it, sessions sharing the hit's repo root count."""
    if message_id is None:
        return None
    rows = conn.execute(
        "SELECT path, MIN(seq) AS first FROM edits WHERE session_id = ? AND (message_id = ? OR said_message_id = ?) "
        "GROUP BY path ORDER BY first", (session_id, message_id, message_id)).fetchall()
    if not rows:
        return None
    path = rows[0]["path"]
    if scope_session_ids is None:
        own = conn.execute("SELECT repo_root, cwd FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if own is None:
            return None
        column, value = ("repo_root", own["repo_root"]) if own["repo_root"] else ("cwd", own["cwd"])
        ids = [r[0] for r in conn.execute(f"SELECT id FROM sessions WHERE {column} IS ?", (value,))]
    else:
        ids = list(dict.fromkeys([*scope_session_ids, session_id]))
    chain = conn.execute(
        "SELECT session_id, message_id, said_message_id, timestamp, said, form, path, raw, old_text, new_text "
        "FROM edits "
        "WHERE path = ? AND session_id IN (SELECT value FROM json_each(?)) ORDER BY timestamp, message_id, seq",
        (path, json.dumps(ids))).fetchall()
    if not chain:
        return None
    position = next((i for i, r in enumerate(chain, start=1) if r["session_id"] == session_id
                     and message_id in (r["message_id"], r["said_message_id"])), None)
    last = chain[-1]
    summary: dict = {
        "file": path,
        "rounds": len(chain),
        "this_round": position,
        "last_change": {"when": format_when(last["timestamp"]), "link": f"@session:{last['session_id']}",
                        "symbol": render_edit(last["form"], last["path"], last["raw"], last["old_text"],
                                              last["new_text"]).symbol,
                        "said": last["said"]},
    }
    if len(rows) > 1:
        summary["other_files"] = len(rows) - 1
    return summary


def code_history_for(recall: Any, session_id: str | None, path: object, *, cwd: str | None = None,
                     symbol: object = None, query: object = None, branch: object = None, limit: object = None,
                     budget_chars: int = DEFAULT_BUDGET_CHARS) -> dict:
    """:func:`code_history` for the project of ``session_id`` (or of ``cwd``), like
    ``Recall.search``: refresh, resolve the asker, scope. The asking session's own edits
    count (the chain is about the file, not about other conversations)."""
    from .recall import _clamped_int, _optional_text, _require_text

    text = _require_text(path, "path")
    symbol_text = _optional_text(symbol, "symbol")
    query_text = _optional_text(query, "query")
    branch_text = _optional_text(branch, "branch")
    count = _clamped_int(limit, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    if budget_chars < MIN_PATCH_CHARS:
        raise bad_argument(f"budget_chars must be at least {MIN_PATCH_CHARS}")
    conn = recall.fresh_reader()
    try:
        resolver = recall.resolver()
        asker = recall.asker(conn, resolver, session_id, cwd)
        base = {"success": True, "path": text, "project": asker.identity.as_dict()}
        if asker.identity.is_home:
            return {**base, "rounds": [], "total_rounds": 0, "message": asker.home_message}
        scope = compute_scope(conn, resolver, asker.identity, None, branch=branch_text)
        result = code_history(conn, scope.session_ids, text, symbol=symbol_text, query=query_text,
                              branch=branch_text, budget_chars=budget_chars, limit=count)
        return {**base, **result}
    finally:
        conn.close()


__all__ = [
    "CODE_HISTORY_SCHEMA",
    "ChainExtension",
    "Edit",
    "chain_summary",
    "code_history",
    "code_history_for",
]
