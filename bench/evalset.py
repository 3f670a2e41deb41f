"""An evaluation set (``/work/shared/eval/FORMAT.md``) and the Hermes home built from it.

The home is written only through Hermes's own APIs, in the order the format
prescribes: projects with ``projects_db.create_project``; each session created,
then ``update_session_cwd`` (cwd and git fields), ``set_session_title``, its
messages with ``append_message`` in order, and ``set_session_archived``.

``started_at``: ``SessionDB.create_session`` always stamps the wall clock and
no setter exists, so a session that gives ``started_at`` is created with
``SessionDB.import_sessions([{id, source, started_at, messages: []}])`` — Hermes's
own restore API, the only one that records a given start time — and then goes
through exactly the same calls as any other. No SQL touches ``state.db``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

# append_message keywords a message may carry besides role/content (anything else is ignored).
_MESSAGE_KEYS = ("tool_name", "tool_calls", "tool_call_id", "timestamp", "reasoning", "finish_reason")


class EvalSetError(ValueError):
    """The file is not an evaluation set in the documented format."""


@dataclass(frozen=True)
class Query:
    id: str
    query: str
    current_session: str
    gold_sessions: tuple[str, ...]
    gold_messages: tuple[tuple[str, int], ...] | None
    lang: str
    category: str

    @property
    def negative(self) -> bool:
        return not self.gold_sessions


@dataclass
class EvalSet:
    name: str
    path: Path
    projects: list[dict]
    sessions: list[dict]
    queries: list[Query]

    @classmethod
    def load(cls, path: Path) -> EvalSet:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise EvalSetError(f"{path}: cannot read JSON: {exc}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("sessions"), list) or not isinstance(
                data.get("queries"), list):
            raise EvalSetError(f"{path}: needs 'sessions' and 'queries' lists")
        session_ids = [s.get("id") for s in data["sessions"]]
        if len(set(session_ids)) != len(session_ids) or not all(isinstance(s, str) and s for s in session_ids):
            raise EvalSetError(f"{path}: session ids must be unique non-empty strings")
        known = {s["id"]: len(s.get("messages") or []) for s in data["sessions"]}
        queries = [_query(path, q, known) for q in data["queries"]]
        return cls(str(data.get("name") or Path(path).stem), Path(path), list(data.get("projects") or []),
                   data["sessions"], queries)


def _query(path: Path, q: dict, known: dict[str, int]) -> Query:
    qid = str(q.get("id") or "?")
    if not isinstance(q.get("query"), str) or not q["query"].strip():
        raise EvalSetError(f"{path}: query {qid} has no text")
    if q.get("current_session") not in known:
        raise EvalSetError(f"{path}: query {qid}: current_session {q.get('current_session')!r} is not a session")
    gold = tuple(q.get("gold_sessions") or ())
    for sid in gold:
        if sid not in known:
            raise EvalSetError(f"{path}: query {qid}: gold session {sid!r} is not a session")
    gold_messages = None
    if q.get("gold_messages"):
        pairs = []
        for sid, index in q["gold_messages"]:
            if sid not in known or not 0 <= int(index) < known[sid]:
                raise EvalSetError(f"{path}: query {qid}: gold message [{sid!r}, {index}] does not exist")
            pairs.append((sid, int(index)))
        gold_messages = tuple(pairs)
    return Query(qid, q["query"], q["current_session"], gold, gold_messages, str(q.get("lang") or "unknown"),
                 str(q.get("category") or "unknown"))


@dataclass
class BuiltHome:
    """A Hermes home made from a set; ``message_ids[sid][i]`` is the row id of message ``i``."""

    root: Path
    message_ids: dict[str, list[int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def state_db(self) -> Path:
        from project_history_recall.hermes_home import HermesHome

        return HermesHome(self.root).state_db


#: The plugin's settings block that reads Hermes's history alone: by default the plugin also
#: reads this machine's Claude Code and Codex folders (``~/.claude``, ``~/.codex``), which would
#: put the user's own transcripts into a benchmark's index and figures (an empty
#: ``~/.claude/projects`` alone changed how an M build used the log).
HERMES_HISTORY_ONLY = {"sources": ["hermes"]}


def hermes_history_only(home: Path) -> None:
    """Give a benchmark's Hermes home :data:`HERMES_HISTORY_ONLY`, kept beside whatever else its
    ``config.yaml`` already says."""
    import yaml

    from project_history_recall.hermes_home import HermesHome
    from project_history_recall.settings import PLUGIN_NAME

    hermes_home = HermesHome(home)
    config = hermes_home.load_config()
    _mapping_at(_mapping_at(_mapping_at(config, "plugins"), "entries"), PLUGIN_NAME).update(HERMES_HISTORY_ONLY)
    hermes_home.config_path.write_text(yaml.safe_dump(config), encoding="utf-8")


def _mapping_at(parent: dict, key: str) -> dict:
    """``parent[key]``, made an empty mapping first when it is missing or not one (a
    hand-written ``plugins:`` with nothing under it is ``None``)."""
    if not isinstance(parent.get(key), dict):
        parent[key] = {}
    return parent[key]


def build_home(evalset: EvalSet, root: Path) -> BuiltHome:
    from hermes_cli import projects_db
    from hermes_state import SessionDB

    root.mkdir(parents=True, exist_ok=True)
    hermes_history_only(root)
    built = BuiltHome(root)
    if evalset.projects:
        with projects_db.connect_closing(root / "projects.db") as conn:
            for project in evalset.projects:
                projects_db.create_project(conn, name=project["name"], folders=list(project.get("folders") or []),
                                           primary_path=project.get("primary_path"))
    db = SessionDB(db_path=built.state_db)
    try:
        for session in evalset.sessions:
            _write_session(db, session, built)
    finally:
        db.close()
    return built


def _write_session(db, session: dict, built: BuiltHome) -> None:
    sid, source = session["id"], session.get("source") or "cli"
    if session.get("started_at") is not None:
        result = db.import_sessions([{"id": sid, "source": source, "started_at": float(session["started_at"]),
                                      "messages": []}])
        if not result.get("ok") or result.get("imported") != 1:
            raise EvalSetError(f"session {sid}: import_sessions refused it: {result.get('errors')}")
    else:
        db.create_session(sid, source)
    if session.get("cwd"):
        db.update_session_cwd(sid, session["cwd"], git_branch=session.get("git_branch"),
                              git_repo_root=session.get("git_repo_root"))
    elif session.get("git_repo_root") or session.get("git_branch"):
        built.notes.append(f"session {sid}: git fields without cwd cannot be written (update_session_cwd needs a cwd)")
    if session.get("title"):
        db.set_session_title(sid, session["title"])
    ids = []
    for message in session.get("messages") or []:
        extra = {k: message[k] for k in _MESSAGE_KEYS if message.get(k) is not None}
        ids.append(db.append_message(sid, message["role"], message.get("content"), **extra))
    built.message_ids[sid] = ids
    if session.get("archived"):
        db.set_session_archived(sid, True)
