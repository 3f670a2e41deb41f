"""Keyword search over the index, and grouping hits into results.

FTS5 BM25 over the OR of the query's units, ranked in tiers: the rarest units
first, the common ones only when the rarer find nothing, within the scope the
caller computed (:mod:`project_history_recall.search.scope`), and grouped to one
result per session; for ``hybrid`` the keyword and semantic session scores are fused
with a keyword gate (:func:`hybrid_sessions`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import sqlite3
import statistics
import string
from collections import defaultdict
from dataclasses import dataclass, field

from project_history_recall.index.entries import SPOKEN_KINDS, searchable_text
from project_history_recall.index.store import ENTRY_SESSION_INDEX, is_damage
from project_history_recall.search.confidence import Signals
from project_history_recall.search.fusion import gated, keyword_margin, ranking
from project_history_recall.search.message_choice import (
    DENSE,
    LOOK_BACK,
    message_evidence,
    shown_messages,
    voice,
)
from project_history_recall.search.scope import Filters
from project_history_recall.tokenizer import JOINERS, QueryPlan, Unit, in_cjk_script, units_in_text

CANDIDATES = 300


#: Hybrid fusion (issue 14), chosen on the real sets' tune splits for the USE model
#: (bench/REAL_SETS.md, rule ``gated-cov(max, w=0.05, tau=0.02, cov=0.67, pin=2, k=100)``):
#: session scores normalised by their maximum, 5 % semantic; keyword's first two sessions stay
#: on top when its best session leads the second by 2 % or covers 67 % of the query's units.
HYBRID_DENSE_WEIGHT = 0.05
GATE_MARGIN = 0.02
GATE_COVERAGE = 0.67
GATE_PIN = 2
#: Below this share of the query's units covered by keyword's best session, semantic leads at
#: :data:`WEAK_DENSE_WEIGHT` (chosen on the tune splits of MADial-Bench zh, REALTALK and swe-small:
#: bench/REAL_SETS.md, "Weak keyword evidence").
WEAK_COVERAGE = 0.2
WEAK_DENSE_WEIGHT = 0.75
#: Semantic candidates (messages) that hybrid fuses, whatever ``embedding.top_k`` says.
HYBRID_SEMANTIC_K = 100
#: Messages kept behind a result's shown one, so that it can show the next best (``also``)
#: when the first of them is the reply it already shows.
RUNNERS_UP = 2


#: Only the sessions of the strongest hits compete on query coverage (re-tokenizing is the cost).
COVERAGE_HITS = 60


#: BM25 ranks every match of an OR before the scope filter can cut, so a query costs about
#: a microsecond per entry matching any of its units, most of it in common words ("error",
#: "tests") that add little to the order (their IDF is low). So the units are ranked in
#: tiers, rarest first, each tier's matches within this budget (a tier has at least one
#: unit); the first tier that finds anything in scope answers. Every unit still counts for
#: a session's coverage.
RANKING_BUDGET = 8_000


@dataclass
class Hit:
    entry_id: int
    session_id: str
    message_id: int | None
    kind: str
    text: str
    timestamp: float
    #: the message's place in its session (``entries.position``)
    position: int
    keyword_score: float = 0.0
    semantic_score: float = 0.0
    keyword_rank: int | None = None
    semantic_rank: int | None = None
    score: float = 0.0

    @property
    def score_source(self) -> str:
        if self.keyword_rank is not None and self.semantic_rank is not None:
            return "both"
        return "semantic" if self.semantic_rank is not None else "keyword"


@dataclass
class SessionResult:
    session_id: str
    best: Hit
    score: float
    hits: list[Hit]
    #: the session's next real messages (never a title) by the evidence that chose ``best``, best first
    runners_up: list[Hit] = field(default_factory=list)


def _filter_sql(filters: Filters) -> tuple[str, list[object]]:
    clauses: list[str] = []
    params: list[object] = []
    if filters.after is not None:
        clauses.append("e.timestamp >= ?")
        params.append(filters.after)
    if filters.before is not None:
        clauses.append("e.timestamp < ?")
        params.append(filters.before)
    if filters.kinds:
        clauses.append(f"e.kind IN ({','.join('?' * len(filters.kinds))})")
        params.extend(filters.kinds)
    return "".join(f" AND {c}" for c in clauses), params


def keyword_hits(conn: sqlite3.Connection, plan: QueryPlan, session_ids: list[str], filters: Filters,
                 limit: int = CANDIDATES) -> list[Hit]:
    """BM25-ranked entries in scope. FTS5 syntax can never reach the model: the plan
    quotes every token, and any FTS error falls back to a LIKE scan."""
    if not session_ids or plan.empty:
        return []
    scope_json = json.dumps(session_ids)
    extra, params = _filter_sql(filters)
    hits: list[Hit] = []
    if plan.units:
        # Ranked on (id, rank) alone, the text read for the winners only: sorting thousands of
        # matches with their text (up to 32,000 characters each) was a fifth of the query. Each
        # match's session comes from the covering (id, session_id) index, not the wide rows
        # (``+`` keeps SQLite from turning the scope into one index seek per session).
        sql = (
            "SELECT e.id, e.session_id, e.message_id, e.kind, e.text, e.timestamp, e.position, ranked.rank FROM ("
            "SELECT entries_fts.rowid AS id, bm25(entries_fts) AS rank "
            f"FROM entries_fts JOIN entries e INDEXED BY {ENTRY_SESSION_INDEX} ON e.id = entries_fts.rowid "
            "WHERE entries_fts MATCH ? AND +e.session_id IN (SELECT value FROM json_each(?))"
            f"{extra} ORDER BY rank LIMIT ?) ranked JOIN entries e ON e.id = ranked.id ORDER BY ranked.rank"
        )
        try:
            rows: list[sqlite3.Row] = []
            for tier in _tiers(conn, plan):
                rows = conn.execute(sql, [tier.match_any(), scope_json, *params, limit]).fetchall()
                if rows:
                    break
            hits = [_hit(r, -float(r["rank"])) for r in rows]
        except sqlite3.OperationalError as exc:
            if is_damage(exc):
                raise  # a damaged index heals (recall._heals); only a query FTS5 cannot parse falls back
            hits = _like_hits(conn, [u.label for u in plan.units], scope_json, extra, params, limit)
    if plan.substrings:
        seen = {h.entry_id for h in hits}
        hits += [h for h in _like_hits(conn, list(plan.substrings), scope_json, extra, params, limit)
                 if h.entry_id not in seen]
    return hits


def _tiers(conn: sqlite3.Connection, plan: QueryPlan) -> list[QueryPlan]:
    """``plan``'s units split into ranking tiers, rarest first (just ``plan`` when all fit)."""
    if len(plan.units) < 2:
        return [plan]
    matches = {unit: _matches(conn, unit.fts, RANKING_BUDGET) for unit in plan.units}
    tiers: list[list[Unit]] = []
    spent = RANKING_BUDGET + 1
    for unit in sorted(plan.units, key=lambda u: matches[u]):
        if spent + matches[unit] > RANKING_BUDGET:
            tiers.append([])
            spent = 0
        tiers[-1].append(unit)
        spent += matches[unit]
    if len(tiers) == 1:
        return [plan]
    return [dataclasses.replace(plan, units=tuple(u for u in plan.units if u in tier)) for tier in tiers]


