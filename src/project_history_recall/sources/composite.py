"""Several sources as one: what the indexer (through the withholding wrapper) reads.

Session ids do not collide (Hermes's own, ``claude-…``, ``codex-…``), so the union of the
sources' sessions is one namespace, and each id is asked of the source that has it. The
message high-water mark is Hermes's (the transcript sources have none: their files' changes
show in their content signatures).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager

from project_history_recall.sources import Source, SourceMessage, SourceReader, SourceSession


class CompositeReader:
    def __init__(self, readers: Sequence[SourceReader]) -> None:
        self._readers = list(readers)
        #: Each reader's signatures, in the readers' order: the first that has a session owns it.
        self._parts: list[tuple[SourceReader, dict[str, tuple[str, str]]]] | None = None
        self._signatures: dict[str, tuple[str, str]] | None = None

    def signatures(self) -> dict[str, tuple[str, str]]:
        return dict(self._all_signatures())

    def _all_signatures(self) -> dict[str, tuple[str, str]]:
        """The union, the first reader's signature winning; with one source that has sessions
        (the usual case) its signatures as they are, without a copy."""
        if self._signatures is None:
            self._parts = [(reader, reader.signatures()) for reader in self._readers]
            found = [signatures for _, signatures in self._parts if signatures]
            if len(found) <= 1:
                self._signatures = found[0] if found else {}
            else:
                self._signatures = {}
                for signatures in reversed(found):
                    self._signatures.update(signatures)
        return self._signatures

    def _of(self, sid: str) -> SourceReader | None:
        """Asked once per session read: a lookup in each source's signatures, no copy."""
        self._all_signatures()
        assert self._parts is not None
        return next((reader for reader, signatures in self._parts if sid in signatures), None)

    def sessions(self, ids: Iterable[str] | None = None) -> dict[str, SourceSession]:
        result: dict[str, SourceSession] = {}
        if ids is None:
            for reader in self._readers:
                for sid, session in reader.sessions().items():
                    result.setdefault(sid, session)
            return result
        wanted: dict[int, list[str]] = {}
        for sid in ids:
            owner = self._of(sid)
            if owner is not None:
                wanted.setdefault(self._readers.index(owner), []).append(sid)
        for position, group in wanted.items():
            result.update(self._readers[position].sessions(group))
        return result

    def max_message_id(self) -> int:
        return max((r.max_message_id() for r in self._readers), default=0)

    def sessions_with_messages_after(self, message_id: int) -> set[str]:
        return {sid for r in self._readers for sid in r.sessions_with_messages_after(message_id)}

    def messages(self, session_id: str) -> list[SourceMessage]:
        owner = self._of(session_id)
        return owner.messages(session_id) if owner is not None else []

    def iter_all_messages(self) -> Iterator[tuple[str, SourceMessage]]:
        for reader in self._readers:
            yield from reader.iter_all_messages()

    def portable(self) -> tuple[Source, Collection[str]] | None:
        """The first reader's that has one (Hermes's: the transcript readers have none), with
        the sessions that reader owns."""
        for reader in self._readers:
            found = reader.portable()
            if found is not None:
                source, ids = found
                return source, [sid for sid in ids if self._of(sid) is reader]
        return None


class CompositeSource:
    """The sources that are on, each read only when its folder or database exists."""

    name = "all"

    def __init__(self, sources: Sequence[Source]) -> None:
        self.sources = list(sources)

    def exists(self) -> bool:
        return any(s.exists() for s in self.sources)

    def change_marker(self) -> str | None:
        markers = []
        for source in self.sources:
            if not source.exists():
                markers.append(f"{source.name}:-")
                continue
            marker = source.change_marker()
            if marker is None:
                return None
            markers.append(marker)
        return "||".join(markers)

    @contextmanager
    def read(self) -> Iterator[CompositeReader]:
        with ExitStack() as stack:
            yield CompositeReader([stack.enter_context(s.read()) for s in self.sources if s.exists()])
