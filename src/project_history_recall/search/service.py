"""One search, from a question to the results a face shows.

Keyword (FTS5) and semantic (vectors) hits within the asker's scope, grouped to one
result per session (for ``hybrid`` by keyword-gated fusion of the session scores), each shown with its best message,
a snippet, when it was said and an ``@session:`` link. The caller hands in the
reader, the resolver and the asker; which semantic status holds is the
:class:`~project_history_recall.services.semantic.SemanticService`'s to say.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from dataclasses import dataclass

from project_history_recall.attribution import Resolver
from project_history_recall.embeddings.base import ProviderError
from project_history_recall.index.entries import SPOKEN_KINDS
from project_history_recall.search.confidence import Assessment, Model, Signals, assess, model_for, nothing_confident
from project_history_recall.search.keyword import (
    HYBRID_SEMANTIC_K,
    Elsewhere,
    Hit,
    KeywordSessions,
    SessionResult,
    elsewhere,
    group_by_session,
    hybrid_sessions,
    keyword_hits,
    keyword_sessions,
    rank_keyword,
    result_signals,
    with_shown_messages,
)
from project_history_recall.search.message_choice import SEMANTIC_ALONE
from project_history_recall.search.scope import Filters, Scope, compute_scope
from project_history_recall.search.semantic import semantic_hits
from project_history_recall.search.snippets import is_question, make_snippet
from project_history_recall.search.temporal import WINDOW_POOL, prefer_window, vouch
from project_history_recall.services.code_history import chain_summary
from project_history_recall.services.semantic import SemanticService, SemanticState
from project_history_recall.services.workspace import Asker
from project_history_recall.sources import agent_of
from project_history_recall.tokenizer import QueryPlan, plan_query
from project_history_recall.when import Window, format_when, query_window

MODES = ("hybrid", "keyword", "semantic")
NO_OTHER_SESSIONS = "No other sessions in this project"
CONSENT_MESSAGE = ("Semantic search is configured to send this project's history to {endpoint}, which needs "
                   "the user's consent first (nothing has been sent). Ask the user; if they agree, they run "
                   "`/recall consent` (this project) or `/recall consent all`. Keyword results are below.")

NO_CONFIDENT = "no confident match in this project"
NO_CONFIDENT_EVERYWHERE = "no confident match in any project"
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
    ranked = _rank(conn, scope, asker, question, semantic)
    state = ranked.state
    results = [_result(conn, g, ranked.plan, scope, question.everywhere, chain_block) | {
        "confidence": a.level, "confidence_score": a.score} for g, a in zip(ranked.results, ranked.assessments,
                                                                            strict=True)]
    response = {**base, "results": results, "sessions_in_scope": scope.sessions_in_scope, **state.as_dict()}
    if state.status == "consent_required" and mode != "keyword":
        response["semantic_message"] = CONSENT_MESSAGE.format(endpoint=settings.embedding.endpoint)
    elif mode == "semantic" and not ranked.vector_hits and results:
        response["semantic_message"] = KEYWORD_STAND_IN.format(status=state.status)
    if not results:
        response["message"] = "No matching messages in this project"
    elif nothing_confident(ranked.assessments):
        response["message"] = NO_CONFIDENT_EVERYWHERE if question.everywhere else NO_CONFIDENT
    return response


@dataclass
class Ranked:
    """One question's ranked sessions, each with its signals and confidence, and what ran."""

    plan: QueryPlan
    state: SemanticState
    keyword: list[Hit]
    vector_hits: list[Hit]
    results: list[SessionResult]
    signals: list[Signals]
    model: Model
    assessments: list[Assessment]
    #: the time the question names (its results said inside it are never ``low``)
    window: Window | None


def _rank(conn: sqlite3.Connection, scope: Scope, asker: Asker, question: Question,
          semantic: SemanticService) -> Ranked:
    settings = semantic.workspace.settings
    mode = question.mode
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
    window = query_window(question.text, lambda: _asked_at(conn, asker.session_id))
    pool = max(question.limit, WINDOW_POOL) if window else question.limit
    if mode == "semantic" and not vector_hits:  # no vectors yet in scope (partial, indexing,
        # unavailable): the keyword results stand in, and semantic_status says why.
        keyword = keyword_hits(conn, plan, scope.session_ids, filters)
        rank_keyword(keyword)
    sessions = keyword_sessions(keyword, plan)
    if mode == "hybrid":
        grouped = hybrid_sessions(sessions, vector_hits, pool)
    elif vector_hits:
        for hit in vector_hits:
            hit.score = hit.semantic_score
        ranked = [(r.session_id, r.score) for r in group_by_session(vector_hits, None, pool)]
        grouped = with_shown_messages(ranked, sessions, vector_hits, SEMANTIC_ALONE)
    else:  # keyword mode, and the keyword results standing in for semantic ones
        grouped = with_shown_messages([(r.session_id, r.score) for r in sessions.results[:pool]], sessions, [])
    grouped = prefer_window(grouped, window, question.limit)
    keyword_ran = mode != "semantic" or not vector_hits
    outside = Elsewhere()
    if keyword_ran and grouped:  # also when keyword found nothing in scope: its words may be another project's
        outside = elsewhere(conn, plan, scope.session_ids, sessions.reachable())
    signals = result_signals(grouped, sessions, vector_hits, plan, outside)
    signals = _with_agreement(signals, grouped, sessions, vector_hits)
    model = model_for(keyword_ran=keyword_ran, semantic_ran=bool(vector_hits))
    assessments = vouch([assess(model, s) for s in signals], grouped, window)
    return Ranked(plan, state, keyword, vector_hits, grouped, signals, model, assessments, window)