def _matches(conn: sqlite3.Connection, match: str, cap: int) -> int:
    """Entries matching ``match``, counted up to ``cap + 1``: the cap bounds the check's cost."""
    sql = "SELECT count(*) FROM (SELECT 1 FROM entries_fts WHERE entries_fts MATCH ? LIMIT ?)"
    return int(conn.execute(sql, [match, cap + 1]).fetchone()[0])


#: A unit with more matches than this is common: :func:`elsewhere` does not count it (reading
#: them all to be sure none is in scope would cost more than such a weak hint is worth).
ELSEWHERE_MATCHES = 1_000
#: A unit with one of these looks like code: a path, a dotted or snake_case name, a number.
_CODE_MARKS = frozenset(JOINERS + string.digits)


@dataclass(frozen=True)
class Elsewhere:
    """:func:`elsewhere`'s figures for one query, for the query's other words and for its units
    that look like code, apart: another project's file or identifier says more than its words
    (chats share most words; repositories do not share paths)."""

    words: float = 0.0
    code: float = 0.0


def elsewhere(conn: sqlite3.Connection, plan: QueryPlan, session_ids: list[str], found: set[str]) -> Elsewhere:
    """How much of the query belongs to sessions outside the scope: for each unit that no
    session in scope matches but others do, ``log(1 + how many sessions)``, summed (words and
    code-like units apart) and divided by the number of units. ``found`` are the units already
    known to match in scope; a unit with more than :data:`ELSEWHERE_MATCHES` matches counts for
    nothing (the first ones read may all lie outside a small scope that has it too).

    A question asked in the wrong project names that project's files, identifiers and topics,
    which this one never mentions; a rewording of this project's own words mostly matches
    nothing anywhere. A confidence signal only (:class:`~.confidence.Signals`): no session
    outside the scope is returned, named or counted in an answer."""
    missing = [u for u in plan.units if u.label not in found]
    if not missing:
        return Elsewhere()
    in_scope = set(session_ids)
    sql = (f"SELECT e.session_id FROM (SELECT rowid FROM entries_fts WHERE entries_fts MATCH ? LIMIT ?) m "
           f"JOIN entries e INDEXED BY {ENTRY_SESSION_INDEX} ON e.id = m.rowid")
    words = code = 0.0
    try:
        for unit in missing:
            # counted first: the count reads the unit's postings alone, the sessions are read
            # through each match's entry (a pasted log's common words were most of a search)
            if _matches(conn, unit.fts, ELSEWHERE_MATCHES) > ELSEWHERE_MATCHES:
                continue
            sessions = {row[0] for row in conn.execute(sql, (unit.fts, ELSEWHERE_MATCHES + 1))}
            if sessions and sessions.isdisjoint(in_scope):
                if _CODE_MARKS.isdisjoint(unit.label):
                    words += math.log1p(len(sessions))
                else:
                    code += math.log1p(len(sessions))
    except sqlite3.OperationalError as exc:
        if is_damage(exc):
            raise
        return Elsewhere()  # a unit FTS5 cannot parse: keyword_hits fell back to LIKE for it too
    return Elsewhere(words / len(plan.units), code / len(plan.units))


