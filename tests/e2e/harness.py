"""End-to-end harness: run the real ``hermes -z`` against the scripted fake LLM, offline.

No pytest import here, so it can be used from a script or a REPL too::

    from tests.e2e.harness import make_hermes_home, run_hermes_oneshot, tool_call_script
    home = make_hermes_home(tmp / "hermes", plugins_enabled=["project-history-recall"])
    res = run_hermes_oneshot(home, "what did we decide?", cwd=repo,
                             script=tool_call_script("project_history_search",
                                                     {"query": "retry policy", "mode": "keyword"}))
    res.returncode, res.stdout, res.requests, res.tool_results("project_history_search")

The fake server and Hermes run together inside ONE ``unshare -n`` network namespace
(see ``ns_runner.py``), where only loopback exists: nothing can reach the internet,
and nothing binds a port on the host.  Needs root (or user namespaces) for ``unshare -n``.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
NS_RUNNER = HERE / "ns_runner.py"
FAKE_MODEL = "fake-model"

# Environment for every Hermes subprocess the tests start.
#  - HERMES_DISABLE_LAZY_INSTALLS: without it (and security.allow_lazy_installs: false)
#    building the tool list runs ``pip install edge-tts`` into the venv (tts check_fn).
#  - HERMES_NONINTERACTIVE / CI: no prompts.
#  - NO_COLOR / COLUMNS: stable, unwrapped Rich output for ``hermes plugins list``.
OFFLINE_ENV: dict[str, str] = {
    "HERMES_DISABLE_LAZY_INSTALLS": "1",
    "HERMES_NONINTERACTIVE": "1",
    "NO_COLOR": "1",
    "COLUMNS": "200",
    "PYTHONDONTWRITEBYTECODE": "1",
}
# Variables from the developer's shell that would change which model/profile Hermes uses.
_DROP_ENV_PREFIXES = ("HERMES_", "OPENAI_", "OPENROUTER_", "ANTHROPIC_", "NOUS_", "CUSTOM_BASE_URL")


def hermes_executable() -> str:
    """The ``hermes`` console script of the running interpreter's environment."""
    return console_script("hermes")


def hermes_env(hermes_home: Path | str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A clean environment for a Hermes subprocess bound to ``hermes_home``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DROP_ENV_PREFIXES)}
    env.update(OFFLINE_ENV)
    env["HERMES_HOME"] = str(hermes_home)
    if extra:
        env.update(extra)
    return env


