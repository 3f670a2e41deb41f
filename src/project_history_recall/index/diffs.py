"""Patches as text (pure): unified diffs and Hermes's V4A patches, read and written.

:func:`parse_unified` reads ``diff --git`` / ``---``/``+++`` blocks into hunks,
:func:`split_v4a` and :func:`parse_v4a` read the V4A form Hermes's ``patch`` tool
takes (the same headers ``tools.patch_parser`` recognises), and :func:`render_patch`,
:func:`diff_hunks` and :func:`whole_file_patch` write hunks back as a patch.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

MAX_PATCH_CHARS = 100_000


@dataclass(frozen=True)
class Hunk:
    """One ``@@`` hunk: its header line, git's function context (or the V4A hint), and
    its lines with their ``' '``/``'-'``/``'+'`` prefixes."""

    header: str
    funcname: str
    lines: tuple[str, ...]

    def side(self, keep: str) -> list[str]:
        return [line[1:] for line in self.lines if line[:1] in (" ", keep)]

    @property
    def old(self) -> list[str]:
        return self.side("-")

    @property
    def new(self) -> list[str]:
        return self.side("+")

    @property
    def changed(self) -> list[str]:
        return [line for line in self.lines if line[:1] in ("-", "+")]

    def text(self) -> str:
        return "\n".join((self.header, *self.lines))


@dataclass(frozen=True)
class FileDiff:
    old_path: str | None
    new_path: str | None
    hunks: tuple[Hunk, ...]

    @property
    def path(self) -> str | None:
        return self.new_path or self.old_path


_DIFF_GIT = re.compile(r"^diff --git (\S+) (\S+)\s*$")


_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@ ?(.*)$")


_V4A_HUNK = re.compile(r"^@@(?:\s*(.*?)\s*@@)?\s*$")


_GIT_HEADERS = ("index ", "old mode", "new mode", "deleted file mode", "new file mode", "similarity index",
                "dissimilarity index", "rename from", "rename to", "copy from", "copy to", "Binary files")


def _diff_path(value: str) -> str | None:
    value = value.split("\t", 1)[0].strip()
    if value == "/dev/null" or not value:
        return None
    return value[2:] if value.startswith(("a/", "b/")) else value


def _read_hunks(lines: list[str], i: int) -> tuple[list[Hunk], int]:
    """Hunks from ``lines[i]`` on, each consumed by the counts in its header, so a diff
    quoted in prose ends where its numbers say it does."""
    hunks: list[Hunk] = []
    n = len(lines)
    while i < n:
        match = _HUNK.match(lines[i])
        if not match:
            loose = _V4A_HUNK.match(lines[i])
            if not loose:
                break
            j = i + 1
            while j < n and lines[j][:1] in (" ", "-", "+") and not lines[j].startswith(("--- ", "+++ ")):
                j += 1
            hunks.append(Hunk(lines[i], (loose.group(1) or "").strip(), tuple(lines[i + 1 : j])))
            i = j
            continue
        want_old = int(match.group(1)) if match.group(1) is not None else 1
        want_new = int(match.group(2)) if match.group(2) is not None else 1
        body: list[str] = []
        j, got_old, got_new = i + 1, 0, 0
        while j < n and (got_old < want_old or got_new < want_new):
            line = lines[j] or " "  # chat text often drops the space of a blank context line
            mark = line[0]
            if mark == "\\":
                j += 1
                continue
            if mark not in " -+":
                break
            got_old += mark in " -"
            got_new += mark in " +"
            body.append(line)
            j += 1
        if got_old < want_old or got_new < want_new:
            break
        while j < n and lines[j].startswith("\\"):
            j += 1
        hunks.append(Hunk(lines[i], match.group(3).strip(), tuple(body)))
        i = j
    return hunks, i


def parse_unified(text: str) -> list[FileDiff]:
    """Every file section of a unified diff in ``text``: ``diff --git`` blocks, and bare
    ``---``/``+++`` sections (what Hermes's tools return). Malformed hunks end a section."""
    lines = text.splitlines()
    files: list[FileDiff] = []
    i, n = 0, len(lines)
    while i < n:
        git = _DIFF_GIT.match(lines[i])
        bare = lines[i].startswith("--- ") and i + 1 < n and lines[i + 1].startswith("+++ ")
        if not (git or bare):
            i += 1
            continue
        old_path = new_path = None
        if git:
            old_path, new_path = _diff_path(git.group(1)), _diff_path(git.group(2))
            i += 1
            while i < n and lines[i].startswith(_GIT_HEADERS):
                if lines[i].startswith("deleted file mode"):
                    new_path = None
                elif lines[i].startswith("new file mode"):
                    old_path = None
                i += 1
        if i + 1 < n and lines[i].startswith("--- ") and lines[i + 1].startswith("+++ "):
            old_path, new_path = _diff_path(lines[i][4:]), _diff_path(lines[i + 1][4:])
            i += 2
        hunks, i = _read_hunks(lines, i)
        if hunks and (old_path or new_path):
            files.append(FileDiff(old_path, new_path, tuple(hunks)))
    return files


def render_patch(path: str, hunks: Sequence[Hunk], *, old: str | None = "a", new: str | None = "b") -> str:
    head = f"--- {old + '/' + path if old else '/dev/null'}\n+++ {new + '/' + path if new else '/dev/null'}"
    return "\n".join([head, *(h.text() for h in hunks)])[:MAX_PATCH_CHARS]


def diff_hunks(old_text: str, new_text: str) -> list[Hunk]:
    """Hunks of a :mod:`difflib` unified diff between two texts (3 lines of context)."""
    lines = list(difflib.unified_diff(old_text.splitlines(), new_text.splitlines(), "a", "b", lineterm=""))
    hunks, _ = _read_hunks(lines[2:], 0)
    return hunks


def whole_file_patch(path: str, content: str, *, base_known: bool) -> tuple[str, list[Hunk]]:
    """A write whose previous content is not (yet) known: every line added, saying so."""
    lines = content.splitlines()
    hunk = Hunk(f"@@ -0,0 +1,{len(lines)} @@", "", tuple("+" + line for line in lines))
    old = None if base_known else "a"
    patch = render_patch(path, [hunk], old=old)
    if not base_known:
        patch = patch.replace(f"--- a/{path}", f"--- a/{path} (previous content unknown)", 1)
    return patch, [hunk]


# The operation headers of tools/patch_parser.py, in the same forms.
_V4A_OP = re.compile(r"^\*\*\*\s*(Update|Add|Delete|Move)\s+File:\s*(.+)$", re.MULTILINE)


_V4A_END = re.compile(r"^.*\*\*\*\s*End Patch.*$", re.MULTILINE)


def split_v4a(text: str) -> list[tuple[str, str, str]]:
    """``(kind, path, section)`` per operation of a V4A patch, each section a V4A patch of
    its own (header and hunks), cut on the headers Hermes's parser matches. Cheap: the
    hunks are read only when the history is asked for."""
    end = _V4A_END.search(text)
    body = text[: end.start()] if end else text
    heads = list(_V4A_OP.finditer(body))
    ops = []
    for i, head in enumerate(heads):
        stop = heads[i + 1].start() if i + 1 < len(heads) else len(body)
        path = head.group(2).strip()
        if head.group(1) == "Move":
            continue
        ops.append((head.group(1).lower(), path, body[head.start() : stop].rstrip("\n")))
    return ops


@dataclass(frozen=True)
class V4AOp:
    kind: str  # update | add | delete | move
    path: str
    hunks: tuple[Hunk, ...]
    content: str | None = None


def parse_v4a(text: str) -> list[V4AOp] | None:
    """The operations of a V4A patch as Hermes's own parser reads them (None when it
    cannot: then nothing is shown rather than a guess)."""
    try:
        from tools.patch_parser import parse_v4a_patch
    except Exception:
        return None
    try:
        operations, error = parse_v4a_patch(text)
    except Exception:
        return None
    if error:
        return None
    ops = []
    for op in operations:
        kind = str(op.operation.value)
        hunks = tuple(
            Hunk(f"@@ {h.context_hint} @@" if h.context_hint else "@@", h.context_hint or "",
                 tuple(f"{line.prefix}{line.content}" for line in h.lines))
            for h in op.hunks)
        content = None
        if kind == "add":
            content = "\n".join(line[1:] for h in hunks for line in h.lines if line.startswith("+"))
        ops.append(V4AOp(kind, str(op.file_path), hunks, content))
    return ops
