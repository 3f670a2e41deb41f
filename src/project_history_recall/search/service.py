"""One search, from a question to the results a face shows.

Keyword (FTS5) and semantic (vectors) hits within the asker's scope, grouped to one
result per session (for ``hybrid`` by keyword-gated fusion of the session scores), each shown with its best message,
a snippet, when it was said and an ``@session:`` link. The caller hands in the
reader, the resolver and the asker; which semantic status holds is the
:class:`~project_history_recall.services.semantic.SemanticService`'s to say.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from project_history_recall.attribution import Resolver
from project_history_recall.embeddings.base import ProviderError
from project_history_recall.search.keyword import (
    HYBRID_SEMANTIC_K,
    Hit,
    group_by_session,
    hybrid_sessions,
    keyword_hits,
    rank_keyword,
)
from project_history_recall.search.scope import Filters, Scope, compute_scope
from project_history_recall.search.semantic import semantic_hits
from project_history_recall.search.snippets import make_snippet
from project_history_recall.services.code_history import chain_summary
from project_history_recall.services.semantic import SemanticService, SemanticState
from project_history_recall.services.workspace import Asker
from project_history_recall.sources import agent_of
from project_history_recall.tokenizer import QueryPlan, plan_query
from project_history_recall.when import format_when

MODES = ("hybrid", "keyword", "semantic")
NO_OTHER_SESSIONS = "No other sessions in this project"
CONSENT_MESSAGE = ("Semantic search is configured to send this project's history to {endpoint}, which needs "
                   "the user's consent first (nothing has been sent). Ask the user; if they agree, they run "
                   "`/recall consent` (this project) or `/recall consent all`. Keyword results are below.")

KEYWORD_STAND_IN = "No semantic matches (semantic search is {status}): these are keyword results."


@dataclass(frozen=True)
class Question:
    text: str
    mode: str
    limit: int
    filters: Filters
    everywhere: bool


def search(conn: sqlite3.Connection, resolver: Resolver, asker: Asker, question: Question,
           semantic: SemanticService, *, chain_block: bool = False) -> dict:
    settings = semantic.workspace.settings
    mode = question.mode
    base = {"success": True, "mode": mode, "query": question.text, "project": asker.identity.as_dict()}
    if asker.identity.is_home and not question.everywhere:
        return {**base, "results": [], "message": asker.home_message, "sessions_in_scope": 0,
                **semantic.idle_state().as_dict()}
    scope = compute_scope(conn, resolver, asker.identity, asker.session_id, everywhere=question.everywhere,
                          branch=question.filters.branch)
    branch_warning = scope.branch_warning(question.filters.branch)
    if branch_warning:
        base["warning"] = branch_warning
    if not scope.session_ids:
        return {**base, "results": [], "message": NO_OTHER_SESSIONS,
                "sessions_in_scope": scope.sessions_in_scope, **semantic.idle_state().as_dict()}
    plan = plan_query(question.text)
    filters = question.filters
    keyword = keyword_hits(conn, plan, scope.session_ids, filters) if mode != "semantic" else []
    rank_keyword(keyword)
    state = semantic.state(conn, scope, asker.identity.scope_key, act=mode != "keyword")
    vector_hits: list[Hit] = []
    if mode != "keyword" and state.provider is not None:
        top_k = max(settings.embedding.top_k, HYBRID_SEMANTIC_K) if mode == "hybrid" else settings.embedding.top_k
        try:
            vector_hits = semantic_hits(conn, str(semantic.workspace.index.path), state.provider, question.text,
                                        scope.session_ids, filters, top_k)
        except ProviderError as exc:
            state = SemanticState("unavailable", error=exc.message)
    if mode == "hybrid":
        grouped = hybrid_sessions(keyword, vector_hits, plan, question.limit)
    elif mode == "keyword":
        grouped = group_by_session(keyword, plan, question.limit)
    else:  # semantic. No vectors yet in scope (partial, indexing, unavailable): the keyword
        # results stand in, and semantic_status says why.
        hits = vector_hits or keyword_hits(conn, plan, scope.session_ids, filters)
        if vector_hits:
            for hit in hits:
                hit.score = hit.semantic_score
        else:
            rank_keyword(hits)
        grouped = group_by_session(hits, None, question.limit)
    results = [_result(conn, g.best, plan, scope, question.everywhere, chain_block) for g in grouped]
    response = {**base, "results": results, "sessions_in_scope": scope.sessions_in_scope, **state.as_dict()}
    if state.status == "consent_required" and mode != "keyword":
        response["semantic_message"] = CONSENT_MESSAGE.format(endpoint=settings.embedding.endpoint)
    elif mode == "semantic" and not vector_hits and results:
        response["semantic_message"] = KEYWORD_STAND_IN.format(status=state.status)
    if not results:
        response["message"] = "No matching messages in this project"
    return response


def _result(conn: sqlite3.Connection, hit: Hit, plan: QueryPlan, scope: Scope, everywhere: bool,
            chain_block: bool) -> dict:
    row = conn.execute("SELECT title, started_at, source FROM sessions WHERE id = ?", (hit.session_id,)).fetchone()
    result = {
        "session_id": hit.session_id,
        "link": f"@session:{hit.session_id}",
        "source": agent_of(row["source"] if row else None),
        "title": row["title"] if row else None,
        "message_id": hit.message_id,
        "kind": hit.kind,
        "snippet": make_snippet(hit.text, plan),
        "score_source": hit.score_source,
        "when": format_when(hit.timestamp or (row["started_at"] if row else None)),
    }
    if everywhere:
        result["project"] = scope.identities[hit.session_id].as_dict()
    if chain_block:
        chain = chain_summary(conn, hit.session_id, hit.message_id,
                              scope_session_ids=None if everywhere else scope.session_ids)
        if chain:
            result["chain"] = chain
    return result
