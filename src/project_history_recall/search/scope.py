"""A question's scope: which indexed sessions belong to the asker's project.

Attribution (:mod:`project_history_recall.attribution`) is pure; this room applies it to
the index's ``sessions`` rows, cached per index generation, so every read — search,
browse, code history — asks the same question the same way.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from project_history_recall.attribution import Identity, Resolver
from project_history_recall.index.store import SCOPE_GENERATION


@dataclass(frozen=True)
class Filters:
    after: float | None = None
    before: float | None = None
    kinds: tuple[str, ...] | None = None
    branch: str | None = None


@dataclass
class Scope:
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


_attributed_cache: dict[tuple, _Attributed] = {}


def _attributed(conn: sqlite3.Connection, resolver: Resolver) -> _Attributed:
    """Resolve every session once per distinct (cwd, repo root). Cached until what attributes
    a session changes in the index (``SCOPE_GENERATION``: not a Hermes turn, which only adds
    messages) or the projects do (``resolver.key``): attribution is still computed at query
    time, just not again for an unchanged history."""
    row = conn.execute("SELECT (SELECT value FROM meta WHERE key = ?), "
                       "(SELECT file FROM pragma_database_list WHERE name = 'main')", (SCOPE_GENERATION,)).fetchone()
    key = (*row, resolver.key)
    cached = _attributed_cache.get(key)
    if cached is not None:
        return cached
    by_pair: dict[tuple[str | None, str | None], Identity] = {}
    identities: dict[str, tuple[Identity, sqlite3.Row]] = {}
    visible: dict[str, list[tuple[str, Identity, sqlite3.Row]]] = defaultdict(list)
    for session in conn.execute("SELECT id, cwd, repo_root, branch, archived, hidden, started_at FROM sessions "
                                "ORDER BY started_at, id"):
        pair = (session["cwd"], session["repo_root"])
        identity = by_pair.get(pair)
        if identity is None:
            identity = by_pair[pair] = resolver.resolve(*pair)
        identities[session["id"]] = (identity, session)
        if not (session["archived"] or session["hidden"]):
            visible[identity.scope_key].append((session["id"], identity, session))
    if len(_attributed_cache) > 8:
        _attributed_cache.clear()
    cached = _attributed_cache[key] = _Attributed(identities, dict(visible))
    return cached


def session_identities(conn: sqlite3.Connection, resolver: Resolver) -> dict[str, tuple[Identity, sqlite3.Row]]:
    """Every indexed session's project (hidden and archived ones included)."""
    return _attributed(conn, resolver).identities


def compute_scope(conn: sqlite3.Connection, resolver: Resolver, identity: Identity, current_id: str | None,
                  *, everywhere: bool = False, branch: str | None = None) -> Scope:
    """The visible (not archived, not hidden) sessions of ``identity``'s project,
    the current one excluded; ``everywhere`` widens to every project on purpose."""
    groups = _attributed(conn, resolver).visible
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