def _with_agreement(signals: list[Signals], results: list[SessionResult], sessions: KeywordSessions,
                    vector_hits: list[Hit]) -> list[Signals]:
    """``signals`` with ``agree`` (:class:`~.confidence.Signals`): the result is keyword's best
    session and holds the best semantic message."""
    leader = sessions.results[0].session_id if sessions.results else None
    nearest = max(vector_hits, key=lambda h: (h.semantic_score, h.session_id)).session_id if vector_hits else None
    if leader is None or leader != nearest:
        return signals
    return [dataclasses.replace(s, agree=1.0) if r.session_id == leader else s
            for s, r in zip(signals, results, strict=True)]


def _asked_at(conn: sqlite3.Connection, session_id: str | None) -> float | None:
    """When the question is asked: the asking session's last message (its start when it has
    none yet); None for an asker the index does not know."""
    if session_id is None:
        return None
    row = conn.execute("SELECT max(timestamp) FROM entries WHERE session_id = ?", (session_id,)).fetchone()
    if row and row[0]:
        return float(row[0])
    row = conn.execute("SELECT started_at FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return float(row[0]) if row and row[0] else None


def explain(conn: sqlite3.Connection, resolver: Resolver, asker: Asker, question: Question,
            semantic: SemanticService) -> Ranked | None:
    """The ranking behind :func:`search` with its signals (``bench.fit_confidence`` fits
    :mod:`.confidence` on them); None when the asker's scope holds no session."""
    scope = compute_scope(conn, resolver, asker.identity, asker.session_id, everywhere=question.everywhere,
                          branch=question.filters.branch)
    if not scope.session_ids:
        return None
    return _rank(conn, scope, asker, question, semantic)


#: How many conversational entries after a matched question its answer may come (a speaker
#: often sends two lines before the other replies).
REPLY_WINDOW = 3


def _reply(conn: sqlite3.Connection, hit: Hit, plan: QueryPlan) -> dict | None:
    """The answer to a shown question: the first of the next :data:`REPLY_WINDOW`
    user/assistant entries that comes from the other side, when the shown message asks."""
    if hit.kind not in SPOKEN_KINDS or not is_question(hit.text):
        return None
    rows = conn.execute(
        "SELECT e.message_id, e.kind, e.text, e.timestamp FROM entries e "
        "JOIN entries shown ON shown.id = ? AND e.session_id = shown.session_id AND e.position > shown.position "
        f"WHERE e.kind IN ({', '.join('?' * len(SPOKEN_KINDS))}) AND e.message_id IS NOT shown.message_id "
        "ORDER BY e.position LIMIT ?", (hit.entry_id, *SPOKEN_KINDS, REPLY_WINDOW)).fetchall()
    answer = next((r for r in rows if r["kind"] != hit.kind), None)
    if answer is None:
        return None
    return _shown(answer["message_id"], answer["kind"], answer["text"], answer["timestamp"], plan)


def _shown(message_id: int | None, kind: str, text: str, timestamp: float | None, plan: QueryPlan) -> dict:
    """A message shown beside a result's own (its ``reply``, its ``also``)."""
    return {"message_id": message_id, "kind": kind, "snippet": make_snippet(text, plan), "when": format_when(timestamp)}


def _result(conn: sqlite3.Connection, group: SessionResult, plan: QueryPlan, scope: Scope, everywhere: bool,
            chain_block: bool) -> dict:
    """A result: its session, the shown message, and ``also``, the next best message of
    the session that is neither the shown one nor its reply."""
    hit = group.best
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
    reply = _reply(conn, hit, plan)
    if reply:
        result["reply"] = reply
    also = next((h for h in group.runners_up if reply is None or h.message_id != reply["message_id"]), None)
    if also is not None:
        result["also"] = _shown(also.message_id, also.kind, also.text, also.timestamp, plan)
    if everywhere:
        result["project"] = scope.identities[hit.session_id].as_dict()
    if chain_block:
        chain = chain_summary(conn, hit.session_id, hit.message_id,
                              scope_session_ids=None if everywhere else scope.session_ids)
        if chain:
            result["chain"] = chain
    return result
