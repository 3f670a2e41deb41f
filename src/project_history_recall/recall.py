"""The library facade: what every face calls (tools, ``/recall``, ``phr``, benchmarks).

``Recall(home)`` serves one Hermes home. Each method checks its arguments
(:mod:`.arguments`), brings the index up to date (:mod:`.services.freshness`),
opens one reader and hands it, with the resolver and the asker, to the service
that answers. Every method returns plain data (the JSON shapes the tools return)
or raises :class:`~project_history_recall.errors.RecallError`.
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

from project_history_recall import arguments
from project_history_recall.errors import RecallError, bad_argument
from project_history_recall.hermes_home import HermesHome
from project_history_recall.index.entries import KINDS
from project_history_recall.index.indexer import Progress, RefreshReport
from project_history_recall.index.probes import Probe, git_probe
from project_history_recall.index.store import Index, is_damage
from project_history_recall.quoting import quoted
from project_history_recall.search import service as search_service
from project_history_recall.search.scope import Filters, compute_scope, reader_scope
from project_history_recall.services import browse, code_history, forgetting, freshness, jobs, moving
from project_history_recall.services.consent import (
    SCOPE_ALL,
    consent_matches_service,
    load_consent,
    needs_consent,
    record_consent,
    revoke_consent,
)
from project_history_recall.services.semantic import SemanticService
from project_history_recall.services.status import status as status_report
from project_history_recall.services.workspace import Workspace
from project_history_recall.settings import Settings
from project_history_recall.sources import TRANSCRIPT_PREFIXES
from project_history_recall.when import parse_when

HEAL_LOCK_WAIT = 30.0  # a rebuild by another process may hold the writer lock this long


def _heals(method: Callable[..., dict]) -> Callable[..., dict]:
    """A read that finds the index file damaged (a bad page, a missing table) moves it aside,
    rebuilds from the source and answers again: never an error that stays, never wrong rows."""

    @functools.wraps(method)
    def wrapper(self: Recall, *args: object, **kwargs: object) -> dict:
        index = self.workspace.index
        damaged = index.identity()
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise RecallError(f"the index could not be read: {exc}", "index_unreadable") from exc
            with index.writer(HEAL_LOCK_WAIT):
                # Another process may have seen the same damage first, moved the file aside and
                # be building (or have built) the new one: that file is not ours to move.
                if index.identity() == damaged:
                    index.move_aside("index_corrupt")
        self.refresh()
        return method(self, *args, **kwargs)

    return wrapper


class Recall:
    def __init__(self, home: HermesHome | Path | str | None = None, *, probe: Probe = git_probe,
                 settings: Settings | None = None, background_embedding: bool = False,
                 detach_embedding: bool = False) -> None:
        if home is None:
            home = HermesHome.current()
        elif not isinstance(home, HermesHome):
            home = HermesHome(Path(home))
        self.workspace = Workspace(home, probe=probe, settings=settings)
        #: The plugin embeds a large backlog in a background thread. A one-shot process that
        #: exits right after answering (``phr``) hands it to a detached process instead
        #: (``detach_embedding``); benchmarks do neither and report ``partial``.
        self.semantic = SemanticService(self.workspace, background=background_embedding)
        self.detach_embedding = detach_embedding
        self.last_freshness: freshness.Freshness | None = None
        #: Set when a read found the index unreadable and rebuilt it; the next answer says so.
        self.rebuilt_note: str | None = None

    @property
    def home(self) -> HermesHome:
        return self.workspace.home

    @property
    def settings(self) -> Settings:
        return self.workspace.settings

    @property
    def index(self) -> Index:
        return self.workspace.index

    # -- indexing -------------------------------------------------------------

    def refresh(self, *, force: bool = False, progress: Progress | None = None,
                lock_timeout: float = 10.0) -> RefreshReport:
        return self.workspace.refresh(force=force, progress=progress, lock_timeout=lock_timeout)

    def embed(self, progress: Progress | None = None) -> dict:
        """Embed everything pending now, in the foreground (``phr index``). Honours consent."""
        return self.semantic.embed(progress)

    def ensure_fresh(self) -> None:
        """The incremental check before every read (see :mod:`.services.freshness`);
        ``last_freshness`` says how it went."""
        self.last_freshness = None
        self.last_freshness = freshness.ensure(self.workspace)

    def kick(self) -> None:
        """Start the background refresh (or first build) and return at once."""
        freshness.kick(self.workspace)

    def request_index(self, *, force: object = False, reason: str = "tool", budget: float | None = None,
                      background: bool = False) -> dict:
        """Build or refresh now (the index tool, ``/recall index``): see :func:`.jobs.request_index`.
        ``background`` hands any work to a detached job and answers at once."""
        return jobs.request_index(self.workspace, force=arguments.flag(force), reason=reason,
                                  budget=0.0 if background else budget, large=-1 if background else None)

    def index_in_foreground(self, *, force: bool = False, reason: str = "cli", progress: Progress | None = None,
                            embed_progress: Progress | None = None) -> dict:
        """``phr index``: the job runs in this thread, keywords then vectors, with progress."""
        return jobs.run_in_foreground(self.workspace, force=force, reason=reason, progress=progress,
                                      embed_progress=embed_progress)

    def check_asker(self, session_id: str | None, cwd: str | None) -> None:
        """Refuse a ``session_id`` or ``cwd`` a person typed that names nothing (see
        :meth:`.Workspace.check_asker`)."""
        self.workspace.check_asker(session_id, cwd)

    @contextlib.contextmanager
    def fresh_reader(self) -> Iterator[sqlite3.Connection]:
        """A reader over an index brought up to date first (``no_index`` when there is none),
        kept for the next read when this one ends well (:meth:`Index.reading`)."""
        self.ensure_fresh()
        index = self.workspace.index
        with index.reading() as conn:
            if conn is not None:
                yield conn
                return
        if index.path.exists():
            self._heal_unreadable()
        with index.reading() as conn:
            if conn is None:
                raise RecallError("the index is not built yet", "no_index")
            yield conn

    def _heal_unreadable(self) -> None:
        """An index file that is there but cannot be read (truncated in place, say) while
        ``state.db`` is quiet: nothing would rebuild it until Hermes writes again. It is opened
        for writing (migrated, or moved aside when damaged), moved aside if still unreadable —
        kept for inspection, never deleted — and rebuilt from the source; the answer says so."""
        index = self.workspace.index
        damaged = index.identity()
        with index.writer(HEAL_LOCK_WAIT):
            if index.identity() == damaged:  # another process may have healed it meanwhile
                with contextlib.suppress(RecallError):  # damaged: moved aside by connect itself
                    index.connect().close()
                reader = index.connect_readonly()
                if reader is None:
                    index.move_aside("index_unreadable")
                else:
                    reader.close()
        self.refresh()
        self.rebuilt_note = ("the index file was damaged and has been rebuilt from Hermes's history (a damaged "
                             f"file is kept beside it as {index.path.name}.<reason>-<time>; an empty one had "
                             "nothing to keep)")

    def answer(self, read: Callable[[], dict]) -> dict:
        """Run a read and say how fresh its index was: ``building`` instead of a bare
        ``no_index`` while the first build runs, ``updating`` when it read a stale index. Its
        text comes back without control or bidi characters (:mod:`~project_history_recall.quoting`)."""
        try:
            payload = read()
        except RecallError as exc:
            fresh = self.last_freshness
            if exc.code != "no_index" or fresh is None:
                raise
            if fresh.state == "building":
                return freshness.building_payload(fresh)
            if fresh.state == "manual":
                raise RecallError("the index is not built yet and automatic indexing is off: run "
                                  "project_history_index (or /recall index, phr index)", "no_index") from exc
            raise
        if self.detach_embedding and isinstance(payload, dict) and payload.get("semantic_status") == "partial":
            self._embed_detached(payload)
        payload = quoted(payload)  # history is quoted data: no control or bidi characters reach a reader
        if self.rebuilt_note and isinstance(payload, dict):
            payload.setdefault("index_rebuilt", self.rebuilt_note)
            self.rebuilt_note = None
        fresh = self.last_freshness
        if fresh is not None and fresh.state in ("updating", "building", "stale") and isinstance(payload, dict):
            payload.setdefault("index_status", fresh.state)
            if fresh.job:
                payload.setdefault("job_id", fresh.job.get("id"))
            if fresh.warning:
                payload.setdefault("warning", fresh.warning)
        return payload

    def _embed_detached(self, payload: dict) -> None:
        """A vector backlog this one-shot process will not live to embed: a detached process
        does it (or the answer says what to run)."""
        pid = jobs.embed_in_background(self.workspace)
        pending = payload.get("semantic_pending", 0)
        if pid is not None:
            payload["semantic_status"] = "indexing"
            payload["embedding_pid"] = pid
            said = (f"{pending} messages have no vectors yet: a background process (pid {pid}) is "
                    "embedding them; `phr status` shows progress")
        else:
            said = f"{pending} messages have no vectors yet: run `phr index` to embed them now"
        payload["semantic_message"] = " ".join(filter(None, [payload.get("semantic_message"), said]))

    # -- reads --------------------------------------------------------------------
    #
    # One scope rule for every read: the asking session's project (Home = nothing). A person
    # (``/recall``, ``phr``, a program using the library) may widen it with ``scope="all"`` and
    # open any session; the model's tools say ``by_model=True`` and may only when config
    # ``allow_cross_project`` is true.

    def _confined(self, by_model: bool) -> bool:
        """Whether the caller may read only its own project (the model, unless config allows)."""
        return by_model and not self.settings.allow_cross_project

    def _everywhere(self, scope: object, by_model: bool) -> bool:
        everywhere = arguments.choice(scope, ("project", "all"), "scope", "project") == "all"
        if everywhere and self._confined(by_model):
            raise RecallError(
                "scope 'all' (every project's history) is off for the model's tools: this conversation "
                "reads only its own project. A person can use /recall or phr, or enable it with config "
                "plugins.entries.project-history-recall.allow_cross_project: true", "cross_project_disabled")
        return everywhere

    @_heals
    def search(self, query: object, *, session_id: str | None = None, cwd: str | None = None,
               mode: object = "hybrid", limit: object = 3, after: object = None, before: object = None,
               kinds: object = None, scope: object = "project", branch: object = None,
               by_model: bool = False) -> dict:
        question = search_service.Question(
            text=arguments.require_text(query, "query"),
            mode=arguments.choice(mode, search_service.MODES, "mode", "hybrid"),
            limit=arguments.clamped_int(limit, "limit", 3, 1, 10),
            filters=Filters(
                after=parse_when(after, name="after"),
                before=parse_when(before, name="before"),
                kinds=arguments.kinds(kinds, KINDS),
                branch=arguments.optional_text(branch, "branch"),
            ),
            everywhere=self._everywhere(scope, by_model),
        )
        with self.fresh_reader() as conn:
            resolver = self.workspace.resolver()
            asker = self.workspace.asker(conn, resolver, session_id, cwd)
            return search_service.search(conn, resolver, asker, question, self.semantic,
                                         chain_block=self.settings.chain_block)

    @_heals
    def session(self, target: object, *, around_message_id: object = None, window: object = None,
                session_id: str | None = None, cwd: str | None = None, branch: object = None,
                by_model: bool = False) -> dict:
        """One session by id, ``@session:`` link or unique prefix. ``branch`` is
        accepted like everywhere; an explicit id opens its session whatever the branch.
        For the model (``by_model``) only sessions of the asker's project open, and only they
        are offered as candidates (``not_in_project`` otherwise; Home opens none but its own)."""
        text = arguments.require_text(target, "session_id")
        arguments.optional_text(branch, "branch")
        anchor = None
        if around_message_id is not None and around_message_id != "":
            anchor = arguments.clamped_int(around_message_id, "around_message_id", 0, 0, 2**62)
        size = arguments.clamped_int(window, "window", browse.WINDOW_DEFAULT, 1, browse.WINDOW_MAX)
        source = self.workspace.source

        def source_messages(sid: str) -> list:
            with source.read() as reader:
                return reader.messages(sid)

        with self.fresh_reader() as conn:
            resolver = self.workspace.resolver()
            allowed = None
            if self._confined(by_model):
                asker = self.workspace.asker(conn, resolver, session_id, cwd)
                allowed = reader_scope(conn, resolver, asker.identity, asker.session_id)
            payload = browse.open_session(conn, resolver, text, around_message_id=anchor, window=size,
                                          source_messages=source_messages if source.exists() else None,
                                          allowed=allowed)
            if session_id and payload["session"]["session_id"] == session_id:
                payload["session"]["current"] = True
            return payload

    @_heals
    def timeline(self, *, session_id: str | None = None, cwd: str | None = None, scope: object = "project",
                 after: object = None, before: object = None, branch: object = None, limit: object = None,
                 by_model: bool = False) -> dict:
        everywhere = self._everywhere(scope, by_model)
        after_at, before_at = parse_when(after, name="after"), parse_when(before, name="before")
        branch_name = arguments.optional_text(branch, "branch")
        count = arguments.clamped_int(limit, "limit", browse.TIMELINE_DEFAULT, 1, browse.TIMELINE_MAX)
        with self.fresh_reader() as conn:
            resolver = self.workspace.resolver()
            asker = self.workspace.asker(conn, resolver, session_id, cwd)
            if asker.identity.is_home and not everywhere:
                return {"success": True, "operation": "timeline", "scope": "project",
                        "project": asker.identity.as_dict(), "sessions": [], "total": 0, "shown": 0,
                        "message": asker.home_message.replace("to search", "to list")
                        + ("; use scope 'all' for every project" if not self._confined(by_model)
                           else "; a person can list every project with /recall sessions all")}
            return browse.timeline(conn, resolver, asker.identity, session_id, everywhere=everywhere,
                                   after=after_at, before=before_at, branch=branch_name, limit=count)

    @_heals
    def projects(self, *, session_id: str | None = None, cwd: str | None = None, branch: object = None) -> dict:
        branch_name = arguments.optional_text(branch, "branch")
        with self.fresh_reader() as conn:
            resolver = self.workspace.resolver()
            asker = self.workspace.asker(conn, resolver, session_id, cwd)
            payload = browse.projects(conn, resolver, asker.identity, branch=branch_name)
        withheld = forgetting.summary(self.workspace)
        if withheld["sessions_withheld"] or withheld["exclusions"]:
            payload["withheld"] = withheld  # counts of what is kept out, never its names or ids
        return payload

    @_heals
    def code_history(self, path: object, *, session_id: str | None = None, cwd: str | None = None,
                     symbol: object = None, query: object = None, branch: object = None,
                     limit: object = None, budget_chars: int = code_history.DEFAULT_BUDGET_CHARS) -> dict:
        """How a file's code evolved across this project's sessions (the edit chain). The
        asking session's own edits count: the chain is about the file, not other conversations."""
        text = arguments.require_text(path, "path")
        symbol_text = arguments.optional_text(symbol, "symbol")
        query_text = arguments.optional_text(query, "query")
        branch_text = arguments.optional_text(branch, "branch")
        count = arguments.clamped_int(limit, "limit", code_history.DEFAULT_LIMIT, 1, code_history.MAX_LIMIT)
        if budget_chars < code_history.MIN_PATCH_CHARS:
            raise bad_argument(f"budget_chars must be at least {code_history.MIN_PATCH_CHARS}")
        with self.fresh_reader() as conn:
            resolver = self.workspace.resolver()
            asker = self.workspace.asker(conn, resolver, session_id, cwd)
            base = {"success": True, "path": text, "project": asker.identity.as_dict()}
            if asker.identity.is_home:
                return {**base, "rounds": [], "total_rounds": 0, "message": asker.home_message}
            scope = compute_scope(conn, resolver, asker.identity, None, branch=branch_text)
            result = code_history.code_history(conn, scope.session_ids, text, symbol=symbol_text,
                                               query=query_text, branch=branch_text, budget_chars=budget_chars,
                                               limit=count, roots=resolver.folders_of(asker.identity))
            warning = scope.branch_warning(branch_text)
            return {**base, **result, **({"warning": warning} if warning else {})}

    def status(self, *, session_id: str | None = None, cwd: str | None = None, branch: object = None) -> dict:
        """Answers with no index at all, and never creates a file (see :mod:`.services.status`)."""
        return status_report(self.semantic, session_id=session_id, cwd=cwd,
                             branch=arguments.optional_text(branch, "branch"))

    # -- writes -------------------------------------------------------------------

    def forget(self, target: object, *, undo: bool = False) -> dict:
        """A person's "never index this session again" (or, with ``undo``, "index it again")."""
        text = arguments.require_text(target, "session_id")
        return forgetting.undo(self.workspace, text) if undo else forgetting.forget(self.workspace, text)

    def exclude(self, *, project: str | None = None, path: str | None = None, remove: bool = False) -> dict:
        """A person keeps a project or folders out of the index (or, with ``remove``, lets them in)."""
        return forgetting.exclude(self.workspace, project=project, path=path, remove=remove)

    def withheld(self) -> dict:
        return forgetting.listing(self.workspace)

    def move_session(self, session_id: str | None, project_id: object) -> dict:
        if session_id and session_id.startswith(TRANSCRIPT_PREFIXES):
            # Its cwd is in the other agent's own files, which are never written.
            raise RecallError(f"session {session_id} is another agent's history ({session_id.split('-')[0]}): "
                              "only Hermes sessions can be moved", "move_unsupported_source")
        source = self.workspace.hermes
        exists = False
        if session_id and source.exists():
            with source.read() as reader:
                exists = session_id in reader.sessions([session_id])
        moved = moving.move_session(self.home, session_id, project_id, self.workspace.probe, exists)
        self.ensure_fresh()
        identity = self.workspace.resolver().resolve(moved["cwd"], moved["git_repo_root"])
        return {
            "success": True,
            "project": identity.as_dict(),
            "cwd": moved["cwd"],
            "git_branch": moved["git_branch"],
            "git_repo_root": moved["git_repo_root"],
            "message": f"Moved to {moved['label']}, cwd now {moved['cwd']}",
        }

    def consent(self, *, session_id: str | None = None, cwd: str | None = None, everywhere: bool = False,
                revoke: bool = False) -> dict:
        """Record the user's consent to send this project's history (or every project's) to the
        configured remote embedding provider; widening keeps the projects already consented."""
        data_dir = self.home.data_dir
        if revoke:
            return {"success": True, "revoked": revoke_consent(data_dir)}
        emb = self.settings.embedding
        if not needs_consent(emb.provider):
            return {"success": True, "consent_needed": False,
                    "message": "the local embedding model sends nothing anywhere: no consent is needed"}
        with self.fresh_reader() as conn:
            identity = self.workspace.asker(conn, self.workspace.resolver(), session_id, cwd).identity
        if identity.is_home and not everywhere:
            raise RecallError("this session is in no project: consent for every project with 'all'", "no_project")
        previous = load_consent(data_dir)
        projects = {"*"} if everywhere else {identity.scope_key}
        scope = SCOPE_ALL
        if previous is not None and consent_matches_service(previous, provider=emb.provider, endpoint=emb.endpoint,
                                                            model=emb.model):
            # Widening adds projects; it never turns an incremental consent into one for all history.
            projects |= set(previous.projects)
            scope = previous.scope
        record = record_consent(data_dir, profile=self.home.profile, projects=sorted(projects),
                                provider=emb.provider, endpoint=emb.endpoint, model=emb.model, scope=scope)
        return {"success": True, "consent": record.as_dict(),
                "message": f"history of {'every project' if '*' in projects else identity.name or identity.key} "
                           f"may now be sent to {emb.endpoint} ({emb.model}), secrets redacted"}
