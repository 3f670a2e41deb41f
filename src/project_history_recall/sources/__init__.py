"""Where histories come from.

The indexer only sees the :class:`Source` protocol: sessions with a change
signature, the messages of one session, and a high-water mark for new messages.
Hermes's ``state.db`` is the first source; Claude Code's and Codex CLI's JSONL
transcripts (:mod:`.claude_code`, :mod:`.codex`, over :mod:`.transcripts`) are others,
joined by :mod:`.composite` without touching the index, search or tools.

Session ids stay one namespace: Hermes's ids as Hermes writes them, ``claude-<uuid>`` and
``codex-<uuid>`` for the others (so ``@session:`` links and unique prefixes still resolve,
and a link says which agent it came from).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class SourceSession:
    id: str
    source: str
    started_at: float
    parent_session_id: str | None = None
    ended_at: float | None = None
    end_reason: str | None = None
    cwd: str | None = None
    git_branch: str | None = None
    git_repo_root: str | None = None
    title: str | None = None
    archived: bool = False
    hidden: bool = False
    message_count: int = 0
    rewind_count: int = 0

    #: Everything whose change means the indexed copy is stale, and the part of it
    #: that means the messages must be re-read. Sources compute both (Hermes's in SQL).
    signature: str = ""
    content_signature: str = ""


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str


@dataclass(slots=True)
class SourceMessage:
    """One message as a source gives it. Read as immutable, but not frozen: a frozen dataclass's
    ``__init__`` sets each field through ``object.__setattr__``, and that was a sixth of the time
    of reading Hermes's messages in a full build (frozen 0.9 µs a message, this 0.2)."""

    id: int
    role: str
    content: str
    timestamp: float
    tool_calls: tuple[ToolCall, ...] = field(default_factory=tuple)
    tool_name: str | None = None
    tool_call_id: str | None = None
    #: For a tool result: whether the source itself says the call failed (Claude Code's
    #: ``is_error``, Codex's exit code). None: only the result's text can tell (Hermes).
    failed: bool | None = None


#: The agents whose histories are read, as ``sessions.source`` names them. Hermes's own
#: sessions keep Hermes's platform there (``cli``, ``telegram``...).
FILE_AGENTS = ("claude-code", "codex")
#: How their session ids begin (never how a Hermes id begins: Hermes ids start with a date).
TRANSCRIPT_PREFIXES = ("claude-", "codex-")


def agent_of(source: str | None) -> str:
    """Which agent a session's ``source`` column belongs to: ``hermes``, ``claude-code`` or ``codex``."""
    return source if source in FILE_AGENTS else "hermes"


class SourceReader(Protocol):
    """A consistent read view of one source (one read transaction)."""

    def signatures(self) -> dict[str, tuple[str, str]]:
        """``{session id: (signature, content signature)}`` — the cheap comparison."""
        ...

    def sessions(self, ids: Iterable[str] | None = None) -> dict[str, SourceSession]: ...

    def max_message_id(self) -> int: ...

    def sessions_with_messages_after(self, message_id: int) -> set[str]: ...

    def messages(self, session_id: str) -> list[SourceMessage]: ...

    def iter_all_messages(self) -> Iterator[tuple[str, SourceMessage]]: ...

    def portable(self) -> tuple[Source, Collection[str]] | None:
        """A source that can be pickled, whose readers (in another process, in their own
        snapshot) give the same messages as this reader for the sessions returned with it: a
        large build has worker processes read and prepare those. None when no session can be
        read elsewhere (a transcript read writes its parse tables in the index)."""
        ...


class Source(Protocol):
    name: str

    def exists(self) -> bool: ...

    def change_marker(self) -> str | None:
        """A cheap token that changes whenever anything was committed; None when it
        cannot be trusted right now (then the full comparison runs)."""
        ...

    def read(self) -> AbstractContextManager[SourceReader]: ...
