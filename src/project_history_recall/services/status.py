"""``status``: what the index holds, how fresh it is, any index job, semantic search,
consent, and the asker's project.

It answers with no index at all and never creates a file: no refresh, no job, no
directory — so it is the one read that is safe on a broken or read-only home.
"""

from __future__ import annotations

from project_history_recall import __version__
from project_history_recall.errors import RecallError
from project_history_recall.index.store import get_meta
from project_history_recall.search.scope import compute_scope
from project_history_recall.services import forgetting, jobs
from project_history_recall.services.browse import index_facts
from project_history_recall.services.consent import consent_path, load_consent, load_sent, needs_consent
from project_history_recall.services.semantic import SemanticService
from project_history_recall.services.workspace import Workspace
from project_history_recall.sources.transcripts import TranscriptSource
from project_history_recall.when import format_when


def _sources(workspace: Workspace) -> dict:
    """Per history that is on: where it is, whether it exists, what was read and skipped (counts)."""
    out: dict = {}
    for source in workspace.sources:
        if isinstance(source, TranscriptSource):
            out[source.name] = source.status()
        else:
            out[source.name] = {"state_db": str(workspace.home.state_db), "exists": source.exists()}
    return out


def status(semantic: SemanticService, *, session_id: str | None = None, cwd: str | None = None,
           branch: str | None = None) -> dict:
    workspace = semantic.workspace
    home, index, settings = workspace.home, workspace.index, workspace.settings
    info: dict = {
        "success": True,
        "version": __version__,
        "hermes_home": str(home.root),
        "state_db": str(home.state_db),
        "state_db_exists": workspace.hermes.exists(),
        "index_path": str(index.path),
        "index_exists": index.exists(),
    }
    store = jobs.JobStore(home.data_dir)
    active = store.active()
    latest = store.latest()
    job = active or (store.mark_dead(latest, save=False) if latest is not None else None)
    info["index_status"] = ("building" if active else "none") if not info["index_exists"] else (
        "updating" if active else "ready")
    if job is not None:
        info["job"] = job.as_dict()
    info["sources"] = _sources(workspace)
    if workspace.source.exists():
        try:
            info["state_db_sessions"], info["sessions_pending"] = jobs.pending_sessions(workspace)
        except RecallError as exc:
            info["state_db_error"] = exc.as_dict()
        try:  # counts only: never which sessions, nor what they say
            info["withheld"] = forgetting.summary(workspace)
        except RecallError as exc:
            info["withheld_error"] = exc.as_dict()
    last = jobs.last_refresh(home.data_dir)
    if last:
        info["last_refresh"] = last
        info["last_index_seconds"] = last.get("seconds")
    info["settings"] = {"auto_build": settings.auto_build, "auto_index": settings.auto_index,
                        "update_check": settings.update_check, "inject_results": settings.inject_results}
    conn = index.connect_readonly()
    try:
        resolver = workspace.resolver()
        asker = workspace.asker(conn, resolver, session_id, cwd, require_source=False)
        info["project"] = asker.identity.as_dict()
        vectors = 0
        semantic_state = semantic.idle_state()
        if conn is None:
            info["message"] = ("No index yet: it is being built." if active else
                               "No index yet: it is built on first search, or with `phr index` / "
                               "project_history_index.")
        else:
            facts = index_facts(conn)
            vectors = facts.pop("vectors_indexed")
            info.update(facts)
            info["index_bytes"] = sum(p.stat().st_size for p in index.data_dir.glob("index.db*") if p.is_file())
            info["last_index_at"] = format_when(float(get_meta(conn, "last_index_at", "0") or 0))
            in_project = not asker.identity.is_home
            scope = compute_scope(conn, resolver, asker.identity, None, everywhere=not in_project, branch=branch)
            if in_project:
                info["sessions_in_project"] = scope.sessions_in_scope
            # The same state a search here reports (Home: over every project).
            semantic_state = semantic.reported_state(conn, scope, asker.identity.scope_key if in_project else None)
        emb = settings.embedding
        info.update(semantic_state.as_dict())
        info["semantic"] = {"enabled": emb.enabled, "provider": emb.provider, "model": emb.model,
                            "vectors_indexed": vectors}
        consent = load_consent(home.data_dir)
        info["consent"] = {"required": needs_consent(emb.provider), "given": consent is not None,
                           "path": str(consent_path(home.data_dir))}
        if consent is not None:
            info["consent"].update(scope=consent.scope, meaning=consent.scope_meaning)
        # What has left the machine, as counts (never content): requests, texts, characters.
        info["sent"] = load_sent(home.data_dir).total.as_dict()
    finally:
        if conn is not None:
            conn.close()
    return info
