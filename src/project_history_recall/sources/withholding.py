"""A source with what a person withheld taken out: forgotten sessions (and their descendants),
excluded projects and folders, and ``<private>…</private>`` spans.

The indexer (and every phase after it) only ever reads through this, so what is withheld is
never indexed, never embedded (vectors are made from the index) and comes back with no
``--force``: to the index it looks as if Hermes did not have it. Hermes's own database is
read as before and never written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

from project_history_recall.redaction import strip_private
from project_history_recall.sources import Source, SourceMessage, SourceReader, SourceSession


@dataclass(frozen=True)
class Withholding:
    """What must not be indexed right now."""

    forgotten: frozenset[str] = frozenset()
    #: Whether an exclusion rule keeps this session out (None: no rules).
    excluded: Callable[[SourceSession], bool] | None = None

    @property
    def empty(self) -> bool:
        return not self.forgotten and self.excluded is None


def withheld_ids(sessions: dict[str, SourceSession], rules: Withholding) -> set[str]:
    """Sessions the rules keep out: forgotten ones and every descendant of one (a continuation or
    a delegated subagent carries the forgotten conversation on), and excluded ones."""
    withheld: set[str] = set()
    for sid, session in sessions.items():
        if rules.excluded is not None and rules.excluded(session):
            withheld.add(sid)
            continue
        seen: set[str] = set()
        current: str | None = sid
        while current is not None and current not in seen:
            if current in rules.forgotten:
                withheld.add(sid)
                break
            seen.add(current)
            parent = sessions.get(current)
            current = parent.parent_session_id if parent is not None else None
    return withheld


class WithholdingReader:
    """A :class:`SourceReader` over another, minus what the rules withhold."""

    def __init__(self, inner: SourceReader, rules: Withholding) -> None:
        self._inner = inner
        self._hidden = set() if rules.empty else withheld_ids(inner.sessions(), rules)

    @property
    def hidden(self) -> set[str]:
        return set(self._hidden)

    def signatures(self) -> dict[str, tuple[str, str]]:
        signatures = self._inner.signatures()
        if not self._hidden:
            return signatures
        return {sid: sig for sid, sig in signatures.items() if sid not in self._hidden}

    def sessions(self, ids: Iterable[str] | None = None) -> dict[str, SourceSession]:
        return {sid: _private_title(s) for sid, s in self._inner.sessions(ids).items() if sid not in self._hidden}

    def max_message_id(self) -> int:
        return self._inner.max_message_id()

    def sessions_with_messages_after(self, message_id: int) -> set[str]:
        return self._inner.sessions_with_messages_after(message_id) - self._hidden

    def messages(self, session_id: str) -> list[SourceMessage]:
        if session_id in self._hidden:
            return []
        return [_private_message(m) for m in self._inner.messages(session_id)]

    def iter_all_messages(self) -> Iterator[tuple[str, SourceMessage]]:
        for sid, message in self._inner.iter_all_messages():
            if sid not in self._hidden:
                yield sid, _private_message(message)

    def portable(self) -> tuple[Source, Collection[str]] | None:
        """The inner reader's, without the withheld sessions, read through a withholding source
        that only takes private spans out (which sessions are withheld is decided here)."""
        found = self._inner.portable()
        if found is None:
            return None
        source, ids = found
        return (WithholdingSource(source, _no_token, Withholding),
                [sid for sid in ids if sid not in self._hidden] if self._hidden else ids)


def _private_title(session: SourceSession) -> SourceSession:
    if session.title is None or "<" not in session.title:
        return session
    return dataclasses.replace(session, title=strip_private(session.title))


def _private_message(message: SourceMessage) -> SourceMessage:
    """The message without its private spans. One without a ``<`` anywhere (nearly every
    message) is returned as it is: copying each one was a fifth of a full build's time."""
    if "<" not in message.content and (not message.tool_calls
                                       or not any("<" in c.arguments for c in message.tool_calls)):
        return message
    calls = tuple(dataclasses.replace(c, arguments=strip_private(c.arguments)) for c in message.tool_calls)
    return dataclasses.replace(message, content=strip_private(message.content), tool_calls=calls)


def _no_token() -> str:
    return ""


class WithholdingSource:
    """A :class:`Source` whose readers withhold what ``rules()`` (read at every refresh) says.
    ``token()`` is cheap and changes whenever the rules may have: it joins the source's change
    marker, so a refresh compares again although Hermes's database did not change."""

    def __init__(self, inner: Source, token: Callable[[], str], rules: Callable[[], Withholding]) -> None:
        self.inner = inner
        self.name = inner.name
        self._token = token
        self._rules = rules

    def exists(self) -> bool:
        return self.inner.exists()

    def change_marker(self) -> str | None:
        marker = self.inner.change_marker()
        return None if marker is None else f"{marker}|{self._token()}"

    def read(self) -> AbstractContextManager[WithholdingReader]:
        return self._read()

    @contextmanager
    def _read(self) -> Iterator[WithholdingReader]:
        rules = self._rules()
        with self.inner.read() as reader:
            yield WithholdingReader(reader, rules)
