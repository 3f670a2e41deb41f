"""A question's scope: which indexed sessions belong to the asker's project.

Attribution (:mod:`project_history_recall.attribution`) is pure; this room applies it to
the index's ``sessions`` rows, cached per index generation, so every read — search,
browse, code history — asks the same question the same way.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from project_history_recall.attribution import Identity, Resolver
from project_history_recall.index.store import SCOPE_GENERATION, SCOPE_REWRITTEN


@dataclass(frozen=True)
class Filters:
    after: float | None = None
    before: float | None = None
    kinds: tuple[str, ...] | None = None
    branch: str | None = None


@dataclass(frozen=True)
class Scope:
    """Kept between searches while the index's sessions stand (:func:`compute_scope`): read, never changed."""

    identity: Identity
    session_ids: list[str]
    sessions_in_scope: int
    identities: dict[str, Identity] = field(default_factory=dict)
    #: The branches recorded by the project's sessions (before narrowing to one).
    branches: frozenset[str] = frozenset()

    def branch_warning(self, branch: str | None) -> str | None:
        """Why a ``branch`` narrowing found nothing: no session of the project was on it
        (a typo, or a branch never worked on here), rather than a bare "no other sessions"."""
        if not branch or branch in self.branches:
            return None
        known = ", ".join(sorted(self.branches)[:10]) or "none recorded"
        return f"no session here was recorded on branch '{branch}' (branches seen: {known})"


@dataclass
class _Attributed:
    """Every indexed session's project, and the visible sessions grouped by project."""

    identities: dict[str, tuple[Identity, sqlite3.Row]]
    visible: dict[str, list[tuple[str, Identity, sqlite3.Row]]]
    #: what it was read under, but for ``scope_generation``: while this stands, sessions only came
    base: tuple = ()
    #: the scopes asked of it (a project's sessions walked once, not at every search: 7 ms at 5,000)
    scopes: dict[tuple, Scope] = field(default_factory=dict)


_attributed_cache: dict[tuple, _Attributed] = {}

_SESSION_COLUMNS = "id, cwd, repo_root, branch, archived, hidden, started_at"


def _attributed(conn: sqlite3.Connection, resolver: Resolver) -> _Attributed:
    """Resolve every session once per distinct (cwd, repo root). Cached until what attributes
    a session changes in the index (``SCOPE_GENERATION``: not a Hermes turn, which only adds
    messages) or the projects do (``resolver.key``): attribution is still computed at query
    time, just not again for an unchanged history. When sessions only came since
    (``SCOPE_REWRITTEN`` stands), only they are resolved."""
    row = conn.execute("SELECT (SELECT value FROM meta WHERE key = ?), (SELECT value FROM meta WHERE key = ?), "
                       "(SELECT file FROM pragma_database_list WHERE name = 'main')",
                       (SCOPE_GENERATION, SCOPE_REWRITTEN)).fetchone()
    base = (row[1], row[2], resolver.key)
    key = (row[0], *base)
    cached = _attributed_cache.get(key)
    if cached is not None:
        return cached
    earlier = next((a for a in reversed(_attributed_cache.values()) if a.base == base), None)
    attributed = _with_sessions_that_came(conn, resolver, earlier) if earlier is not None else None
    if attributed is None:
        attributed = _attribute(conn.execute(f"SELECT {_SESSION_COLUMNS} FROM sessions ORDER BY started_at, id"),
                                resolver, {}, {}, base)
    if len(_attributed_cache) > 8:
        _attributed_cache.clear()
    _attributed_cache[key] = attributed
    return attributed


def _attribute(sessions: Iterable[sqlite3.Row], resolver: Resolver,
               identities: dict[str, tuple[Identity, sqlite3.Row]],
               visible: dict[str, list[tuple[str, Identity, sqlite3.Row]]], base: tuple) -> _Attributed:
    """``identities`` and ``visible`` with ``sessions`` (in start order) added."""
    by_pair: dict[tuple[str | None, str | None], Identity] = {}
    grown: dict[str, list[tuple[str, Identity, sqlite3.Row]]] = defaultdict(list)
    for session in sessions:
        pair = (session["cwd"], session["repo_root"])
        identity = by_pair.get(pair)
        if identity is None:
            identity = by_pair[pair] = resolver.resolve(*pair)
        identities[session["id"]] = (identity, session)
        if not (session["archived"] or session["hidden"]):
            grown[identity.scope_key].append((session["id"], identity, session))
    for scope_key, members in grown.items():
        known = visible.get(scope_key)
        visible[scope_key] = sorted([*known, *members], key=lambda m: (m[2]["started_at"], m[0])) if known else members
    return _Attributed(identities, visible, base)


def _with_sessions_that_came(conn: sqlite3.Connection, resolver: Resolver,
                             earlier: _Attributed) -> _Attributed | None:
    """``earlier`` with the sessions the index gained since (None when it lost any: then
    something else changed too, and everything is attributed again)."""
    ids = [r[0] for r in conn.execute("SELECT id FROM sessions")]
    came = [sid for sid in ids if sid not in earlier.identities]
    if len(ids) - len(came) != len(earlier.identities):
        return None
    rows = conn.execute(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id IN (SELECT value FROM json_each(?)) "
                        "ORDER BY started_at, id", [json.dumps(came)])
    return _attribute(rows, resolver, dict(earlier.identities), dict(earlier.visible), earlier.base)


def session_identities(conn: sqlite3.Connection, resolver: Resolver) -> dict[str, tuple[Identity, sqlite3.Row]]:
    """Every indexed session's project (hidden and archived ones included)."""
    return _attributed(conn, resolver).identities


def compute_scope(conn: sqlite3.Connection, resolver: Resolver, identity: Identity, current_id: str | None,
                  *, everywhere: bool = False, branch: str | None = None) -> Scope:
    """The visible (not archived, not hidden) sessions of ``identity``'s project,
    the current one excluded; ``everywhere`` widens to every project on purpose."""
    attributed = _attributed(conn, resolver)
    key = (identity, current_id, everywhere, branch)
    kept = attributed.scopes.get(key)
    if kept is None:
        if len(attributed.scopes) > 64:
            attributed.scopes.clear()
        kept = attributed.scopes[key] = _scope(attributed.visible, identity, current_id, everywhere, branch)
    return kept


def _scope(groups: dict[str, list[tuple[str, Identity, sqlite3.Row]]], identity: Identity, current_id: str | None,
           everywhere: bool, branch: str | None) -> Scope:
    candidates = ([m for group in groups.values() for m in group] if everywhere
                  else groups.get(identity.scope_key, []))
    members: list[str] = []
    identities: dict[str, Identity] = {}
    in_scope = 0
    branches = frozenset(row["branch"] for _sid, _ident, row in candidates if row["branch"])
    for sid, ident, row in candidates:
        if branch and row["branch"] and row["branch"] != branch:
            continue
        in_scope += 1
        if sid != current_id:
            members.append(sid)
            identities[sid] = ident
    return Scope(identity, members, in_scope, identities, branches)


def reader_scope(conn: sqlite3.Connection, resolver: Resolver, identity: Identity,
                 current_id: str | None) -> Callable[[str], bool]:
    """May a reader in ``identity``'s project see session ``sid``? Its own project's sessions
    (hidden and archived ones too: opening by id is not search), and the asker's own session;
    Home sees only itself."""
    identities = _attributed(conn, resolver).identities

    def allowed(sid: str) -> bool:
        if sid == current_id:
            return True
        if identity.is_home:
            return False
        found = identities.get(sid)
        return found is not None and found[0].scope_key == identity.scope_key

    return allowed
