"""Real Hermes homes for tests, written only through Hermes's own APIs."""

from __future__ import annotations

import hashlib
import json
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

from hermes_cli import projects_db
from hermes_state import SessionDB

from project_history_recall.recall import Recall


def git_init(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "-c", "user.email=t@example.com", "-c", "user.name=t",
                    "commit", "-q", "--allow-empty", "-m", "init"], check=True)
    return path


def add_worktree(repo: Path, path: Path, branch: str) -> Path:
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", "-b", branch, str(path)], check=True)
    return path


def tool_call(call_id: str, name: str, arguments: dict) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


@dataclass
class History:
    """A Hermes home under ``root`` with a state.db (and projects.db on demand)."""

    root: Path
    clock: float = 1_767_000_000.0
    db: SessionDB = field(init=False)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.db = SessionDB(db_path=self.root / "state.db")

    def close(self) -> None:
        self.db.close()

    def project(self, name: str, *folders: Path, primary: Path | None = None) -> str:
        with projects_db.connect_closing(self.root / "projects.db") as conn:
            return projects_db.create_project(conn, name=name, folders=[str(f) for f in folders],
                                              primary_path=str(primary) if primary else None)

    def session(self, sid: str, cwd: Path | str | None, *messages: str | tuple, title: str | None = None,
                source: str = "cli", repo_root: str | None = None, branch: str | None = None,
                parent: str | None = None, model_config: dict | None = None) -> list[int]:
        """Create a session; plain strings alternate user/assistant, tuples are (role, content[, extra])."""
        self.db.create_session(sid, source, cwd=str(cwd) if cwd else None, parent_session_id=parent,
                               model_config=model_config)
        if cwd and (repo_root or branch):
            self.db.update_session_cwd(sid, str(cwd), git_branch=branch, git_repo_root=repo_root)
        ids = [self.say(sid, m, i) for i, m in enumerate(messages)]
        if title:
            self.db.set_session_title(sid, title)
        return ids

    def say(self, sid: str, message: str | tuple, position: int = 0) -> int:
        self.clock += 60
        if isinstance(message, str):
            role = "user" if position % 2 == 0 else "assistant"
            return self.db.append_message(sid, role, message, timestamp=self.clock)
        role, content, *extra = message
        kwargs = extra[0] if extra else {}
        return self.db.append_message(sid, role, content, timestamp=self.clock, **kwargs)

    def recall(self, **kwargs) -> Recall:
        return Recall(self.root, **kwargs)

    def use_remote_embedder(self, base_url: str, *, batch_size: int | None = None) -> None:
        """config.yaml naming an OpenAI-compatible embedder at ``base_url`` (model ``m``, 8 dimensions)."""
        batch = f"        batch_size: {batch_size}\n" if batch_size else ""
        (self.root / "config.yaml").write_text(
            "plugins:\n  entries:\n    project-history-recall:\n      embedding:\n"
            f"        provider: openai\n        base_url: {base_url}\n        model: m\n"
            f"        dimensions: 8\n{batch}        enabled: true\n")


def alpha_and_beta(root: Path) -> tuple[History, Path, Path]:
    """A Hermes home under ``root`` with two git repos, each its own explicit project (Alpha, Beta)."""
    h = History(root / "hermes")
    alpha, beta = git_init(root / "alpha"), git_init(root / "beta")
    h.project("Alpha", alpha)
    h.project("Beta", beta)
    return h, alpha, beta


def file_digest(path: Path) -> str:
    """The bytes of a SQLite database as committed: main file plus WAL."""
    h = hashlib.sha256()
    for part in (path, path.with_name(path.name + "-wal")):
        if part.exists():
            h.update(part.read_bytes())
    return h.hexdigest()


def two_projects(root: Path) -> tuple[History, Path, Path, str]:
    """A home with repos ``a`` and ``b`` (``b`` the explicit project "B"), the session ``old``
    in ``a`` about the heron cache, and an empty asking session in each (``ask-a``, ``ask-b``);
    with the two folders and B's project id."""
    h = History(root / "hermes")
    a, b = git_init(root / "a"), git_init(root / "b")
    project_b = h.project("B", b)
    h.session("old", a, "the heron cache design", "we keep two tiers")
    h.session("ask-a", a)
    h.session("ask-b", b)
    return h, a, b, project_b


def session_ids(response: dict) -> list[str]:
    assert response["success"], response
    return [r["session_id"] for r in response["results"]]


def register_plugin() -> dict:
    """Register the plugin through a real Hermes PluginContext; returns what it added."""
    from hermes_cli.plugins import PluginContext, PluginManifest, get_plugin_manager

    from project_history_recall.faces.hermes.plugin import register

    manager = get_plugin_manager()
    register(PluginContext(PluginManifest(name="project-history-recall", source="entrypoint"), manager))
    return {"commands": dict(manager._plugin_commands), "hooks": dict(manager._hooks)}


def dispatch(tool: str, args: dict, session_id: str | None = None) -> dict:
    """Call a tool the way Hermes's agent loop does, through the real registry."""
    from tools.registry import registry

    raw = registry.dispatch(tool, args, task_id="t-1", session_id=session_id, user_task="test")
    assert isinstance(raw, str)
    return json.loads(raw)


class Gate:
    """Holds a step (on another thread) until the test opens the gate.

    ``passed_open`` tells afterwards whether the gate was opened while the step still waited at
    it. A caller that returned before the test opened the gate cannot have waited for the step:
    that is how tests show "does not wait" without reading a clock.
    """

    def __init__(self, limit: float = 30.0) -> None:
        self.limit = limit
        self.reached = threading.Event()
        self.passed = threading.Event()
        self.passed_open: bool | None = None
        self._open = threading.Event()

    def hold(self) -> None:
        self.reached.set()
        self.passed_open = self._open.wait(self.limit)
        self.passed.set()

    def open(self) -> None:
        self._open.set()

    def opened_in_time(self, timeout: float = 30.0) -> bool:
        """Open the gate and say whether the held step was still waiting for it."""
        self.open()
        return self.passed.wait(timeout) and self.passed_open is True
