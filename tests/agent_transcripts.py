"""Claude Code and Codex CLI transcript files as those agents write them (one JSON object a
line), under tmp folders that ``CLAUDE_CONFIG_DIR`` / ``CODEX_HOME`` point at."""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field
from pathlib import Path

CLOCK = datetime.datetime(2026, 3, 1, 9, 0, tzinfo=datetime.UTC)


def _stamp(minute: int) -> str:
    return (CLOCK + datetime.timedelta(minutes=minute)).isoformat().replace("+00:00", "Z")


@dataclass
class Claude:
    """One Claude Code session file (``projects/<encoded cwd>/<uuid>.jsonl``)."""

    root: Path  # $CLAUDE_CONFIG_DIR
    uuid: str
    cwd: Path
    branch: str = "main"
    sidechain_of: str | None = None
    agent: str | None = None
    minute: int = 0
    _n: int = field(default=0, init=False)

    @property
    def path(self) -> Path:
        folder = self.root / "projects" / str(self.cwd).replace("/", "-")
        if self.sidechain_of:
            return folder / self.sidechain_of / "subagents" / f"{self.agent}.jsonl"
        return folder / f"{self.uuid}.jsonl"

    @property
    def session_id(self) -> str:
        if self.sidechain_of:
            return f"claude-{self.agent}@{self.sidechain_of}"
        return f"claude-{self.uuid}"

    def line(self, record: dict, *, newline: bool = True) -> dict:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + ("\n" if newline else ""))
        return record

    def _event(self, kind: str, content: object) -> dict:
        self._n += 1
        self.minute += 1
        return {"type": kind, "sessionId": self.sidechain_of or self.uuid, "uuid": f"{self.uuid}-{self._n}",
                "parentUuid": f"{self.uuid}-{self._n - 1}" if self._n > 1 else None,
                "timestamp": _stamp(self.minute), "cwd": str(self.cwd), "gitBranch": self.branch,
                "isSidechain": self.sidechain_of is not None, "version": "1.0.80",
                "message": {"role": kind, "content": content}}

    def user(self, text: str) -> dict:
        return self.line(self._event("user", text))

    def say(self, text: str, *, thinking: str | None = None) -> dict:
        parts: list[dict] = [{"type": "thinking", "thinking": thinking, "signature": "x"}] if thinking else []
        return self.line(self._event("assistant", [*parts, {"type": "text", "text": text}]))

    def tool(self, call_id: str, name: str, arguments: dict, result: str = "ok", *, error: bool = False) -> None:
        self.line(self._event("assistant", [{"type": "tool_use", "id": call_id, "name": name, "input": arguments}]))
        self.line(self._event("user", [{"type": "tool_result", "tool_use_id": call_id, "content": result,
                                        "is_error": error}]))

    def summary(self, text: str) -> None:
        self.line({"type": "summary", "summary": text, "leafUuid": f"{self.uuid}-1"})


@dataclass
class Codex:
    """One Codex CLI rollout (``sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl``)."""

    root: Path  # $CODEX_HOME
    uuid: str
    cwd: Path
    branch: str = "main"
    minute: int = 0

    @property
    def path(self) -> Path:
        return self.root / "sessions" / "2026" / "03" / "01" / f"rollout-2026-03-01T09-00-00-{self.uuid}.jsonl"

    @property
    def session_id(self) -> str:
        return f"codex-{self.uuid}"

    def line(self, kind: str, payload: dict) -> None:
        self.minute += 1
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"timestamp": _stamp(self.minute), "type": kind, "payload": payload}) + "\n")

    def meta(self) -> None:
        self.line("session_meta", {"id": self.uuid, "timestamp": _stamp(0), "cwd": str(self.cwd),
                                   "originator": "codex_cli_rs", "cli_version": "0.40.0",
                                   "git": {"commit_hash": "abc", "branch": self.branch}})
        self.line("response_item", {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": f"<environment_context>\n  <cwd>{self.cwd}</cwd>\n</environment_context>"}]})

    def turn(self, cwd: Path) -> None:
        self.line("turn_context", {"cwd": str(cwd), "approval_policy": "on-request", "model": "gpt-5"})

    def user(self, text: str) -> None:
        self.line("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text",
                                                                                       "text": text}]})
        self.line("event_msg", {"type": "user_message", "message": text, "kind": "plain"})

    def say(self, text: str) -> None:
        self.line("response_item", {"type": "reasoning", "summary": [{"type": "summary_text", "text": "hidden"}],
                                    "encrypted_content": "x"})
        self.line("response_item", {"type": "message", "role": "assistant", "content": [{"type": "output_text",
                                                                                          "text": text}]})

    def patch(self, call_id: str, patch: str, *, exit_code: int = 0) -> None:
        self.line("response_item", {"type": "custom_tool_call", "status": "completed", "call_id": call_id,
                                    "name": "apply_patch", "input": patch})
        output = "Success. Updated the following files:\nM x\n" if exit_code == 0 else "patch did not apply"
        self.line("response_item", {"type": "custom_tool_call_output", "call_id": call_id, "output": json.dumps(
            {"output": output, "metadata": {"exit_code": exit_code, "duration_seconds": 0.1}})})