def _hit(row: sqlite3.Row, score: float) -> Hit:
    return Hit(row["id"], row["session_id"], row["message_id"], row["kind"], row["text"], row["timestamp"],
               row["position"], keyword_score=score)


def _like_hits(conn: sqlite3.Connection, terms: list[str], scope_json: str, extra: str, params: list[object],
               limit: int) -> list[Hit]:
    terms = [t for t in terms if t][:8]
    if not terms:
        return []
    like = " OR ".join("e.text LIKE ? ESCAPE '\\'" for _ in terms)
    patterns = ["%" + t.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%" for t in terms]
    rows = conn.execute(
        "SELECT e.id, e.session_id, e.message_id, e.kind, e.text, e.timestamp, e.position FROM entries e "
        f"WHERE e.session_id IN (SELECT value FROM json_each(?)) AND ({like}){extra} "
        "ORDER BY e.timestamp DESC LIMIT ?",
        [scope_json, *patterns, *params, limit],
    ).fetchall()
    hits = []
    for row in rows:
        lowered = row["text"].lower()
        hits.append(_hit(row, float(sum(lowered.count(t.lower()) > 0 for t in terms))))
    return hits


def rank_keyword(hits: list[Hit]) -> None:
    for rank, hit in enumerate(sorted(hits, key=lambda h: (-h.keyword_score, h.entry_id)), start=1):
        hit.keyword_rank = rank
        hit.score = hit.keyword_score


def _units(hit: Hit, plan: QueryPlan, known: set[str] | None = None) -> set[str]:
    """The query units an entry matches; with ``known``, only those of the others it matches
    (a session's coverage needs each unit once, not per entry)."""
    units = plan.units if not known else tuple(u for u in plan.units if u.label not in known)
    return {u.label for u in units_in_text(units, searchable_text(hit.kind, hit.text))}


@dataclass
class KeywordSessions:
    """Keyword hits grouped by session (:func:`keyword_sessions`), with the units the grouping
    found on the way: fusion and confidence read them here instead of tokenizing the hits again
    (re-tokenizing candidates is a search's largest cost)."""

    hits: list[Hit]
    plan: QueryPlan | None
    #: every session, best first
    results: list[SessionResult]
    #: the query units each leading session's keyword entries match, together (the sessions of
    #: the :data:`COVERAGE_HITS` strongest hits, when the query has more than one unit)
    found: dict[str, set[str]]

    @property
    def scores(self) -> dict[str, float]:
        return {r.session_id: r.score for r in self.results}

    def reachable(self) -> set[str]:
        """The units the strongest candidates match (the leading sessions'); a lone unit is
        reachable when anything was found."""
        if self.plan is not None and len(self.plan.units) == 1:
            return {self.plan.units[0].label} if self.hits else set()
        return set().union(*self.found.values()) if self.found else set()

    def coverage(self, session_id: str) -> float:
        """Share of the query's units that the session's keyword entries match, together."""
        if self.plan is None or not self.plan.units:
            return 0.0
        found = self.found.get(session_id)
        if found is None:
            found = _session_units(self.hits, self.plan, session_id)
        return len(found) / len(self.plan.units)


def _session_units(hits: list[Hit], plan: QueryPlan, session_id: str) -> set[str]:
    """The query units the session's keyword entries match, together (looking no further once
    every unit is found)."""
    found: set[str] = set()
    for hit in hits:
        if hit.session_id == session_id and hit.keyword_rank is not None and len(found) < len(plan.units):
            found.update(_units(hit, plan, found))
    return found


def keyword_sessions(hits: list[Hit], plan: QueryPlan | None) -> KeywordSessions:
    """One result per session, ranked by its best message, with credit for a session
    whose messages together cover more of the query (several strong messages beat one
    lucky word)."""
    by_session: dict[str, list[Hit]] = defaultdict(list)
    for hit in hits:
        by_session[hit.session_id].append(hit)
    coverage: dict[str, float] = {}
    units_by_session: dict[str, set[str]] = {}
    if plan is not None and len(plan.units) > 1:
        leading = {h.session_id for h in sorted(hits, key=lambda h: -h.score)[: COVERAGE_HITS]}
        for hit in hits:
            if hit.keyword_rank is None or hit.session_id not in leading:
                continue
            known = units_by_session.setdefault(hit.session_id, set())
            if len(known) < len(plan.units):
                known.update(_units(hit, plan, known))
        reachable = set().union(*units_by_session.values()) if units_by_session else set()
        if reachable:
            coverage = {sid: len(u) / len(reachable) for sid, u in units_by_session.items()}
    results = []
    for sid, session_hits in by_session.items():
        session_hits.sort(key=lambda h: (-h.score, h.entry_id))
        top = [h.score for h in session_hits[:3]]
        score = top[0] + 0.25 * sum(top[1:])
        if coverage:
            score *= 0.5 + 0.5 * coverage.get(sid, 0.0)
        # A title helps rank its session, but the answer shown is a real message when one matched.
        shown = next((h for h in session_hits if h.kind != "title"), session_hits[0])
        results.append(SessionResult(sid, shown, score, session_hits))
    results.sort(key=lambda r: (-r.score, r.session_id))
    return KeywordSessions(hits, plan, results, units_by_session)


def group_by_session(hits: list[Hit], plan: QueryPlan | None, limit: int) -> list[SessionResult]:
    """The first ``limit`` sessions of :func:`keyword_sessions`."""
    return keyword_sessions(hits, plan).results[:limit]


def _message_key(hit: Hit) -> tuple[str, int | str]:
    return (hit.session_id, hit.message_id if hit.message_id is not None else f"entry:{hit.entry_id}")


def hybrid_sessions(keyword: KeywordSessions, semantic: list[Hit], limit: int) -> list[SessionResult]:
    """``mode=hybrid``: keyword-gated fusion of session scores (:func:`~.fusion.gated`).

    K(s) is the session's keyword score from :func:`keyword_sessions` (its entries,
    with the coverage credit), S(s) the session's score over the semantic messages
    (no coverage). A confident keyword answer (:data:`GATE_MARGIN` lead or
    :data:`GATE_COVERAGE` of the query's units) keeps keyword's first
    :data:`GATE_PIN` sessions on top; a weak one (under :data:`WEAK_COVERAGE`) lets semantic
    lead. Each session shows its messages by :func:`with_shown_messages`."""
    for hit in semantic:
        hit.score = hit.semantic_score
    kw_sessions = keyword.scores
    sem_sessions = {r.session_id: r.score for r in group_by_session(semantic, None, len(semantic) or 1)}
    kw_top = ranking(kw_sessions)[:1]
    coverage = {sid: keyword.coverage(sid) for sid in kw_top}
    order = gated(kw_sessions, sem_sessions, coverage, dense_weight=HYBRID_DENSE_WEIGHT, margin=GATE_MARGIN,
                  min_coverage=GATE_COVERAGE, pin=GATE_PIN, weak_coverage=WEAK_COVERAGE,
                  weak_dense_weight=WEAK_DENSE_WEIGHT, limit=limit)
    return with_shown_messages([(item.key, item.score) for item in order], keyword, semantic)


def with_shown_messages(ranked: list[tuple[str, float]], keyword: KeywordSessions, semantic: list[Hit],
                        dense: float = DENSE) -> list[SessionResult]:
    """A result per ``(session id, score)`` of ``ranked``, in that order, showing the message with
    the best evidence (:func:`~.message_choice.message_evidence`, the cosine at weight ``dense``),
    a real message before a title, and the next best behind it (``runners_up``). For
    ``mode=keyword`` ``semantic`` is empty, for ``mode=semantic`` ``keyword`` (which passes
    :data:`~.message_choice.SEMANTIC_ALONE`): the choice then reads the one source, the length and
    the voice, and a session's shortest line that repeats a query word ("skiing?") no longer wins
    on that alone."""
    # message level: a message's keyword face is its best entry; the semantic hit is its own face otherwise
    faces: dict[tuple[str, int | str], Hit] = {}
    kw_messages: dict[tuple[str, int | str], float] = {}
    for hit in sorted(keyword.hits, key=lambda h: (-h.keyword_score, h.entry_id)):
        key = _message_key(hit)
        if key not in faces:
            faces[key], kw_messages[key] = hit, hit.keyword_score
    sem_messages: dict[tuple[str, int | str], float] = {}
    for hit in semantic:
        key = _message_key(hit)
        sem_messages[key] = hit.semantic_score
        if key in faces:
            faces[key].semantic_score, faces[key].semantic_rank = hit.semantic_score, hit.semantic_rank
        else:
            faces[key] = hit
    by_session: dict[str, list[tuple[tuple[str, int | str], Hit]]] = defaultdict(list)
    for key, hit in faces.items():
        by_session[key[0]].append((key, hit))
    plan = keyword.plan
    units = max(1, len(plan.units)) if plan is not None else 1

    matches: dict[int, set[str]] = {}

    def matched(hit: Hit) -> set[str]:
        if hit.entry_id not in matches:
            matches[hit.entry_id] = _units(hit, plan) if plan is not None and hit.keyword_rank is not None else set()
        return matches[hit.entry_id]

    def new_units(session: dict[int, Hit], key: tuple[str, int | str]) -> float:
        """Share of the query's units the message matches and the :data:`LOOK_BACK` before it
        do not (only keyword candidates match a unit: a message that is none matches none)."""
        hit = faces[key]
        before = [session[p] for p in range(hit.position - LOOK_BACK, hit.position) if p in session]
        return len(matched(hit).difference(*map(matched, before))) / units

    def spoken_voice(key: tuple[str, int | str]) -> float:
        hit = faces[key]
        return voice(hit.text) if hit.kind in SPOKEN_KINDS else 0.0

    evidence = message_evidence(kw_messages, sem_messages, {key: len(hit.text) for key, hit in faces.items()},
                                dense)
    results = []
    for session_id, score in ranked:
        candidates = sorted(by_session[session_id], key=lambda kh: str(kh[0][1]))
        real = [key for key, hit in candidates if hit.kind != "title"]
        by_position = {hit.position: hit for _, hit in candidates if hit.kind != "title"}
        shown = shown_messages(real or [key for key, _ in candidates], evidence,
                               functools.partial(new_units, by_position), spoken_voice, RUNNERS_UP + 1)
        results.append(SessionResult(session_id, faces[shown[0]], score, [h for _, h in candidates],
                                     [faces[key] for key in shown[1:]] if real else []))
    return results


def result_signals(results: list[SessionResult], keyword: KeywordSessions, semantic: list[Hit],
                   plan: QueryPlan, outside: Elsewhere = Elsewhere()) -> list[Signals]:
    """What the ranking knows about each result, for its confidence
    (:class:`~.confidence.Signals`); ``keyword`` / ``semantic`` are the candidates that ran
    (empty when a source did not), ``keyword`` grouped with ``plan``; ``outside`` is
    :func:`elsewhere`'s figure for the query."""
    kw_sessions = keyword.scores
    best_keyword = max(kw_sessions.values(), default=0.0)
    margin = keyword_margin(kw_sessions)
    leader = ranking(kw_sessions)[0] if kw_sessions else None
    cosines = [h.semantic_score for h in semantic]
    session_cosine: dict[str, float] = {}
    for hit in semantic:
        session_cosine[hit.session_id] = max(session_cosine.get(hit.session_id, -1.0), hit.semantic_score)
    top = max(cosines, default=0.0)
    gap = top - statistics.median(cosines) if cosines else 0.0
    floor = min(cosines, default=0.0)
    units = max(1, len(plan.units))
    missing = 1.0 - len(keyword.reachable()) / units if plan.units else 0.0
    cjk_share = sum(in_cjk_script(u.label) for u in plan.units) / units
    out = []
    for r in results:
        k = kw_sessions.get(r.session_id, 0.0)
        out.append(Signals(
            coverage=keyword.coverage(r.session_id) if keyword.hits else 0.0,
            keyword_per_unit=k / units, keyword_share=k / best_keyword if best_keyword > 0 else 0.0,
            margin=margin if k > 0 and r.session_id == leader else 0.0,
            session_cosine=session_cosine.get(r.session_id, floor), top_cosine=top, cosine_gap=gap,
            missing=missing, query_units=float(len(plan.units)), elsewhere_words=outside.words,
            elsewhere_code=outside.code, cjk_share=cjk_share))
    return out
