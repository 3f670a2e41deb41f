"""What of a session is indexed, as entries (pure): its title, what the user typed, what the
assistant said (never its reasoning), and each tool call's name and arguments, a short head
of its result riding along as context; and the text the tokenizer sees for each."""

from __future__ import annotations

import json
from typing import NamedTuple

from project_history_recall.sources import SourceMessage, SourceSession
from project_history_recall.tokenizer import index_text

#: The kinds of entry someone said, as against a tool call or a title.
SPOKEN_KINDS = ("user", "assistant")
#: Every kind of entry.
KINDS = (*SPOKEN_KINDS, "tool_call", "title")
MAX_ENTRY_CHARS = 32_000
RESULT_HEAD_CHARS = 240


class Entry(NamedTuple):
    """A tuple, so that a worker process can send entries back as plain tuples (a sixth of the
    pickling of a dataclass) and they still compare equal to the ones read here."""

    message_id: int | None
    position: int
    kind: str
    role: str
    tool_name: str | None
    timestamp: float
    text: str
    context: str | None = None


def searchable_text(kind: str, text: str) -> str:
    """What the tokenizer sees for an entry: tool arguments without their JSON keys."""
    if kind != "tool_call":
        return text
    name, _, arguments = text.partition(" ")
    try:
        values = _flatten(json.loads(arguments))
    except (ValueError, TypeError, RecursionError):
        return text
    return " ".join([name, *values])


def _flatten(value: object) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _flatten(v)]
    if isinstance(value, list):
        return [s for v in value for s in _flatten(v)]
    if value is None or isinstance(value, bool):
        return []
    return [str(value)]


def entry_tokens(kind: str, text: str) -> str:
    return index_text(searchable_text(kind, text))


#: This plugin's own reading tools. A past recall query repeats the words of what it looked
#: for, so it would outrank the history it searched: their calls are not indexed.
OWN_READ_TOOLS = frozenset({"project_history_search", "project_history", "project_history_index",
                            "project_code_history"})


def session_entries(session: SourceSession, messages: list[SourceMessage]) -> list[Entry]:
    """What is worth finding in a session: its title, what the user typed, what the
    assistant said (never its reasoning), and each tool call's name and arguments
    (except :data:`OWN_READ_TOOLS`). Tool results are not indexed; a short head rides
    along as the call's context."""
    results = {m.tool_call_id: m.content for m in messages if m.role == "tool" and m.tool_call_id}
    entries: list[Entry] = []
    if session.title:
        entries.append(Entry(None, -1, "title", "title", None, session.started_at, session.title[:500]))
    for position, message in enumerate(messages):
        if message.role == "user" and message.content.strip():
            entries.append(Entry(message.id, position, "user", "user", None, message.timestamp,
                                 _cap(message.content)))
        elif message.role == "assistant":
            if message.content.strip():
                entries.append(Entry(message.id, position, "assistant", "assistant", None,
                                     message.timestamp, _cap(message.content)))
            for call in message.tool_calls:
                if call.name in OWN_READ_TOOLS:
                    continue
                head = results.get(call.id)
                entries.append(Entry(
                    message.id, position, "tool_call", "assistant", call.name, message.timestamp,
                    _cap(f"{call.name} {call.arguments}"),
                    head[:RESULT_HEAD_CHARS] if head else None,
                ))
    return entries


def _cap(text: str) -> str:
    text = text.replace("\x00", "")
    if not text.isascii():  # only non-ASCII text can hold a lone surrogate
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text[:MAX_ENTRY_CHARS]
