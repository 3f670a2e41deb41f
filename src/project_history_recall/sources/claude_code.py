"""Claude Code's transcripts: ``~/.claude/projects/<encoded-cwd>/<session-uuid>.jsonl``
(``$CLAUDE_CONFIG_DIR/projects`` when set), read-only.

One JSON object per line. ``user`` and ``assistant`` lines are the conversation
(``message.content`` a string or a list of ``text``, ``thinking``, ``tool_use`` and
``tool_result`` parts); ``summary`` lines title the session; ``system``,
``file-history-snapshot`` and the like are not conversation. Thinking is never read.
Each ``tool_result`` becomes a tool message carrying ``is_error`` as
:attr:`~project_history_recall.sources.SourceMessage.failed`, which is how an errored
``Edit`` drops out of the edit chain.

Session ids are ``claude-<file stem>`` (the session's uuid). Sidechain lines (a subagent's
transcript, in its own file under the session's folder or inline) form a hidden child session
of their session, as Hermes's delegated subagents are: ``claude-<file stem>@<session uuid>``
(``claude-agent-…@…``), or ``claude-sidechain@<uuid>`` inline: never an extension of the
parent's id, so every prefix of that still names the parent alone. The project comes from
``cwd`` (the first one seen) by the same rules as Hermes sessions; the branch from
``gitBranch`` (the latest one).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from project_history_recall.sources import SourceMessage
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

NAME = "claude-code"
PREFIX = "claude-"
CONVERSATION = ("user", "assistant")
#: Types Claude Code writes that are not conversation (not counted as unknown).
NOT_CONVERSATION = frozenset({"summary", "system", "file-history-snapshot", "queue-operation", "progress",
                              "attachment"})


def default_root() -> Path:
    return agent_home("CLAUDE_CONFIG_DIR", ".claude", "projects")


class ClaudeCodeFormat:
    name = NAME

    def files(self, root: Path) -> Iterator[str]:
        """Session files one folder down, subagent files below a session's own folder: one
        listing of each project folder finds both."""
        for folder in matching(root, "*"):
            try:
                listing = os.scandir(folder)
            except OSError:
                continue
            with listing:
                for entry in listing:
                    if entry.name.endswith(".jsonl"):
                        yield entry.path
                    elif entry.is_dir(follow_symlinks=False):
                        yield from matching(entry.path, "subagents", "*.jsonl")

    def parse(self, path: Path, state: dict, sessions: dict[str, SessionFacts], record: dict,
              ids: IdMaker) -> LineResult:
        kind = record.get("type")
        if kind == "summary":
            summary = record.get("summary")
            titled = state.get("last") or (None if path.parent.name == "subagents" else f"{PREFIX}{path.stem}")
            if isinstance(summary, str) and summary.strip() and titled:
                self._facts(path, sessions, titled, record).title = summary.strip()[:500]
            return LineResult()
        if kind not in CONVERSATION:
            return LineResult(skipped=None if kind in NOT_CONVERSATION else "unknown_type")
        message = record.get("message")
        if not isinstance(message, dict):
            return LineResult(skipped="malformed")
        sid = state["last"] = self._session_id(path, record)
        facts = self._facts(path, sessions, sid, record)
        when = timestamp(record.get("timestamp")) or facts.started_at
        if not facts.started_at:
            facts.started_at = when
        cwd, branch = record.get("cwd"), record.get("gitBranch")
        if isinstance(cwd, str) and cwd and not facts.cwd:
            facts.cwd = cwd
        if isinstance(branch, str) and branch and branch != "HEAD":
            facts.git_branch = branch
        if record.get("isMeta") is True:
            return LineResult()
        content = message.get("content")
        if kind == "user":
            return LineResult(self._user(sid, content, when, ids))
        return LineResult(self._assistant(sid, content, when, ids))

    @staticmethod
    def _session_id(path: Path, record: dict) -> str:
        owner = record.get("sessionId") if isinstance(record.get("sessionId"), str) else None
        stem = path.stem
        if record.get("isSidechain") is True:
            # Never an extension of the parent's id, so a prefix of that still names one session.
            if owner is None or owner == stem:
                return f"{PREFIX}sidechain@{stem}"
            return f"{PREFIX}{stem}@{owner}"
        return f"{PREFIX}{stem}"

    @staticmethod
    def _facts(path: Path, sessions: dict[str, SessionFacts], sid: str, record: dict) -> SessionFacts:
        """A sidechain is a hidden child of the session it ran in."""
        facts = sessions.get(sid)
        if facts is None:
            facts = sessions[sid] = SessionFacts()
            if sid != f"{PREFIX}{path.stem}":
                owner = record.get("sessionId")
                facts.parent = f"{PREFIX}{owner if isinstance(owner, str) and owner else path.stem}"
                facts.hidden = True
        return facts

    @staticmethod
    def _user(sid: str, content: object, when: float, ids: IdMaker) -> list[tuple[str, SourceMessage]]:
        if isinstance(content, str):
            parts: list = [{"type": "text", "text": content}]
        elif isinstance(content, list):
            parts = content
        else:
            return []
        out: list[tuple[str, SourceMessage]] = []
        texts: list[str] = [p["text"] for p in parts if isinstance(p, dict) and p.get("type") == "text"
                            and isinstance(p.get("text"), str)]
        if any(t.strip() for t in texts):
            mid = ids.next()
            if mid is not None:
                out.append((sid, SourceMessage(mid, "user", "\n".join(texts), when)))
        for part in parts:
            if not (isinstance(part, dict) and part.get("type") == "tool_result"):
                continue
            mid = ids.next()
            if mid is None:
                break
            out.append((sid, SourceMessage(mid, "tool", text_parts(part.get("content")), when,
                                           tool_call_id=str(part.get("tool_use_id") or ""),
                                           failed=part.get("is_error") is True)))
        return out

    @staticmethod
    def _assistant(sid: str, content: object, when: float, ids: IdMaker) -> list[tuple[str, SourceMessage]]:
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            return []
        texts, calls = [], []
        for part in content:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif part.get("type") == "tool_use" and isinstance(part.get("name"), str) and part["name"]:
                calls.append(tool_call(part.get("id"), part["name"], part.get("input") or {}))
        mid = ids.next()
        if mid is None or not (calls or any(t.strip() for t in texts)):
            return []
        return [(sid, SourceMessage(mid, "assistant", "\n".join(texts), when, tuple(calls)))]
