"""The library behind every face: tools, the slash command, the CLI and the benchmarks.

``Recall(home)`` serves one Hermes home. Every method returns plain data (the
JSON shapes the tools return) or raises :class:`~project_history_recall.errors.RecallError`.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import moving
from .attribution import HOME, Identity, Resolver
from .chain import ChainExtension, chain_summary, code_history_for
from .consent import (
    consent_covers,
    consent_matches_service,
    consent_path,
    load_consent,
    load_sent,
    needs_consent,
)
from .embeddings.base import CONSENT_REQUIRED, EmbeddingProvider, ProviderError
from .errors import RecallError, bad_argument, no_db
from .freshness import Freshness
from .host import HermesHome
from .index import Index, get_meta, is_damage
from .indexer import Indexer, Probe, Progress, RefreshReport, git_probe
from .search import (
    KINDS,
    Filters,
    Hit,
    Scope,
    compute_scope,
    fuse,
    group_by_session,
    keyword_hits,
    pin_exact_identifier,
    rank_keyword,
    session_identities,
)
from .semantic import (
    SYNC_EMBED_BUDGET,
    Embedder,
    SemanticState,
    background_running,
    last_background_error,
    pending_in_scope,
    provider_for,
    semantic_hits,
    start_background,
)
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
CONSENT_MESSAGE = ("Semantic search is configured to send this project's history to {endpoint}, which needs "
                   "the user's consent first (nothing has been sent). Ask the user; if they agree, they run "
                   "`/recall consent` (this project) or `/recall consent all`. Keyword results are below.")


@dataclass(frozen=True)
class Asker:
    """The session a question comes from, and the project it resolves to."""

    session_id: str | None
    cwd: str | None
    repo_root: str | None
    branch: str | None
    identity: Identity

    @property
    def home_message(self) -> str:
        """Why a Home session has nothing to search (seed 000's wording when there is no cwd)."""
        return NO_PROJECT_CONTEXT if not (self.cwd or self.repo_root) else HOME_CONTEXT


HEAL_LOCK_WAIT = 30.0  # a rebuild by another process may hold the writer lock this long


def _heals(method: Callable[..., dict]) -> Callable[..., dict]:
    """A read that finds the index file damaged (a bad page, a missing table) moves it aside,
    rebuilds from the source and answers again: never an error that stays, never wrong rows."""

    @functools.wraps(method)
    def wrapper(self: Recall, *args: object, **kwargs: object) -> dict:
        damaged = self.index.identity()
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise RecallError(f"the index could not be read: {exc}", "index_unreadable") from exc
            with self.index.writer(HEAL_LOCK_WAIT):
                # Another process may have seen the same damage first, moved the file aside and
                # be building (or have built) the new one: that file is not ours to move.
                if self.index.identity() == damaged:
                    self.index.move_aside("index_corrupt")
        self.refresh()
        return method(self, *args, **kwargs)

    return wrapper


class Recall:
    def __init__(self, home: HermesHome | Path | str | None = None, *, probe: Probe = git_probe,
                 settings: Settings | None = None, background_embedding: bool = False) -> None:
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
        self.indexer = Indexer(self.index, self.source, probe, extensions=[ChainExtension()])
        #: The plugin embeds a large backlog in a background thread; one-shot processes
        #: (the CLI, benchmarks) leave it to ``phr index`` and report ``partial``.
        self.background_embedding = background_embedding

    # -- indexing -------------------------------------------------------------

    def refresh(self, *, force: bool = False, progress: Progress | None = None,
                lock_timeout: float = 10.0) -> RefreshReport:
        if not self.source.exists():
            raise no_db(self.home.state_db)
        return self.indexer.refresh(force=force, progress=progress, lock_timeout=lock_timeout)

    def ensure_fresh(self) -> None:
        """The incremental check before every read: cheap when nothing changed, and
        bounded in time whatever happened (see :mod:`.freshness`): a refresh that
        takes longer keeps going in the background and the read uses the index as it
        stands; with no index yet the first build starts. ``last_freshness`` says which."""
        from .freshness import ensure

        self._freshness = None
        self._freshness = ensure(self)

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

    @_heals
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
        conn = self.fresh_reader()
        try:
            resolver = self.resolver()
            asker = self.asker(conn, resolver, session_id, cwd)
            base = {"success": True, "mode": mode, "query": text, "project": asker.identity.as_dict()}
            if asker.identity.is_home and not everywhere:
                return {**base, "results": [], "message": asker.home_message, "sessions_in_scope": 0,
                        **self._idle_semantic_state().as_dict()}
            scope = compute_scope(conn, resolver, asker.identity, session_id, everywhere=everywhere,
                                  branch=filters.branch)
            if not scope.session_ids:
                return {**base, "results": [], "message": NO_OTHER_SESSIONS,
                        "sessions_in_scope": scope.sessions_in_scope, **self._idle_semantic_state().as_dict()}
            plan = plan_query(text)
            keyword = keyword_hits(conn, plan, scope.session_ids, filters) if mode != "semantic" else []
            rank_keyword(keyword)
            state = self.semantic_state(conn, scope, asker.identity, act=mode != "keyword")
            semantic: list[Hit] = []
            if mode != "keyword" and state.provider is not None:
                try:
                    semantic = semantic_hits(conn, str(self.index.path), state.provider, text, scope.session_ids,
                                             filters, self.settings.embedding.top_k)
                except ProviderError as exc:
                    state = SemanticState("unavailable", error=exc.message)
            if mode == "keyword":
                hits = keyword
            elif mode == "semantic":
                # No vectors yet in scope (partial, indexing, unavailable): the keyword
                # results stand in, and semantic_status says why.
                hits = semantic or keyword_hits(conn, plan, scope.session_ids, filters)
                if semantic:
                    for hit in hits:
                        hit.score = hit.semantic_score
                else:
                    rank_keyword(hits)
            else:
                hits = fuse(keyword, semantic)
            grouped = group_by_session(hits, plan if mode != "semantic" else None, limit)
            grouped = pin_exact_identifier(grouped, keyword, plan, limit) if mode == "hybrid" else grouped
            results = [self._result(conn, g.best, plan, scope, everywhere) for g in grouped]
            response = {**base, "results": results, "sessions_in_scope": scope.sessions_in_scope,
                        **state.as_dict()}
            if state.status == "consent_required" and mode != "keyword":
                response["semantic_message"] = CONSENT_MESSAGE.format(endpoint=self.settings.embedding.endpoint)
            if not results:
                response["message"] = "No matching messages in this project"
            return response
        finally:
            conn.close()

    # -- semantic -----------------------------------------------------------------

    def _configured_state(self, project_key: str | None) -> SemanticState | None:
        """``disabled``, ``unavailable`` (a config we cannot use) or ``consent_required``, decided
        from config and consent alone; None when a provider may be built. With no project, only the
        service is checked (what status and answers that search nothing report)."""
        emb = self.settings.embedding
        if not emb.enabled:
            return SemanticState("disabled")
        if self.settings.embedding_error:
            return SemanticState("unavailable", error=self.settings.embedding_error)
        if not needs_consent(emb.provider):
            return None
        consent = load_consent(self.home.data_dir)
        allowed = consent_matches_service(consent, provider=emb.provider, endpoint=emb.endpoint, model=emb.model) \
            if project_key is None else consent_covers(consent, provider=emb.provider, endpoint=emb.endpoint,
                                                       model=emb.model, project_key=project_key,
                                                       profile=self.home.profile)
        return None if allowed else SemanticState("consent_required")

    def _idle_semantic_state(self) -> SemanticState:
        """The status without touching a provider: for answers that search nothing."""
        return self._configured_state(None) or SemanticState("ready")

    def semantic_state(self, conn: sqlite3.Connection, scope: Scope, identity: Identity, *,
                       act: bool = True) -> SemanticState:
        """Which of the six ``semantic_status`` values holds for this scope, with a provider when usable.

        A remote provider is never built, let alone called, without a consent record
        covering this provider, endpoint, model and project. When ``act`` (a search that
        uses vectors), a small backlog in scope is embedded on the spot and a larger one
        goes to the background worker; a keyword search only reports.
        """
        configured = self._configured_state(identity.scope_key)
        if configured is not None:
            return configured
        try:
            provider = self.provider()
            pending = pending_in_scope(conn, provider.fingerprint, scope.session_ids)
            if act and 0 < pending <= SYNC_EMBED_BUDGET:
                self.embedder(provider).embed(session_ids=scope.session_ids)
                pending = pending_in_scope(conn, provider.fingerprint, scope.session_ids)
        except ProviderError as exc:
            if exc.code == CONSENT_REQUIRED:
                return SemanticState("consent_required")
            return SemanticState("unavailable", error=exc.message)
        except RecallError as exc:  # the writer lock is busy: embed later
            pending = pending_in_scope(conn, provider.fingerprint, scope.session_ids)
            if exc.code != "index_busy":
                raise
        if not pending:
            return SemanticState("ready", provider=provider)
        error = last_background_error(self.index)
        if error:
            return SemanticState("unavailable", pending=pending, error=error, provider=provider)
        if act and self.background_embedding:
            start_background(self.embedder(provider))
        status = "indexing" if background_running(self.index) else "partial"
        return SemanticState(status, pending=pending, provider=provider)

    def provider(self) -> EmbeddingProvider:
        env = {k: v for k, v in [("PROJECT_HISTORY_EMBEDDING_API_KEY",
                                  self.home.env_value("PROJECT_HISTORY_EMBEDDING_API_KEY"))] if v}
        return provider_for(self.settings.embedding, self.home.data_dir, env=env)

    def embedder(self, provider: EmbeddingProvider) -> Embedder:
        emb = self.settings.embedding
        return Embedder(self.index, provider, emb.chunk_size, emb.chunk_overlap,
                        allowed_sessions=self._consented_sessions() if provider.remote else None)

    def _consented_sessions(self) -> list[str]:
        """The sessions whose projects the consent record covers: nothing else may leave."""
        consent = load_consent(self.home.data_dir)
        conn = self.index.connect_readonly()
        if consent is None or conn is None:
            return []
        try:
            return [sid for sid, (identity, _) in session_identities(conn, self.resolver()).items()
                    if not identity.is_home and consent.covers_project(identity.scope_key)]
        finally:
            conn.close()

    def embed(self, progress: Progress | None = None) -> dict:
        """Embed everything pending now, in the foreground (``phr index``). Honours consent."""
        configured = self._configured_state(None)
        if configured is not None:
            return {**configured.as_dict(), "embedded": 0}
        started = time.perf_counter()
        try:
            embedded = self.embedder(self.provider()).embed(progress=progress)
        except ProviderError as exc:
            return {"semantic_status": "unavailable", "semantic_error": exc.message, "embedded": 0}
        except RecallError as exc:
            if exc.code != "index_busy":
                raise
            # Another process held the writer lock too long: what is stored stays, the rest waits.
            return {"semantic_status": "partial", "semantic_error": exc.message, "embedded": 0}
        return {"semantic_status": "ready", "embedded": embedded,
                "embed_seconds": round(time.perf_counter() - started, 3)}

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
        if self.settings.chain_block:
            chain = chain_summary(conn, hit.session_id, hit.message_id,
                                  scope_session_ids=None if everywhere else scope.session_ids)
            if chain:
                result["chain"] = chain
        return result

    # -- moving -------------------------------------------------------------------

    def move_session(self, session_id: str | None, project_id: object) -> dict:
        exists = False
        if session_id and self.source.exists():
            with self.source.read() as reader:
                exists = session_id in reader.sessions([session_id])
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

    def status(self, *, session_id: str | None = None, cwd: str | None = None, branch: object = None) -> dict:
        """What the index holds, how fresh it is, any index job, semantic search, and
        the asker's project. Answers with no index at all, and never creates a file:
        no refresh, no job, no directory."""
        from . import __version__, browse, jobs

        branch = _optional_text(branch, "branch")
        info: dict = {
            "success": True,
            "version": __version__,
            "hermes_home": str(self.home.root),
            "state_db": str(self.home.state_db),
            "state_db_exists": self.source.exists(),
            "index_path": str(self.index.path),
            "index_exists": self.index.exists(),
        }
        store = jobs.JobStore(self.home.data_dir)
        active = store.active()
        latest = store.latest()
        job = active or (store.mark_dead(latest, save=False) if latest is not None else None)
        info["index_status"] = ("building" if active else "none") if not info["index_exists"] else (
            "updating" if active else "ready")
        if job is not None:
            info["job"] = job.as_dict()
        if info["state_db_exists"]:
            try:
                info["state_db_sessions"], info["sessions_pending"] = jobs.pending_sessions(self)
            except RecallError as exc:
                info["state_db_error"] = exc.as_dict()
        last = jobs.last_refresh(self.home.data_dir)
        if last:
            info["last_refresh"] = last
            info["last_index_seconds"] = last.get("seconds")
        info["settings"] = {"auto_build": self.settings.auto_build, "auto_index": self.settings.auto_index,
                            "update_check": self.settings.update_check, "inject_results": self.settings.inject_results}
        conn = self.index.connect_readonly()
        try:
            resolver = self.resolver()
            asker = self.asker(conn, resolver, session_id, cwd) if conn is not None else \
                self._asker_without_index(resolver, session_id, cwd)
            info["project"] = asker.identity.as_dict()
            vectors = 0
            if conn is None:
                info["message"] = ("No index yet: it is being built." if active else
                                   "No index yet: it is built on first search, or with `phr index` / "
                                   "project_history_index.")
            else:
                facts = browse.index_facts(conn)
                vectors = facts.pop("vectors_indexed")
                info.update(facts)
                info["index_bytes"] = sum(p.stat().st_size for p in self.index.data_dir.glob("index.db*")
                                          if p.is_file())
                info["last_index_at"] = format_when(float(get_meta(conn, "last_index_at", "0") or 0))
                if not asker.identity.is_home:
                    scope = compute_scope(conn, resolver, asker.identity, None, branch=branch)
                    info["sessions_in_project"] = scope.sessions_in_scope
            emb = self.settings.embedding
            info.update(self._idle_semantic_state().as_dict())
            info["semantic"] = {"enabled": emb.enabled, "provider": emb.provider, "model": emb.model,
                                "vectors_indexed": vectors}
            info["consent"] = {"required": needs_consent(emb.provider),
                               "given": load_consent(self.home.data_dir) is not None,
                               "path": str(consent_path(self.home.data_dir))}
            # What has left the machine, as counts (never content): requests, texts, characters.
            info["sent"] = load_sent(self.home.data_dir).total.as_dict()
        finally:
            if conn is not None:
                conn.close()
        return info


    # -- browsing and freshness (issue 4) --------------------------------------------

    @property
    def last_freshness(self) -> Freshness | None:
        """How fresh the index was for the last read (None before the first)."""
        return self.__dict__.get("_freshness")

    def _asker_without_index(self, resolver: Resolver, session_id: str | None, cwd: str | None) -> Asker:
        """The asker when there is no index to look the session up in: Hermes's row, else ``cwd``."""
        root = branch = None
        if session_id and self.source.exists():
            try:
                with self.source.read() as reader:
                    row = reader.sessions([session_id]).get(session_id)
            except RecallError:
                row = None
            if row is not None:
                cwd, root, branch = row.cwd, row.git_repo_root, row.git_branch
        if cwd is None and not session_id:
            cwd = os.getcwd()
        if cwd and root is None:
            root, branch = self.probe(cwd)
        identity = resolver.resolve(cwd, root) if cwd or root else HOME
        return Asker(session_id, cwd, root, branch, identity)

    def fresh_reader(self) -> sqlite3.Connection:
        """A reader over an index brought up to date first (``no_index`` when there is none)."""
        self.ensure_fresh()
        conn = self.index.connect_readonly()
        if conn is None:
            raise RecallError("the index is not built yet", "no_index")
        return conn

    @_heals
    def session(self, target: object, *, around_message_id: object = None, window: object = None,
                session_id: str | None = None, cwd: str | None = None, branch: object = None) -> dict:
        """One session by id, ``@session:`` link or unique prefix. ``branch`` is
        accepted like everywhere; an explicit id opens its session whatever the branch."""
        from . import browse

        text = _require_text(target, "session_id")
        _optional_text(branch, "branch")
        anchor = None
        if around_message_id is not None and around_message_id != "":
            anchor = _clamped_int(around_message_id, "around_message_id", 0, 0, 2**62)
        size = _clamped_int(window, "window", browse.WINDOW_DEFAULT, 1, browse.WINDOW_MAX)

        def source_messages(sid: str) -> list:
            with self.source.read() as reader:
                return reader.messages(sid)

        conn = self.fresh_reader()
        try:
            payload = browse.open_session(conn, self.resolver(), text, around_message_id=anchor, window=size,
                                          source_messages=source_messages if self.source.exists() else None)
            if session_id and payload["session"]["session_id"] == session_id:
                payload["session"]["current"] = True
            return payload
        finally:
            conn.close()

    @_heals
    def timeline(self, *, session_id: str | None = None, cwd: str | None = None, scope: object = "project",
                 after: object = None, before: object = None, branch: object = None, limit: object = None) -> dict:
        from . import browse

        everywhere = _choice(scope, ("project", "all"), "scope", "project") == "all"
        after_at, before_at = parse_when(after, name="after"), parse_when(before, name="before")
        branch_name = _optional_text(branch, "branch")
        count = _clamped_int(limit, "limit", browse.TIMELINE_DEFAULT, 1, browse.TIMELINE_MAX)
        conn = self.fresh_reader()
        try:
            resolver = self.resolver()
            asker = self.asker(conn, resolver, session_id, cwd)
            if asker.identity.is_home and not everywhere:
                message = asker.home_message
                return {"success": True, "operation": "timeline", "scope": "project",
                        "project": asker.identity.as_dict(), "sessions": [], "total": 0, "shown": 0,
                        "message": message.replace("to search", "to list") + "; use scope 'all' for every project"}
            return browse.timeline(conn, resolver, asker.identity, session_id, everywhere=everywhere,
                                   after=after_at, before=before_at, branch=branch_name, limit=count)
        finally:
            conn.close()

    @_heals
    def projects(self, *, session_id: str | None = None, cwd: str | None = None, branch: object = None) -> dict:
        from . import browse

        branch_name = _optional_text(branch, "branch")
        conn = self.fresh_reader()
        try:
            explicit = self.home.load_projects()
            resolver = Resolver(explicit, self.home.environment())
            asker = self.asker(conn, resolver, session_id, cwd)
            return browse.projects(conn, resolver, explicit, asker.identity, branch=branch_name)
        finally:
            conn.close()

    def request_index(self, *, force: object = False, reason: str = "tool", budget: float | None = None) -> dict:
        """Build or refresh now (the index tool, ``/recall index``): see :func:`.jobs.request_index`."""
        from . import jobs

        if not isinstance(force, bool):
            force = str(force).strip().lower() in ("1", "true", "yes", "on")
        return jobs.request_index(self, force=force, reason=reason, budget=budget)


    @_heals
    def code_history(self, path: object, *, session_id: str | None = None, cwd: str | None = None,
                     symbol: object = None, query: object = None, branch: object = None,
                     limit: object = None) -> dict:
        """How a file's code evolved across this project's sessions (the edit chain)."""
        return code_history_for(self, session_id, path, cwd=cwd, symbol=symbol, query=query, branch=branch,
                                limit=limit)


    def consent(self, *, session_id: str | None = None, cwd: str | None = None, everywhere: bool = False,
                revoke: bool = False) -> dict:
        """Record the user's consent to send this project's history (or every project's) to the
        configured remote embedding provider; widening keeps the projects already consented."""
        from .consent import consent_matches_service, record_consent, revoke_consent

        if revoke:
            return {"success": True, "revoked": revoke_consent(self.home.data_dir)}
        emb = self.settings.embedding
        if not needs_consent(emb.provider):
            return {"success": True, "consent_needed": False,
                    "message": "the local embedding model sends nothing anywhere: no consent is needed"}
        self.ensure_fresh()
        conn = self.index.connect_readonly()
        if conn is None:
            raise RecallError("the index is not built yet", "no_index")
        try:
            identity = self.asker(conn, self.resolver(), session_id, cwd).identity
        finally:
            conn.close()
        if identity.is_home and not everywhere:
            raise RecallError("this session is in no project: consent for every project with 'all'", "no_project")
        previous = load_consent(self.home.data_dir)
        projects = {"*"} if everywhere else {identity.scope_key}
        if previous is not None and consent_matches_service(previous, provider=emb.provider, endpoint=emb.endpoint,
                                                            model=emb.model):
            projects |= set(previous.projects)
        record = record_consent(self.home.data_dir, profile=self.home.profile, projects=sorted(projects),
                                provider=emb.provider, endpoint=emb.endpoint, model=emb.model)
        return {"success": True, "consent": record.as_dict(),
                "message": f"history of {'every project' if '*' in projects else identity.name or identity.key} "
                           f"may now be sent to {emb.endpoint} ({emb.model}), secrets redacted"}


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
