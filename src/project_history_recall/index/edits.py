"""The edits in one session's messages (pure: messages and a path placer in, edits out).

Kept apart from files, git and SQL because these rules are the part that must be
right: an edit is recorded only when Hermes's own tool result says it landed
(wrong is worse than missing), and the same messages always give the same edits
(no LLM, no embeddings, no clock).

Sources, in message order:

* Hermes's ``patch`` tool, replace form (``path``/``old_string``/``new_string``):
  the unified diff Hermes returned in its result (real line numbers, fuzzy match
  included), else one built with :mod:`difflib` from the two strings.
* ``patch`` in V4A form (``mode: patch``): one edit per file operation, split on
  the headers Hermes's ``tools.patch_parser`` recognises and read with that parser,
  so the patch means exactly what Hermes applied.
* ``write_file``: the whole new content; its diff against the previous version
  is worked out at query time, when the chain before it is known.
* ``diff --git`` blocks the assistant wrote in its reply, minus the hunks an
  edit tool in the same session already recorded.
* Other agents' edit tools, read as the forms above: Claude Code's ``Edit``
  (``file_path``/``old_string``/``new_string``) and each edit of a ``MultiEdit`` as a
  replace, its ``Write`` as a write, and Codex's ``apply_patch`` (V4A text, see
  :mod:`project_history_recall.sources.codex`) as a V4A patch. Whether they landed is
  what their source says (:attr:`~project_history_recall.sources.SourceMessage.failed`:
  an ``is_error`` result, a non-zero exit code), not Hermes's result layout.

Indexing stores each edit's raw material only (the strings, Hermes's diff, the V4A
section); :func:`render_edit` turns it into a patch and a symbol when a file's
history is asked for. Parsing every diff while indexing would cost the keyword index
far more than the 20% the chain may add, for rounds nobody may ever look at.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload

from project_history_recall.index.diffs import (
    MAX_PATCH_CHARS,
    Hunk,
    diff_hunks,
    parse_unified,
    parse_v4a,
    render_patch,
    split_v4a,
    whole_file_patch,
)
from project_history_recall.index.symbols import hunks_symbol, symbol_from_text
from project_history_recall.sources import SourceMessage

#: Other agents' edit tools (see the module docstring).
AGENT_EDIT_TOOLS = ("Edit", "MultiEdit", "Write", "apply_patch")
EDIT_TOOLS = ("patch", "write_file", *AGENT_EDIT_TOOLS)


SAID_CHARS = 300


MAX_TEXT_CHARS = 200_000




# (raw path, the tool's result text or None, path is repo-relative) -> (relative path, absolute path or None).
# The result is passed whole because the paths Hermes reports in it (:func:`result_paths`)
# are worth reading only for a relative path the placer has not seen yet.
Placer = Callable[[str, str | None, bool], tuple[str, str | None]]


@dataclass(slots=True)
class Edit:
    """One recorded change of one file, as indexed. ``form`` is replace, v4a, add, delete,
    write or diff; ``raw`` is what :func:`render_edit` reads (for replace Hermes's result,
    whose diff is decoded only when shown; the file's V4A section; the quoted diff)."""

    path: str
    abs_path: str | None
    form: str
    message_id: int
    timestamp: float
    seq: int = 0
    old_text: str | None = None
    new_text: str | None = None
    raw: str | None = None
    said: str | None = None
    said_message_id: int | None = None


_HEAD_SUCCESS = re.compile(r'^\s*\{\s*"success"\s*:\s*(true|false)')


_HEAD_WRITE = re.compile(r'^\s*\{\s*"bytes_written"\s*:\s*\d+')


_PATH_KEYS = ('"resolved_path": ', '"files_modified": ', '"files_created": ', '"files_deleted": ')


_DECODER = json.JSONDecoder()


def tool_outcome(result: str | None) -> tuple[bool | None, dict]:
    """Did Hermes report the edit as done (``None``: the result cannot tell), and the result.

    ``patch`` answers ``{"success": true|false, ..., "error": ...}``; ``write_file``
    answers ``{"bytes_written": n, ...}`` and adds ``"error"`` on failure; refusals
    come from ``tool_error`` as ``{"error": ...}``. A result too big for the
    context is stored as a ``<persisted-output>`` preview of its head, so the head
    is read when the whole is not JSON.
    """
    if result is None:
        return None, {}
    try:
        data = json.loads(result)
    except (ValueError, TypeError, RecursionError):
        head = result.lstrip()
        if head.startswith("<persisted-output>"):
            head = head.split("\n", 2)[-1] if "\n" in head else ""
        match = _HEAD_SUCCESS.search(head)
        if match:
            return match.group(1) == "true", {}
        if _HEAD_WRITE.search(head) and '"error"' not in head:
            return True, {}
        return None, {}
    if not isinstance(data, dict):
        return None, {}
    if data.get("success") is False or data.get("error"):
        return False, data
    return data.get("success") is True or "bytes_written" in data, data


def tool_succeeded(result: str | None) -> bool | None:
    """:func:`tool_outcome` without parsing, for the layout Hermes's ``json.dumps`` writes.

    ``PatchResult.to_dict`` puts ``success`` first, ``WriteResult.to_dict`` puts
    ``bytes_written`` first, and either has a top-level ``"error": `` key exactly when
    it failed (inside a JSON string those quotes would be escaped). Anything else is
    parsed. Indexing reads thousands of these, and parsing every one would cost the
    keyword index more than the whole chain may."""
    if result is None:
        return None
    if result.startswith(('{"success": true', '{"bytes_written": ')):
        return '"error": ' not in result
    if result.startswith(('{"success": false', '{"error": ')):
        return False
    return tool_outcome(result)[0]


def result_paths(result: str | None, keys: Sequence[str] | None = None) -> tuple[str, ...]:
    """Absolute paths Hermes reports it wrote (``resolved_path``, ``files_modified``...),
    found by key from the end (they follow the diff) and decoded in place, not parsed whole."""
    if not result:
        return ()
    found: list[object] = []
    for key in keys or _PATH_KEYS:
        at = result.rfind(key)
        if at < 0:
            continue
        try:
            value, _ = _DECODER.raw_decode(result, at + len(key))
        except (ValueError, RecursionError):
            continue
        found.extend(value if isinstance(value, list) else [value])
    return tuple(dict.fromkeys(p for p in found if isinstance(p, str) and p))


def result_diff(result: str | None) -> str | None:
    """The unified diff a ``patch`` result carries: decoded where Hermes's layout puts it
    (``{"success": true, "diff": "...``), else from a full parse."""
    if not result:
        return None
    at = result.find('"diff": ', 0, 40)
    if at >= 0:
        try:
            value, _ = _DECODER.raw_decode(result, at + 8)
        except (ValueError, RecursionError):
            value = None
    else:
        value = tool_outcome(result)[1].get("diff")
    return value if isinstance(value, str) else None


class Hints(Sequence[str]):
    """The paths a result reports, read only when a placer asks (absolute paths never need
    them), ``resolved_path`` first (one file: the usual case) and the lists only after."""

    def __init__(self, result: str, first: str | None = None) -> None:
        self.result = result
        self.first = first if first is not None else resolved_path(result)
        self._paths: tuple[str, ...] | None = None

    def _all(self) -> tuple[str, ...]:
        if self._paths is None:
            rest = result_paths(self.result)
            self._paths = (self.first, *(p for p in rest if p != self.first)) if self.first else rest
        return self._paths

    def __len__(self) -> int:
        return len(self._all())

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return self._all()[index]

    def __iter__(self) -> Iterator[str]:
        if self._paths is None and self.first:
            yield self.first
            yield from self._all()[1:]
        else:
            yield from self._all()


def resolved_path(result: str) -> str | None:
    """``resolved_path`` sliced out directly; decoded properly only if it has escapes."""
    key = '"resolved_path": "'
    at = result.rfind(key)
    if at < 0:
        return None
    start = at + len(key)
    end = result.find('"', start)
    if end < 0:
        return None
    value = result[start:end]
    if "\\" in value:
        found = result_paths(result, _PATH_KEYS[:1])
        return found[0] if found else None
    return value


@dataclass(frozen=True)
class Rendered:
    """An edit made readable: its patch and hunks, where it is (``symbol``), text to find
    in the file when that is still unknown (``anchor``), and for whole-file forms the
    content after it."""

    patch: str
    hunks: tuple[Hunk, ...]
    symbol: str | None = None
    anchor: str | None = None
    content: str | None = None


def _new_side(hunks: Sequence[Hunk]) -> str | None:
    return next(("\n".join(h.new) for h in hunks if any(line.strip() for line in h.new)), None)


def render_edit(form: str, path: str, raw: str | None, old_text: str | None, new_text: str | None) -> Rendered:
    """The patch of one indexed edit (see :class:`Edit`); pure and deterministic."""
    if form == "replace":
        diff = result_diff(raw)
        sections = parse_unified(diff) if diff else []
        hunks = sections[0].hunks if len(sections) == 1 else tuple(diff_hunks(old_text or "", new_text or ""))
        symbol = hunks_symbol(hunks)
        anchor = None if symbol else (new_text if (new_text or "").strip() else _new_side(hunks))
        return Rendered(render_patch(path, hunks), hunks, symbol, anchor)
    if form == "write":
        patch, whole = whole_file_patch(path, new_text or "", base_known=False)
        return Rendered(patch, tuple(whole), content=new_text)
    if form == "diff":
        sections = parse_unified(raw or "")
        hunks = sections[0].hunks if sections else ()
        symbol = hunks_symbol(hunks)
        return Rendered((raw or "")[:MAX_PATCH_CHARS], hunks, symbol, None if symbol else _new_side(hunks))
    ops = parse_v4a(raw or "") or []
    op = ops[0] if ops else None
    if form == "add":
        content = op.content if op and op.content is not None else (new_text or "")
        patch, whole = whole_file_patch(path, content, base_known=True)
        return Rendered(patch, tuple(whole), content=content)
    if form == "delete":
        return Rendered(render_patch(path, [], new=None), (), content="")
    hunks = op.hunks if op else ()
    symbol = next((s for s in (symbol_from_text(h.funcname) for h in hunks) if s), None) or hunks_symbol(hunks)
    return Rendered(render_patch(path, hunks), hunks, symbol, None if symbol else _new_side(hunks))


def string_argument(arguments: str, key: str) -> str | None:
    """One string argument read straight from the JSON text, when it is plain (no escapes);
    None sends the caller to a full parse.

    Sound for the flat objects Hermes's file tools take: inside a JSON string every quote
    is escaped, so an unescaped ``"key": "`` occurs only as a real key."""
    for head in (f'"{key}": "', f'"{key}":"'):
        at = arguments.find(head)
        if at >= 0:
            start = at + len(head)
            end = arguments.find('"', start)
            value = arguments[start:end] if end >= 0 else ""
            return value if value and "\\" not in value else None
    return None


def _parse(arguments: str | None) -> dict:
    """A tool call's arguments (``{}`` when they are not a JSON object)."""
    try:
        data = json.loads(arguments) if arguments else {}
    except (ValueError, TypeError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _cap_text(text: str | None) -> str | None:
    return text if text is not None and len(text) <= MAX_TEXT_CHARS else None


def _said(text: str) -> str:
    text = " ".join(text[: SAID_CHARS * 4].split())  # a pasted log needs no full pass
    return text if len(text) <= SAID_CHARS else text[: SAID_CHARS - 1].rstrip() + "…"


@dataclass
class _Seen:
    """The changed lines already recorded for one file in this session."""

    plus: set[str] = field(default_factory=set)
    minus: set[str] = field(default_factory=set)
    written: bool = False


class _Session:
    """Walks one session's messages in order, collecting edits."""

    def __init__(self, place: Placer) -> None:
        self.place = place
        self.edits: list[Edit] = []

    def add(self, edit: Edit) -> None:
        edit.seq = len(self.edits)
        self.edits.append(edit)

    def _seen(self, path: str) -> _Seen:
        """What this session's earlier edits of ``path`` changed (rendered only when a
        reply quotes a diff, which is rare)."""
        seen = _Seen()
        for edit in self.edits:
            if edit.path != path:
                continue
            rendered = render_edit(edit.form, edit.path, edit.raw, edit.old_text, edit.new_text)
            for line in (c for h in rendered.hunks for c in h.changed):
                (seen.plus if line[0] == "+" else seen.minus).add(line[1:].strip())
            if edit.form in ("write", "add"):
                seen.plus.update(line.strip() for line in (rendered.content or "").splitlines())
                seen.written = True
        return seen

    @staticmethod
    def _covered(seen: _Seen, hunk: Hunk) -> bool:
        """Was every change in ``hunk`` already recorded by an edit tool in this session?
        (The assistant often shows the diff of what it just applied.)"""
        for line in hunk.changed:
            text = line[1:].strip()
            if not text:
                continue
            if line[0] == "+" and text not in seen.plus:
                return False
            if line[0] == "-" and text not in seen.minus and not seen.written:
                return False
        return True

    # -- one form each --

    def replace_with_diff(self, message: SourceMessage, path: str, result: str) -> None:
        """The result is kept whole; its diff is decoded only when shown."""
        if path.strip():
            rel, abs_path = self.place(path, result, False)
            self.add(Edit(rel, abs_path, "replace", message.id, message.timestamp, raw=result))

    def replace(self, message: SourceMessage, args: dict, result: str) -> None:
        """A replace whose result carries no diff (or not where Hermes puts it): the two strings."""
        raw, old, new = args.get("path"), args.get("old_string"), args.get("new_string")
        if not (isinstance(raw, str) and raw.strip() and isinstance(old, str) and isinstance(new, str)):
            return
        if old == new:
            return
        rel, abs_path = self.place(raw, result, False)
        if result_diff(result) and len(result) <= MAX_PATCH_CHARS:
            self.add(Edit(rel, abs_path, "replace", message.id, message.timestamp, raw=result))
        else:
            self.add(Edit(rel, abs_path, "replace", message.id, message.timestamp, old_text=_cap_text(old),
                          new_text=_cap_text(new)))

    def v4a(self, message: SourceMessage, args: dict, result: str) -> None:
        text = args.get("patch")
        if not isinstance(text, str) or not text.strip():
            return
        for kind, path, section in split_v4a(text):
            rel, abs_path = self.place(path, result, False)
            self.add(Edit(rel, abs_path, kind if kind in ("add", "delete") else "v4a", message.id,
                          message.timestamp, raw=section[:MAX_PATCH_CHARS]))

    def write(self, message: SourceMessage, args: dict, result: str) -> None:
        raw, content = args.get("path"), args.get("content")
        if not (isinstance(raw, str) and raw.strip() and isinstance(content, str)):
            return
        # The result cannot say whether the file existed (``dirs_created`` is true whenever
        # ``mkdir -p`` ran), so the previous version is unknown until the chain knows it.
        rel, abs_path = self.place(raw, result, False)
        self.add(Edit(rel, abs_path, "write", message.id, message.timestamp, new_text=_cap_text(content)))

    def agent_edit(self, message: SourceMessage, name: str, args: dict, result: str) -> None:
        """One of :data:`AGENT_EDIT_TOOLS`, as the Hermes form it means."""
        path = args.get("file_path")
        if name == "apply_patch":
            self.v4a(message, args, result)
        elif name == "Write":
            self.write(message, {"path": path, "content": args.get("content")}, result)
        else:
            edits = args.get("edits") if name == "MultiEdit" else [args]
            for edit in edits if isinstance(edits, list) else []:
                if isinstance(edit, dict):
                    self.replace(message, {"path": path, "old_string": edit.get("old_string"),
                                           "new_string": edit.get("new_string")}, result)

    def quoted_diffs(self, message: SourceMessage) -> None:
        for diff in parse_unified(message.content):
            if diff.path is None:
                continue
            rel, abs_path = self.place(diff.path, None, True)
            seen = self._seen(rel)
            fresh = [h for h in diff.hunks if not self._covered(seen, h)]
            if not fresh:
                continue
            patch = f"diff --git a/{rel} b/{rel}\n" + render_patch(rel, fresh, old="a" if diff.old_path else None,
                                                                  new="b" if diff.new_path else None)
            self.add(Edit(rel, abs_path, "diff", message.id, message.timestamp, raw=patch))


def extract_edits(messages: Sequence[SourceMessage], place: Placer) -> list[Edit]:
    """Every edit in a session, in order, each with the user's words that asked for it.

    One pass finds the assistant messages that may edit (and the user message before
    each) and every tool result; only those messages are then looked at closely."""
    results: dict[str | None, str] = {}
    landed: dict[str | None, bool] = {}  # what a source itself says of a call's outcome
    candidates: list[tuple[SourceMessage, SourceMessage | None]] = []
    asked: SourceMessage | None = None
    for message in messages:
        role = message.role
        if role == "tool":
            results[message.tool_call_id] = message.content
            if message.failed is not None:
                landed[message.tool_call_id] = not message.failed
        elif role == "assistant":
            calls = message.tool_calls
            edits = bool(calls) and (calls[0].name in EDIT_TOOLS or any(c.name in EDIT_TOOLS for c in calls[1:]))
            if edits or "diff --git" in message.content:
                candidates.append((message, asked))
        elif role == "user" and message.content and not message.content.isspace():
            asked = message
    walk = _Session(place)
    said: tuple[str, int] | None = None
    for message, asking in candidates:
        before = len(walk.edits)
        for call in message.tool_calls:
            if call.name not in EDIT_TOOLS:
                continue
            result = results.get(call.id) if call.id else None
            if result is None or not (landed[call.id] if call.id in landed else tool_succeeded(result) is True):
                continue
            if call.name in AGENT_EDIT_TOOLS:
                walk.agent_edit(message, call.name, _parse(call.arguments), result)
                continue
            if call.name == "patch" and result.startswith('{"success": true, "diff": "'):
                # Hermes's diff says what really changed (fuzzy match included): a replace
                # needs nothing from its arguments but the path, read without a parse.
                mode, path = string_argument(call.arguments, "mode"), string_argument(call.arguments, "path")
                if mode in (None, "replace") and path and len(result) <= MAX_PATCH_CHARS:
                    walk.replace_with_diff(message, path, result)
                    continue
            args = _parse(call.arguments)
            mode = args.get("mode") or "replace"
            if call.name == "write_file":
                walk.write(message, args, result)
            elif mode == "patch":
                walk.v4a(message, args, result)
            elif mode == "replace":
                walk.replace(message, args, result)
        if "diff --git" in message.content:
            walk.quoted_diffs(message)
        if asking is not None and len(walk.edits) > before:
            if said is None or said[1] != asking.id:
                said = (_said(asking.content), asking.id)
            for edit in walk.edits[before:]:
                edit.said, edit.said_message_id = said
    return walk.edits
