"""The coding scene's read side: how a file's code evolved across sessions (seed 003).

:func:`code_history` answers the ``project_code_history`` tool and ``phr code-history``;
:func:`chain_summary` is the opt-in ``chain`` block of search results. Nothing about
projects is stored with an edit: which sessions count is the caller's scope, decided
at query time, and an edit's branch is its session's branch, read from ``sessions``.
The rows are written by :mod:`project_history_recall.index.edit_phase`.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from project_history_recall.index.diffs import Hunk, diff_hunks, render_patch
from project_history_recall.index.edit_phase import clean_relative
from project_history_recall.index.edits import render_edit
from project_history_recall.index.symbols import changed_line_symbol, definition, symbol_at
from project_history_recall.paths import is_same_or_under, path_key
from project_history_recall.tokenizer import index_tokens, matched_units, plan_query
from project_history_recall.when import format_when

DEFAULT_BUDGET_CHARS = 6000


MIN_PATCH_CHARS = 300


MAX_FILE_BYTES = 2_000_000


DEFAULT_LIMIT = 10


MAX_LIMIT = 50


MAX_CANDIDATES = 20


def _read_text(path: str) -> str | None:
    try:
        if os.path.getsize(path) > MAX_FILE_BYTES:
            return None
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


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
    cwd: str | None = None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Round:
        rendered = render_edit(row["form"], row["path"], row["raw"], row["old_text"], row["new_text"])
        return cls(row["session_id"], row["message_id"], row["seq"], row["timestamp"], row["path"], row["abs_path"],
                   row["form"], row["old_text"], row["new_text"], row["said"], row["branch"], row["repo_root"],
                   rendered.patch, rendered.symbol, rendered.anchor, rendered.content, row["form"] != "write",
                   rendered.hunks, row["cwd"])

    def places(self, roots: Sequence[str]) -> list[str]:
        """Where the file is on disk: where the edit landed, else under the session's repo root
        — only places that resolve (symlinks followed) inside ``roots``, the project's folders: a
        ``../..`` or absolute path in a patch, or a link out of the repo, is never read."""
        found = [self.abs_path] if self.abs_path else []
        if self.repo_root:
            found.append(os.path.join(self.repo_root, self.path))
        inside = _inside(roots)
        if self.cwd and self.repo_root and inside(self.repo_root):
            # The session's folder is a checkout of a project repo (a linked worktree elsewhere).
            inside = _inside([*roots, self.cwd])
        return [place for place in found if inside(place)]


def _inside(roots: Sequence[str]) -> Callable[[str], bool]:
    """Whether a path, symlinks resolved, is one of ``roots`` (resolved too) or under one."""
    real_roots = [path_key(os.path.realpath(root)) for root in roots]
    return lambda path: any(is_same_or_under(path_key(os.path.realpath(path)), root) for root in real_roots)


_ROUND_SQL = (
    "SELECT e.session_id, e.message_id, e.seq, e.timestamp, e.path, e.abs_path, e.form, e.old_text, e.new_text, "
    "e.raw, e.said, s.branch, s.repo_root, s.cwd "
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
    frag = clean_relative(fragment.strip())
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


def locate_symbols(rounds: Sequence[Round], roots: Sequence[str]) -> None:
    """For rounds whose own lines do not say where they are: find their new text in the
    file as it is now (read once per file, inside ``roots`` only), and take the definition around it."""
    texts: dict[str, str | None] = {}
    for round_ in rounds:
        if round_.symbol or not round_.anchor:
            continue
        for place in round_.places(roots):
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


def still_in_file(round_: Round, roots: Sequence[str]) -> bool | None:
    """Check the last round against the file on disk: where the edit landed, else the
    path under the session's repo root, inside ``roots``; None when neither can be read."""
    places = round_.places(roots)
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
                 limit: int | None = None, roots: Sequence[str] = ()) -> dict:
    """The rounds of one file among ``scope_session_ids``, oldest first, patches within
    ``budget_chars`` in all; the last round says whether its version is still in the file.
    Files are read only inside ``roots`` (the project's folders)."""
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
    locate_symbols(rounds, roots)
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
        shown[-1]["still_in_file"] = still_in_file(rounds[-1], roots)
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