def offline_config(
    plugins_enabled: Iterable[str] = (),
    *,
    model: str = FAKE_MODEL,
    base_url: str = "http://127.0.0.1:9/v1",
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """config.yaml content that lets ``hermes -z`` run offline against the fake server.

    ``base_url`` is rewritten to the fake server's real port by ``ns_runner.py``.
    """
    cfg: dict[str, Any] = {
        "model": {
            "provider": "custom",
            "base_url": base_url,
            "default": model,
            "api_key": "x",
            # Known context window: no model-metadata lookup.
            "context_length": 128000,
        },
        "plugins": {"enabled": list(plugins_enabled)},
        # No runtime ``pip install`` of optional backends (edge-tts etc.).
        "security": {"allow_lazy_installs": False},
        "agent": {
            # No python/pip toolchain probe subprocesses in the system prompt.
            "environment_probe": False,
        },
    }
    if extra:
        _deep_merge(cfg, extra)
    return cfg


def _deep_merge(dst: dict[str, Any], src: Mapping[str, Any]) -> None:
    for k, v in src.items():
        if isinstance(v, Mapping) and isinstance(dst.get(k), dict):
            _deep_merge(dst[k], v)
        else:
            dst[k] = v


def write_config(hermes_home: Path | str, cfg: Mapping[str, Any]) -> Path:
    home = Path(hermes_home)
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.yaml"
    path.write_text(yaml.safe_dump(dict(cfg), sort_keys=False), encoding="utf-8")
    return path


def make_hermes_home(
    path: Path | str,
    plugins_enabled: Iterable[str] = (),
    extra_config: Mapping[str, Any] | None = None,
) -> Path:
    """Create a HERMES_HOME with an offline config.yaml; returns its path."""
    home = Path(path)
    write_config(home, offline_config(plugins_enabled, extra=extra_config))
    return home


# -- scripts -------------------------------------------------------------------


def tool_call_script(
    tool: str,
    arguments: Mapping[str, Any],
    final: str = "Here is what I found.",
    *,
    aux_content: str = "Fake title",
) -> dict[str, Any]:
    """Script: first agent request -> one call of ``tool``; next -> ``final`` text."""
    return {
        "model": FAKE_MODEL,
        "turns": [{"tool_calls": [{"name": tool, "arguments": dict(arguments)}]}, {"content": final}],
        "aux_content": aux_content,
    }


def plain_answer_script(text: str = "Hello from the fake model.") -> dict[str, Any]:
    return {"model": FAKE_MODEL, "turns": [{"content": text}]}


# -- results -------------------------------------------------------------------


@dataclass
class OneshotResult:
    returncode: int | None
    stdout: str
    stderr: str
    requests: list[dict[str, Any]]
    timed_out: bool = False
    error: str | None = None
    server_log: str = ""
    work_dir: Path | None = None
    timings: dict[str, Any] = field(default_factory=dict)

    def main_requests(self) -> list[dict[str, Any]]:
        """Agent-loop chat-completion requests (the ones that carried ``tools``)."""
        return [r for r in self.requests if r.get("kind") == "main"]

    def advertised_tools(self) -> list[str]:
        """Tool names Hermes offered the model in its first agent request."""
        reqs = self.main_requests()
        if not reqs:
            return []
        return [t.get("function", {}).get("name", "") for t in reqs[0]["body"].get("tools") or []]

    def tool_messages(self, tool: str | None = None) -> list[dict[str, Any]]:
        """``role: tool`` messages Hermes sent back to the model (last agent request).

        With ``tool`` given, only results of calls to that tool (matched through the
        assistant message's ``tool_calls`` ids).
        """
        reqs = self.main_requests()
        if not reqs:
            return []
        messages = reqs[-1]["body"].get("messages") or []
        names: dict[str, str] = {}
        for m in messages:
            if m.get("role") == "assistant":
                for c in m.get("tool_calls") or []:
                    names[c.get("id", "")] = (c.get("function") or {}).get("name", "")
        out = []
        for m in messages:
            if m.get("role") != "tool":
                continue
            if tool is None or names.get(m.get("tool_call_id", "")) == tool or m.get("name") == tool:
                out.append(m)
        return out

    def tool_results(self, tool: str) -> list[Any]:
        """Contents of ``tool``'s results, JSON-decoded when they are JSON."""
        out = []
        for m in self.tool_messages(tool):
            content = message_text(m.get("content"))
            try:
                out.append(json.loads(content))
            except (TypeError, ValueError):
                out.append(content)
        return out

    def describe(self) -> str:
        """Human-readable summary for assertion messages."""
        kinds = [(r.get("method"), r.get("path"), r.get("kind")) for r in self.requests]
        return (
            f"returncode={self.returncode} timed_out={self.timed_out} error={self.error}\n"
            f"timings={self.timings}\nrequests={kinds}\n"
            f"--- stdout ---\n{self.stdout[-3000:]}\n--- stderr ---\n{self.stderr[-3000:]}\n"
            f"--- server ---\n{self.server_log[-2000:]}\nwork_dir={self.work_dir}"
        )


def message_text(content: Any) -> str:
    """Text of an OpenAI message ``content`` (string or list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text", "") if isinstance(p, dict) else str(p) for p in content
        )
    return "" if content is None else str(content)


# -- running -------------------------------------------------------------------


def require_netns() -> None:
    """Skip (locally) or fail (in CI) when a private network namespace cannot be made."""
    import pytest

    problem = netns_problem()
    if problem:
        if os.environ.get("CI"):
            pytest.fail(f"e2e tests need `unshare -n` in CI: {problem}")
        pytest.skip(problem)


def netns_problem() -> str | None:
    """None when ``unshare -n`` works here, else why not."""
    if not shutil.which("unshare"):
        return "unshare(1) not found"
    try:
        r = subprocess.run(
            ["unshare", "-n", "true"], capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare -n failed: {exc}"
    if r.returncode != 0:
        return f"unshare -n failed: {r.stderr.strip() or r.returncode}"
    return None


def run_in_netns(
    hermes_home: Path | str,
    cmd: Sequence[str],
    cwd: Path | str,
    script: Mapping[str, Any],
    *,
    timeout: float = 120.0,
    env: Mapping[str, str] | None = None,
    work_dir: Path | str | None = None,
) -> OneshotResult:
    """Run ``cmd`` with the fake LLM server, both inside one fresh network namespace."""
    home = Path(hermes_home).resolve()
    if not (home / "config.yaml").exists():
        raise FileNotFoundError(f"{home}/config.yaml missing (use make_hermes_home)")
    work = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="phr-e2e-", dir=home.parent))
    work.mkdir(parents=True, exist_ok=True)
    (work / "script.json").write_text(json.dumps(script), encoding="utf-8")
    for name in ("requests.jsonl", "result.json", "port", "stdout.txt", "stderr.txt"):
        (work / name).unlink(missing_ok=True)

    full_env = hermes_env(home, env)
    if env is None or "HOME" not in env:
        # A private HOME: Hermes never reads or writes the developer's ~/.hermes or dotfiles.
        fake_home = work / "home"
        fake_home.mkdir(exist_ok=True)
        full_env["HOME"] = str(fake_home)

    runner = [
        "unshare",
        "-n",
        sys.executable,
        str(NS_RUNNER),
        "--work",
        str(work),
        "--hermes-home",
        str(home),
        "--cwd",
        str(cwd),
        "--timeout",
        str(timeout),
        "--",
        *cmd,
    ]
    t0 = time.monotonic()
    proc = subprocess.run(
        runner,
        env=full_env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout + 60,
    )
    wall = round(time.monotonic() - t0, 3)

    result_file = work / "result.json"
    meta: dict[str, Any] = json.loads(result_file.read_text()) if result_file.exists() else {}
    error = meta.get("error")
    if proc.returncode != 0 or not meta:
        error = (error or "") + f" ns_runner exit {proc.returncode}: {proc.stderr[-2000:]}"
    requests = []
    log = work / "requests.jsonl"
    if log.exists():
        requests = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]

    def _read(name: str) -> str:
        p = work / name
        return p.read_text(encoding="utf-8", errors="replace") if p.exists() else ""

    return OneshotResult(
        returncode=meta.get("returncode"),
        stdout=_read("stdout.txt"),
        stderr=_read("stderr.txt"),
        requests=requests,
        timed_out=bool(meta.get("timed_out")),
        error=error or None,
        server_log=_read("server.log"),
        work_dir=work,
        timings={
            "wall_seconds": wall,
            "command_seconds": meta.get("command_seconds"),
            "total_seconds": meta.get("total_seconds"),
        },
    )


def run_hermes_oneshot(
    hermes_home: Path | str,
    prompt: str,
    cwd: Path | str,
    script: Mapping[str, Any],
    *,
    timeout: float = 120.0,
    env: Mapping[str, str] | None = None,
    hermes_args: Sequence[str] = (),
    work_dir: Path | str | None = None,
) -> OneshotResult:
    """``hermes [hermes_args] -z PROMPT`` from ``cwd``, offline, against the scripted fake LLM."""
    cmd = [hermes_executable(), *hermes_args, "-z", prompt]
    return run_in_netns(hermes_home, cmd, cwd, script, timeout=timeout, env=env, work_dir=work_dir)


def console_script(name: str) -> str:
    """A console script (``hermes``, ``phr``) of the running interpreter's environment."""
    cand = Path(sys.executable).parent / name
    if cand.exists():
        return str(cand)
    found = shutil.which(name)
    if not found:
        raise FileNotFoundError(f"{name} executable not found next to sys.executable or on PATH")
    return found


def run_command(
    hermes_home: Path | str,
    cmd: Sequence[str],
    *,
    cwd: Path | str | None = None,
    timeout: float = 120.0,
    env: Mapping[str, str] | None = None,
    netns: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run a non-agent command (``hermes plugins list``, ``phr install``) for ``hermes_home``.

    With ``netns`` (default) it runs under ``unshare -n`` (no network at all, loopback down).
    """
    full_env = hermes_env(hermes_home, env)
    if env is None or "HOME" not in env:
        fake_home = Path(hermes_home).parent / "fake-home"
        fake_home.mkdir(parents=True, exist_ok=True)
        full_env["HOME"] = str(fake_home)
    argv = (["unshare", "-n"] if netns else []) + list(cmd)
    return subprocess.run(
        argv,
        cwd=str(cwd) if cwd else None,
        env=full_env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# -- state.db helpers ----------------------------------------------------------


def state_db_path(hermes_home: Path | str) -> Path:
    return Path(hermes_home) / "state.db"


def seed_session(
    hermes_home: Path | str,
    session_id: str,
    cwd: Path | str | None,
    messages: Sequence[tuple[str, str]],
    *,
    source: str = "cli",
    git_repo_root: Path | str | None = None,
    git_branch: str | None = None,
    title: str | None = None,
    end: bool = True,
) -> list[int]:
    """Write an earlier session into ``HERMES_HOME/state.db`` through Hermes's own ``SessionDB``.

    ``messages`` are ``(role, content)`` pairs.  Returns the message row ids.
    Needs ``HERMES_HOME`` only for the path: the db path is passed explicitly.
    """
    from hermes_state import SessionDB

    db = SessionDB(state_db_path(hermes_home))
    try:
        db.create_session(session_id, source, model=FAKE_MODEL, cwd=str(cwd) if cwd else None)
        if cwd:
            db.update_session_cwd(
                session_id,
                str(cwd),
                git_branch=git_branch,
                git_repo_root=str(git_repo_root) if git_repo_root else None,
            )
        ids = [db.append_message(session_id, role, content) for role, content in messages]
        if title:
            db.set_session_title(session_id, title)
        if end:
            db.end_session(session_id, "user_exit")
        return ids
    finally:
        db.close()


def session_rows(hermes_home: Path | str) -> list[dict[str, Any]]:
    """All rows of the ``sessions`` table (plain sqlite3, read-only)."""
    path = state_db_path(hermes_home)
    if not path.exists():
        return []
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute("SELECT * FROM sessions ORDER BY started_at")]
    finally:
        con.close()


def new_sessions(hermes_home: Path | str, known_ids: Iterable[str]) -> list[dict[str, Any]]:
    """Sessions that are not in ``known_ids`` (e.g. the one a ``hermes -z`` run created)."""
    known = set(known_ids)
    return [r for r in session_rows(hermes_home) if r["id"] not in known]


def git_init(path: Path | str) -> Path:
    """A real git repository with one commit (no global git config needed)."""
    p = Path(path)
    p.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    subprocess.run(["git", "init", "-q", "-b", "main", str(p)], check=True, env=env)
    (p / "README.md").write_text("project\n", encoding="utf-8")
    subprocess.run(["git", "-C", str(p), "add", "README.md"], check=True, env=env)
    subprocess.run(["git", "-C", str(p), "commit", "-q", "-m", "init"], check=True, env=env)
    return p
