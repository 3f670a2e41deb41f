"""Codex CLI's rollouts: ``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``
(``$CODEX_HOME/sessions`` when set), read-only.

Lines are ``{timestamp, type, payload}``. ``session_meta`` names the session (``id``,
``cwd``, ``git.branch``); ``response_item`` carries the conversation: ``message`` items
(``input_text``/``output_text`` parts; the environment and instruction blocks Codex
injects are not what anyone said), tool calls (``function_call``, ``custom_tool_call``,
``local_shell_call``) and their outputs. Reasoning is never read; ``event_msg`` lines repeat
what ``response_item`` says and are skipped.

Every way Codex applies a patch (the ``apply_patch`` tool, or ``apply_patch`` run through
the shell) becomes one ``apply_patch`` call whose ``patch`` argument is the V4A text, so the
edit chain reads it as Hermes's own V4A patches; its output's exit code says whether it
landed.

``turn_context`` may move the session to another folder. Each message belongs to the cwd
in force, so a change of cwd after messages starts a continuation session
(``codex-seg2@<id>``, ``seg3``...; the parent is the segment before), attributed by its own cwd.
(Not ``codex-<id>.2``: an extension of the first id would make every prefix of it ambiguous.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

from project_history_recall.sources import SourceMessage, ToolCall
from project_history_recall.sources.transcripts import (
    IdMaker,
    LineResult,
    SessionFacts,
    agent_home,
    matching,
    text_parts,
    timestamp,
    tool_call,
)

NAME = "codex"
PREFIX = "codex-"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
_PATCH = re.compile(r"\*\*\* Begin Patch.*?(?:\*\*\* End Patch|\Z)", re.S)
_EXIT = re.compile(r"^\s*Exit code:\s*(-?\d+)", re.M)
#: What Codex puts in a user message that the person did not type.
INJECTED = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<turn_aborted>")
KNOWN = frozenset({"session_meta", "response_item", "turn_context", "event_msg", "compacted"})
QUIET_ITEMS = frozenset({"reasoning", "web_search_call", "ghost_snapshot"})
CALLS = ("function_call", "custom_tool_call", "local_shell_call")
OUTPUTS = ("function_call_output", "custom_tool_call_output")


def default_root() -> Path:
    return agent_home("CODEX_HOME", ".codex", "sessions")


class CodexFormat:
    name = NAME

    def files(self, root: Path) -> Iterator[str]:
        yield from matching(root, "*", "*", "*", "rollout-*.jsonl")

    def parse(self, path: Path, state: dict, sessions: dict[str, SessionFacts], record: dict,
              ids: IdMaker) -> LineResult:
        kind, payload = record.get("type"), record.get("payload")
        if kind not in KNOWN:
            return LineResult(skipped="unknown_type")
        if not isinstance(payload, dict):
            return LineResult(skipped="malformed")
        when = timestamp(record.get("timestamp")) or 0.0
        if kind == "session_meta":
            self._meta(path, state, sessions, payload, when)
        elif kind == "turn_context":
            cwd = payload.get("cwd")
            if isinstance(cwd, str) and cwd:
                self._move(path, state, sessions, cwd, when)
        elif kind == "response_item":
            return self._item(path, state, sessions, payload, when, ids)
        return LineResult()

    # -- which session a line belongs to --

    @staticmethod
    def _base(path: Path, state: dict) -> str:
        if "base" not in state:
            found = _UUID.search(path.stem)
            state["base"] = PREFIX + (found.group(0).lower() if found else path.stem)
        return str(state["base"])

    def _current(self, path: Path, state: dict, sessions: dict[str, SessionFacts], when: float) -> str:
        base = self._base(path, state)
        segment = int(state.get("segment", 1))
        sid = _segment(base, segment)
        if sid not in sessions:
            sessions[sid] = SessionFacts(started_at=when, cwd=state.get("cwd"), git_branch=state.get("branch"),
                                         parent=_segment(base, segment - 1) if segment > 1 else None)
        return sid

    def _meta(self, path: Path, state: dict, sessions: dict[str, SessionFacts], payload: dict, when: float) -> None:
        if "base" not in state and isinstance(payload.get("id"), str) and payload["id"]:
            state["base"] = PREFIX + payload["id"]
        git = payload.get("git")
        branch = git.get("branch") if isinstance(git, dict) else None
        if isinstance(branch, str) and branch:
            state["branch"] = branch
        sid = self._current(path, state, sessions, timestamp(payload.get("timestamp")) or when)
        facts = sessions[sid]
        facts.git_branch = state.get("branch") or facts.git_branch
        cwd = payload.get("cwd")
        if isinstance(cwd, str) and cwd:
            self._move(path, state, sessions, cwd, when)

    def _move(self, path: Path, state: dict, sessions: dict[str, SessionFacts], cwd: str, when: float) -> None:
        """The cwd in force from here on; after messages in another folder, a new segment."""
        sid = self._current(path, state, sessions, when)
        if state.get("cwd") == cwd:
            return
        state["cwd"] = cwd
        if sid in state.get("spoken", []) and sessions[sid].cwd != cwd:
            state["segment"] = int(state.get("segment", 1)) + 1
            sid = self._current(path, state, sessions, when)
        sessions[sid].cwd = cwd

    # -- the conversation --

    def _item(self, path: Path, state: dict, sessions: dict[str, SessionFacts], item: dict, when: float,
              ids: IdMaker) -> LineResult:
        kind = item.get("type")
        if kind in QUIET_ITEMS:
            return LineResult()
        message = self._message(item, when, ids)
        if message is None:
            return LineResult(skipped=None if kind == "message" or kind in CALLS or kind in OUTPUTS
                              else "unknown_type")
        sid = self._current(path, state, sessions, when)
        if not sessions[sid].started_at:
            sessions[sid].started_at = when
        spoken = state.setdefault("spoken", [])
        if sid not in spoken:
            spoken.append(sid)
        return LineResult([(sid, message)])

    def _message(self, item: dict, when: float, ids: IdMaker) -> SourceMessage | None:
        kind = item.get("type")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant"):
                return None
            parts = item.get("content")
            if isinstance(parts, list):
                parts = [p for p in parts if not (isinstance(p, dict) and isinstance(p.get("text"), str)
                                                  and p["text"].lstrip().startswith(INJECTED))]
            text = text_parts(parts)
            mid = ids.next() if text.strip() else None
            return None if mid is None else SourceMessage(mid, str(role), text, when)
        if kind in CALLS:
            call = self._call(item)
            mid = ids.next() if call is not None else None
            return None if mid is None or call is None else SourceMessage(mid, "assistant", "", when, (call,))
        if kind in OUTPUTS:
            text, failed = _output(item.get("output"))
            mid = ids.next()
            return None if mid is None else SourceMessage(mid, "tool", text, when,
                                                          tool_call_id=str(item.get("call_id") or ""), failed=failed)
        return None

    @staticmethod
    def _call(item: dict) -> ToolCall | None:
        call_id = item.get("call_id") or item.get("id")
        name = item.get("name")
        arguments: object
        if item.get("type") == "local_shell_call":
            action = item.get("action")
            command = action.get("command") if isinstance(action, dict) else None
            name, arguments = "shell", {"command": command}
        elif item.get("type") == "custom_tool_call":
            arguments = {"input": item.get("input")}
        else:
            raw = item.get("arguments")
            try:
                arguments = json.loads(raw) if isinstance(raw, str) else raw
            except (ValueError, RecursionError):
                arguments = {"arguments": raw}
        if not isinstance(name, str) or not name:
            return None
        patch = _patch_of(name, arguments)
        if patch is not None:
            return tool_call(call_id, "apply_patch", {"patch": patch})
        return tool_call(call_id, name, arguments if arguments is not None else {})


def _segment(base: str, segment: int) -> str:
    return base if segment == 1 else f"{PREFIX}seg{segment}@{base[len(PREFIX):]}"


def _patch_of(name: str, arguments: object) -> str | None:
    """The V4A text of an ``apply_patch``, however Codex ran it."""
    values: list[object] = []
    if isinstance(arguments, dict):
        values = [arguments.get("input"), arguments.get("patch"), arguments.get("command")]
    elif isinstance(arguments, str):
        values = [arguments]
    for value in values:
        if isinstance(value, list):
            if name in ("shell", "exec_command", "local_shell") and value and value[0] not in ("apply_patch",) and \
                    not any(isinstance(v, str) and "apply_patch" in v for v in value):
                continue
            value = "\n".join(v for v in value if isinstance(v, str))
        elif name != "apply_patch" and not (isinstance(value, str) and "apply_patch" in value):
            continue
        if isinstance(value, str):
            found = _PATCH.search(value)
            if found:
                return found.group(0)
    return None


def _output(output: object) -> tuple[str, bool | None]:
    """A tool output's text, and whether it failed (an exit code, Codex's error words)."""
    text = output if isinstance(output, str) else text_parts(output) if output is not None else ""
    code: int | None = None
    try:
        data = json.loads(text) if text.lstrip().startswith("{") else None
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict):
        meta = data.get("metadata")
        exit_code = meta.get("exit_code") if isinstance(meta, dict) else None
        code = exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None
        if isinstance(data.get("output"), str):
            text = data["output"]
    else:
        found = _EXIT.search(text[:200])
        code = int(found.group(1)) if found else None
    body = text.lstrip()
    if (code is not None and code != 0) or body.startswith(("apply_patch verification failed", "error:", "Error:")):
        return text, True
    if code == 0 or body.startswith("Success."):
        return text, False
    return text, None
