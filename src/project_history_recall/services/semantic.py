"""Semantic search as a policy: which provider, whether it may be used, what it may see.

This is the one place that decides ``semantic_status`` (``ready``, ``partial``,
``indexing``, ``disabled``, ``consent_required``, ``unavailable``). A remote
provider is never built, let alone called, without the user's consent record
covering its provider, endpoint and model — and it is handed only the sessions of
projects that record covers. The providers themselves
(:mod:`project_history_recall.embeddings`) know nothing of consent, and the vector
store (:mod:`project_history_recall.index.vectors`) writes what it is given.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from typing import Any

from project_history_recall.embeddings import make_provider
from project_history_recall.embeddings.base import CONSENT_REQUIRED, EmbeddingProvider, ProviderError, parse_settings
from project_history_recall.embeddings.openai import API_KEY_ENV
from project_history_recall.errors import RecallError
from project_history_recall.index.indexer import Progress
from project_history_recall.index.store import SCOPE_GENERATION, get_meta
from project_history_recall.index.vectors import (
    Embedder,
    Permit,
    background_running,
    last_background_error,
    pending_in_scope,
    pending_sessions,
    start_background,
)
from project_history_recall.search.scope import Scope, session_identities
from project_history_recall.services.consent import (
    Consent,
    consent_covers,
    consent_matches_service,
    load_consent,
    needs_consent,
    record_sent,
)
from project_history_recall.services.workspace import Workspace

#: In-scope messages a search may embed on the spot before answering (a small
#: project is then fully semantic on first use); more go to the background.
SYNC_EMBED_BUDGET = 48

_local_providers: dict[str, EmbeddingProvider] = {}
_local_providers_lock = threading.Lock()


@dataclass
class SemanticState:
    """What ``semantic_status`` reports, and why."""

    status: str
    pending: int = 0
    error: str | None = None
    provider: EmbeddingProvider | None = None

    def as_dict(self) -> dict:
        out: dict[str, Any] = {"semantic_status": self.status}
        if self.pending:
            out["semantic_pending"] = self.pending
        if self.error:
            out["semantic_error"] = self.error
        return out


def provider_for(settings: Any, data_dir: Any, env: dict[str, str] | None = None) -> EmbeddingProvider:
    """The configured provider. A local model loads once per process; a remote provider is
    built anew each time, and only when the consent record in ``data_dir`` matches its
    provider, endpoint and model (else ``ProviderError(consent_required)``); every request
    it sends is counted in the usage file (counts, never content), and refused once that
    consent is gone."""
    parsed = parse_settings(settings)
    if parsed.provider == "local":
        key = json.dumps([parsed.provider, parsed.model, parsed.endpoint], sort_keys=True)
        with _local_providers_lock:
            provider = _local_providers.get(key)
            if provider is None:
                provider = _local_providers[key] = make_provider(parsed)
            return provider
    def require_consent() -> None:
        consent = load_consent(data_dir) if data_dir is not None else None
        if not consent_matches_service(consent, provider=parsed.provider, endpoint=parsed.endpoint,
                                       model=parsed.model):
            raise ProviderError(f"sending history to {parsed.endpoint} ({parsed.model}) needs the user's consent "
                                "first", CONSENT_REQUIRED)

    require_consent()

    def on_sent(texts: int, chars: int) -> None:
        # Asked again before every request: a consent revoked while a backlog is sent stops it here.
        require_consent()
        record_sent(data_dir, provider=parsed.provider, endpoint=parsed.endpoint, model=parsed.model,
                    requests=1, texts=texts, chars=chars)

    return make_provider(parsed, env=env, on_sent=on_sent if data_dir is not None else None)


class SemanticService:
    """Semantic search for one workspace. ``background``: a large embedding backlog is worked
    off by a background thread (inside Hermes); one-shot processes leave it to ``phr index``."""

    def __init__(self, workspace: Workspace, *, background: bool = False) -> None:
        self.workspace = workspace
        self.background = background
        self._permit_cache: tuple[tuple, Permit] | None = None

    def configured_state(self, project_key: str | None) -> SemanticState | None:
        """``disabled``, ``unavailable`` (a config we cannot use) or ``consent_required``, decided
        from config and consent alone; None when a provider may be built. With no project, only the
        service is checked (what status and answers that search nothing report)."""
        settings, home = self.workspace.settings, self.workspace.home
        emb = settings.embedding
        if not emb.enabled:
            return SemanticState("disabled")
        if settings.embedding_error:
            return SemanticState("unavailable", error=settings.embedding_error)
        if not needs_consent(emb.provider):
            return None
        consent = load_consent(home.data_dir)
        allowed = consent_matches_service(consent, provider=emb.provider, endpoint=emb.endpoint, model=emb.model) \
            if project_key is None else consent_covers(consent, provider=emb.provider, endpoint=emb.endpoint,
                                                       model=emb.model, project_key=project_key,
                                                       profile=home.profile)
        return None if allowed else SemanticState("consent_required")

    def idle_state(self) -> SemanticState:
        """The status without touching a provider: for answers that search nothing."""
        return self.configured_state(None) or SemanticState("ready")

    def state(self, conn: sqlite3.Connection, scope: Scope, project_key: str | None, *,
              act: bool = True) -> SemanticState:
        """Which ``semantic_status`` holds for this scope, with a provider when usable. When
        ``act`` (a search that uses vectors), a small backlog in scope is embedded on the spot
        and a larger one goes to the background worker; a keyword search only reports."""
        configured = self.configured_state(project_key)
        if configured is not None:
            return configured
        index = self.workspace.index
        try:
            provider = self.provider()
            since = self._since() if provider.remote else None
            backlog = pending_sessions(conn, provider.fingerprint, scope.session_ids, since)
            pending = sum(backlog.values())
            if act and 0 < pending <= SYNC_EMBED_BUDGET:
                # Only the sessions with a backlog: looking for it over the whole scope cost 80 ms at M.
                self.embedder(provider).embed(session_ids=sorted(backlog))
                pending = pending_in_scope(conn, provider.fingerprint, scope.session_ids, since)
        except ProviderError as exc:
            if exc.code == CONSENT_REQUIRED:
                return SemanticState("consent_required")
            return SemanticState("unavailable", error=exc.message)
        except RecallError as exc:  # the writer lock is busy: embed later
            pending = pending_in_scope(conn, provider.fingerprint, scope.session_ids, since)
            if exc.code != "index_busy":
                raise
        if not pending:
            return SemanticState("ready", provider=provider)
        error = last_background_error(index)
        if error:
            return SemanticState("unavailable", pending=pending, error=error, provider=provider)
        if act and self.background:
            start_background(self.embedder(provider))
        status = "indexing" if background_running(index) else "partial"
        return SemanticState(status, pending=pending, provider=provider)

    def reported_state(self, conn: sqlite3.Connection, scope: Scope, project_key: str | None) -> SemanticState:
        """What a search of ``scope`` would report, for ``status``: it embeds nothing, and a
        remote service is not asked anything (not even its dimension), so it counts nothing."""
        configured = self.configured_state(project_key)
        if configured is not None:
            return configured
        if needs_consent(self.workspace.settings.embedding.provider):
            return SemanticState("ready")
        return self.state(conn, scope, project_key, act=False)

    def provider(self) -> EmbeddingProvider:
        home = self.workspace.home
        env = {k: v for k, v in [(API_KEY_ENV, home.env_value(API_KEY_ENV))] if v}
        return provider_for(self.workspace.settings.embedding, home.data_dir, env=env)

    def embedder(self, provider: EmbeddingProvider) -> Embedder:
        emb = self.workspace.settings.embedding
        return Embedder(self.workspace.index, provider, emb.chunk_size, emb.chunk_overlap,
                        permit=self._permit if provider.remote else None)

    def _consent(self) -> Consent | None:
        """The consent record, when it still names this service in this profile."""
        emb, home = self.workspace.settings.embedding, self.workspace.home
        consent = load_consent(home.data_dir)
        if consent is None or consent.profile != home.profile or not consent_matches_service(
                consent, provider=emb.provider, endpoint=emb.endpoint, model=emb.model):
            return None
        return consent

    def _since(self) -> float | None:
        consent = self._consent()
        return consent.history_since if consent is not None else None

    def _permit(self) -> Permit | None:
        """What a remote provider may be sent now, read afresh before every batch: nothing once
        the consent is revoked or changed; only its projects' sessions; with an incremental
        consent, only messages written since it was given."""
        consent = self._consent()
        conn = self.workspace.index.connect_readonly() if consent is not None else None
        if consent is None or conn is None:
            return None
        try:
            # The covered sessions are worked out again only when the consent or the index changed.
            resolver = self.workspace.resolver()
            key = (consent, resolver.key, get_meta(conn, SCOPE_GENERATION))
            if self._permit_cache is None or self._permit_cache[0] != key:
                sessions = frozenset(sid for sid, (identity, _) in session_identities(conn, resolver).items()
                                     if not identity.is_home and consent.covers_project(identity.scope_key))
                self._permit_cache = (key, Permit(sessions, consent.history_since))
            return self._permit_cache[1]
        finally:
            conn.close()

    def embed(self, progress: Progress | None = None) -> dict:
        """Embed everything pending now, in the foreground (``phr index``). Honours consent."""
        configured = self.configured_state(None)
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
