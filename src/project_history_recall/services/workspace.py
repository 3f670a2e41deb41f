"""One Hermes home's storage, and who is asking: what every service is handed.

A :class:`Workspace` bundles the parts that belong together for one home — its
settings, our index, Hermes's ``state.db`` as a source, the indexer that keeps
the first in step with the second — and answers the two questions every read
starts with: which projects exist (:meth:`Workspace.resolver`) and which project
the asking session is in (:meth:`Workspace.asker`).
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass

from project_history_recall.attribution import HOME, Identity, Resolver
from project_history_recall.errors import RecallError, bad_argument, no_db
from project_history_recall.hermes_home import HermesHome
from project_history_recall.index.edit_phase import EditPhase
from project_history_recall.index.indexer import Indexer, Progress, RefreshReport
from project_history_recall.index.probes import Probe, git_probe, repo_root_probe
from project_history_recall.index.store import Index
from project_history_recall.services import withheld
from project_history_recall.settings import Settings
from project_history_recall.sources import Source, claude_code, codex
from project_history_recall.sources.composite import CompositeSource
from project_history_recall.sources.hermes import HermesSource
from project_history_recall.sources.transcripts import TranscriptSource
from project_history_recall.sources.withholding import WithholdingSource

NO_PROJECT_CONTEXT = "No project context (no working directory recorded)"
HOME_CONTEXT = "No project context: this session is in Home (no project), so there is nothing to search"


@dataclass(frozen=True)
class Asker:
    """The session a question comes from, and the project it resolves to."""

    session_id: str | None
    cwd: str | None
    repo_root: str | None
    identity: Identity

    @property
    def home_message(self) -> str:
        """Why a Home session has nothing to search (seed 000's wording when there is no cwd)."""
        return NO_PROJECT_CONTEXT if not (self.cwd or self.repo_root) else HOME_CONTEXT


class Workspace:
    def __init__(self, home: HermesHome, *, probe: Probe = git_probe, settings: Settings | None = None) -> None:
        self.home = home
        self.settings = settings or home.settings()
        self.probe = probe
        self.index = Index(home.data_dir)
        #: Hermes's database as it is (who is asking, moving a session) ...
        self.hermes = HermesSource(home.state_db)
        #: ... every history that is on (config ``sources``; default: all whose folder exists) ...
        rules = lambda: withheld.withholding(home, self.settings)  # noqa: E731
        self.sources: list[Source] = [
            s for s in (self.hermes, TranscriptSource(claude_code.ClaudeCodeFormat(), claude_code.default_root(),
                                                      self.index, rules),
                        TranscriptSource(codex.CodexFormat(), codex.default_root(), self.index, rules))
            if self.settings.sources is None or s.name in self.settings.sources]
        self.histories = CompositeSource(self.sources)
        #: ... and as the index may see them: without what a person forgot, excluded or marked private.
        self._token = lambda: withheld.token(home, self.settings)
        self._rules = rules
        self.source = WithholdingSource(self.histories, self._token, rules)
        self.indexer = Indexer(self.index, self.source, probe, phases=[EditPhase()])
        self._resolver: tuple[tuple[object, ...], Resolver] | None = None

    def refresh(self, *, force: bool = False, progress: Progress | None = None,
                lock_timeout: float = 10.0) -> RefreshReport:
        if not self.source.exists():
            raise no_db(self.home.state_db)
        return self.indexer.refresh(force=force, progress=progress, lock_timeout=lock_timeout)

    def sessions_to_index(self) -> int:
        """How many sessions the index is (to be) built from, to choose a background job. With no
        index yet to keep a parse in, transcripts are not parsed (into memory, only to count):
        each transcript file counts as one session (subagents and Codex segments add a few)."""
        if self.index.exists():
            with self.source.read() as reader:
                return len(reader.signatures())
        databases = [s for s in self.sources if not isinstance(s, TranscriptSource)]
        total = 0
        if any(s.exists() for s in databases):
            with WithholdingSource(CompositeSource(databases), self._token, self._rules).read() as reader:
                total = len(reader.signatures())
        return total + sum(s.file_count() for s in self.sources if isinstance(s, TranscriptSource))

    def resolver(self) -> Resolver:
        """Hermes's projects as they are now. Read again only when ``projects.db`` (or its WAL)
        changed: reading it costs a connection and a query, about 1 ms, and every search asks."""
        key = (self.home.projects_mtime(), self.home.environment())
        cached = self._resolver
        if cached is None or cached[0] != key:
            cached = self._resolver = (key, Resolver(self.home.load_projects(), key[1]))
        return cached[1]

    def asker(self, conn: sqlite3.Connection | None, resolver: Resolver, session_id: str | None,
              cwd: str | None, *, require_source: bool = True) -> Asker:
        """The asking session from the index (``conn``), else from Hermes's row, else ``cwd``
        (the process's own folder when neither a session nor a cwd is given). A session that
        nothing knows while Hermes's database is gone is ``no_db`` (placing it in Home would
        answer "no working directory recorded" for a missing state.db), unless
        ``require_source`` is False: status answers whatever is missing."""
        row = None
        if session_id and conn is not None:
            row = conn.execute("SELECT cwd, repo_root FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is not None:
            cwd, root = row["cwd"], row["repo_root"]
        else:
            if require_source and session_id and not self.hermes.exists() and not self._in_sources(session_id):
                raise no_db(self.home.state_db)
            root = None
            if session_id and conn is None:
                cwd, root = self._hermes_row(session_id, cwd)
            if cwd is None and not session_id:
                cwd = os.getcwd()
            if cwd and root is None:
                # The root alone: asking git for the branch too was a subprocess at every
                # search by folder (2 ms; the MCP face asks so), for an answer nothing reads.
                root = repo_root_probe(self.probe)(cwd)
        identity = resolver.resolve(cwd, root) if cwd or root else HOME
        return Asker(session_id, cwd, root, identity)

    def check_asker(self, session_id: str | None, cwd: str | None) -> None:
        """A person's ``--session`` / ``--cwd`` must name something real: an unknown session
        would otherwise ask from Home and a missing folder from a project named after its
        last part, both silently. (Hermes's own session id, the tools' asker, is not checked.)"""
        if cwd is not None and not os.path.isdir(cwd):
            raise bad_argument(f"cwd {cwd} is not a folder")
        if not session_id:
            return
        known = self._in_sources(session_id)
        conn = None if known else self.index.connect_readonly()
        if conn is not None:
            try:
                known = conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is not None
            finally:
                conn.close()
        if not known:
            raise RecallError(f"no session {session_id!r} in {self.home.root}: `phr timeline --all-projects` "
                              "lists sessions, `phr session PREFIX` finds one by prefix", "unknown_session")

    def _in_sources(self, session_id: str) -> bool:
        if not self.source.exists():
            return False
        with self.source.read() as reader:
            return session_id in reader.sessions([session_id])

    def _hermes_row(self, session_id: str, cwd: str | None) -> tuple[str | None, str | None]:
        if not self.hermes.exists():
            return cwd, None
        try:
            with self.hermes.read() as reader:
                row = reader.sessions([session_id]).get(session_id)
        except RecallError:
            row = None
        return (row.cwd, row.git_repo_root) if row is not None else (cwd, None)
