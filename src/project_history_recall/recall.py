"""The library behind every face: tools, the slash command, the CLI and the benchmarks.

``Recall(home)`` serves one Hermes home. Every method returns plain data (the
JSON shapes the tools return) or raises :class:`~project_history_recall.errors.RecallError`.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from . import moving
from .attribution import HOME, Identity, Resolver
from .errors import RecallError, bad_argument, no_db
from .host import HermesHome
from .index import Index, get_meta
from .indexer import Indexer, Probe, Progress, RefreshReport, git_probe
from .search import KINDS, Filters, Scope, compute_scope, group_by_session, keyword_hits, rank_keyword
from .settings import Settings
from .snippets import make_snippet
from .sources.hermes import HermesSource
from .tokenizer import plan_query
from .when import format_when, parse_when

MODES = ("hybrid", "keyword", "semantic")
NO_PROJECT_CONTEXT = "No project context (no working directory recorded)"
HOME_CONTEXT = "No project context: this session is in Home (no project), so there is nothing to search"
NO_OTHER_SESSIONS = "No other sessions in this project"
FRESHNESS_LOCK_WAIT = 2.0


@dataclass(frozen=True)
class Asker:
    """The session a question comes from, and the project it resolves to."""

    session_id: str | None
    cwd: str | None
    repo_root: str | None
    branch: str | None
    identity: Identity


class Recall:
    def __init__(self, home: HermesHome | Path | str | None = None, *, probe: Probe = git_probe,
                 settings: Settings | None = None) -> None:
        if home is None:
            self.home = HermesHome.current()
        elif isinstance(home, HermesHome):
            self.home = home
        else:
            self.home = HermesHome(Path(home))
        self.settings = settings or self.home.settings()
        self.probe = probe
        self.index = Index(self.home.data_dir)
        self.source = HermesSource(self.home.state_db)
        self.indexer = Indexer(self.index, self.source, probe)

    # -- indexing -------------------------------------------------------------

    def refresh(self, *, force: bool = False, progress: Progress | None = None,
                lock_timeout: float = 10.0) -> RefreshReport:
        if not self.source.exists():
            raise no_db(self.home.state_db)
        return self.indexer.refresh(force=force, progress=progress, lock_timeout=lock_timeout)

    def ensure_fresh(self) -> None:
        """The incremental check before every read: cheap when nothing changed. When
        another process holds the writer lock, read what is there rather than wait long."""
        try:
            self.refresh(lock_timeout=FRESHNESS_LOCK_WAIT)
        except RecallError as exc:
            if exc.code != "index_busy" or not self.index.exists():
                raise

    def resolver(self) -> Resolver:
        return Resolver(self.home.load_projects(), self.home.environment())

    # -- who is asking ------------------------------------------------------------

    def asker(self, conn: sqlite3.Connection, resolver: Resolver, session_id: str | None,
              cwd: str | None) -> Asker:
        row = None
        if session_id:
            row = conn.execute("SELECT cwd, repo_root, branch FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is not None:
            cwd, root, branch = row["cwd"], row["repo_root"], row["branch"]
        else:
            cwd = cwd if cwd is not None else (None if session_id else os.getcwd())
            root, branch = self.probe(cwd) if cwd else (None, None)
        identity = resolver.resolve(cwd, root) if cwd or root else HOME
        return Asker(session_id, cwd, root, branch, identity)

    # -- search -------------------------------------------------------------------

    def search(self, query: object, *, session_id: str | None = None, cwd: str | None = None,
               mode: object = "hybrid", limit: object = 3, after: object = None, before: object = None,
               kinds: object = None, scope: object = "project", branch: object = None) -> dict:
        text = _require_text(query, "query")
        mode = _choice(mode, MODES, "mode", "hybrid")
        limit = _clamped_int(limit, "limit", 3, 1, 10)
        everywhere = _choice(scope, ("project", "all"), "scope", "project") == "all"
        filters = Filters(
            after=parse_when(after, name="after"),
            before=parse_when(before, name="before"),
            kinds=_kinds(kinds),
            branch=_optional_text(branch, "branch"),
        )
        self.ensure_fresh()
        conn = self.index.connect_readonly()
        if conn is None:
            raise RecallError("the index is not built yet", "no_index")
        try:
            resolver = self.resolver()
            asker = self.asker(conn, resolver, session_id, cwd)
            semantic_status = "disabled"
            base = {"success": True, "mode": mode, "query": text, "project": asker.identity.as_dict(),
                    "semantic_status": semantic_status}
            if asker.identity.is_home and not everywhere:
                message = NO_PROJECT_CONTEXT if not (asker.cwd or asker.repo_root) else HOME_CONTEXT
                return {**base, "results": [], "message": message, "sessions_in_scope": 0}
            scope = compute_scope(conn, resolver, asker.identity, session_id, everywhere=everywhere,
                                  branch=filters.branch)
            if not scope.session_ids:
                return {**base, "results": [], "message": NO_OTHER_SESSIONS,
                        "sessions_in_scope": scope.sessions_in_scope}
            plan = plan_query(text)
            hits = keyword_hits(conn, plan, scope.session_ids, filters)
            rank_keyword(hits)
            grouped = group_by_session(hits, plan, limit)
            results = [self._result(conn, g.best, plan, scope, everywhere) for g in grouped]
            response = {**base, "results": results, "sessions_in_scope": scope.sessions_in_scope}
            if not results:
                response["message"] = "No matching messages in this project"
            return response
        finally:
            conn.close()

    def _result(self, conn: sqlite3.Connection, hit, plan, scope: Scope, everywhere: bool) -> dict:
        row = conn.execute("SELECT title, started_at FROM sessions WHERE id = ?", (hit.session_id,)).fetchone()
        result = {
            "session_id": hit.session_id,
            "link": f"@session:{hit.session_id}",
            "title": row["title"] if row else None,
            "message_id": hit.message_id,
            "kind": hit.kind,
            "snippet": make_snippet(hit.text, plan),
            "score_source": hit.score_source,
            "when": format_when(hit.timestamp or (row["started_at"] if row else None)),
        }
        if everywhere:
            result["project"] = scope.identities[hit.session_id].as_dict()
        return result

    # -- moving -------------------------------------------------------------------

    def move_session(self, session_id: str | None, project_id: object) -> dict:
        exists = False
        if session_id and self.source.exists():
            with self.source.read() as reader:
                exists = session_id in reader.sessions()
        moved = moving.move_session(self.home, session_id, project_id, self.probe, exists)
        self.ensure_fresh()
        resolver = self.resolver()
        identity = resolver.resolve(moved["cwd"], moved["git_repo_root"])
        return {
            "success": True,
            "project": identity.as_dict(),
            "cwd": moved["cwd"],
            "git_branch": moved["git_branch"],
            "git_repo_root": moved["git_repo_root"],
            "message": f"Moved to {moved['label']}, cwd now {moved['cwd']}",
        }

    # -- status -------------------------------------------------------------------

    def status(self) -> dict:
        """What the index holds. Answers with no index at all, and never creates one."""
        info: dict = {
            "success": True,
            "hermes_home": str(self.home.root),
            "state_db": str(self.home.state_db),
            "state_db_exists": self.source.exists(),
            "index_path": str(self.index.path),
            "index_exists": self.index.exists(),
        }
        conn = self.index.connect_readonly()
        if conn is None:
            info["message"] = "No index yet: it is built on first search, or with `phr index`."
            return info
        try:
            info.update(
                sessions_indexed=conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0],
                messages_indexed=conn.execute("SELECT COALESCE(SUM(message_count), 0) FROM sessions").fetchone()[0],
                entries_indexed=conn.execute("SELECT COUNT(*) FROM entries").fetchone()[0],
                index_bytes=sum(p.stat().st_size for p in self.index.data_dir.glob("index.db*") if p.is_file()),
                last_index_at=format_when(float(get_meta(conn, "last_index_at", "0") or 0)),
            )
        finally:
            conn.close()
        return info


def _require_text(value: object, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise bad_argument(f"{name} must be a non-empty string")
    if len(value) > 4000:
        value = value[:4000]
    return value.strip()


def _optional_text(value: object, name: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise bad_argument(f"{name} must be a string")
    return value.strip() or None


def _choice(value: object, allowed: tuple[str, ...], name: str, default: str) -> str:
    if value is None or value == "":
        return default
    if not isinstance(value, str) or value.strip().lower() not in allowed:
        raise bad_argument(f"{name} must be one of {', '.join(allowed)}")
    return value.strip().lower()


def _clamped_int(value: object, name: str, default: int, low: int, high: int) -> int:
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise bad_argument(f"{name} must be a whole number")
    try:
        number = int(float(value)) if isinstance(value, str | int | float) else None
    except (ValueError, OverflowError):
        number = None
    if number is None:
        raise bad_argument(f"{name} must be a whole number")
    return max(low, min(high, number))


def _kinds(value: object) -> tuple[str, ...] | None:
    if value is None or value == "" or value == []:
        return None
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(k, str) for k in items):
        raise bad_argument(f"kinds must be a list of: {', '.join(KINDS)}")
    kinds = tuple(dict.fromkeys(k.strip().lower() for k in items if k.strip()))
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise bad_argument(f"unknown kinds {unknown}; use {', '.join(KINDS)}")
    return kinds or None
