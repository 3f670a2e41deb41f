"""Which function or class a change is in (pure, by the shape of the lines).

A light, language-agnostic reading of definitions (``def``, ``class``, ``function``,
``fn``, methods, arrow functions) and indentation: good enough to name the enclosing
symbol of a hunk, and never a parser that can fail on a file it does not know.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from project_history_recall.index.diffs import Hunk

_MODIFIERS = (r"(?:(?:export|default|public|private|protected|internal|static|async|abstract|final|override|"
              r"virtual|inline|extern|unsafe|sealed|pub(?:\([^)]*\))?)\s+)*")


_DEFINITION = re.compile(
    r"^(?P<indent>[ \t]*)" + _MODIFIERS
    + r"(?P<kw>def|class|function\*?|func|fn|interface|struct|enum|trait|impl|type|module)\s+"
    r"(?:\([^)]*\)\s*)?(?P<name>[A-Za-z_$][\w$]*)")


_ARROW = re.compile(
    r"^(?P<indent>[ \t]*)(?:export\s+)?(?:const|let|var)\s+(?P<name>[A-Za-z_$][\w$]*)\s*(?::[^=]+)?=\s*"
    r"(?:async\s+)?(?:function\b|\([^)]*\)\s*(?::[^=]+)?=>|[A-Za-z_$][\w$]*\s*=>)")


_METHOD = re.compile(
    r"^(?P<indent>[ \t]*)" + _MODIFIERS + r"(?:[\w<>\[\],.?*&]+\s+)*(?P<name>[A-Za-z_$][\w$]*)\s*\([^;]*\)"
    r"\s*(?:(?:->|:)\s*[^{;]+|throws\s+[\w., ]+|const|noexcept)?\s*\{\s*$")


_NOT_METHODS = frozenset({"if", "for", "while", "switch", "catch", "return", "else", "do", "try", "with", "elif",
                          "when", "match", "foreach", "using", "lock", "synchronized", "new", "sizeof"})


_CONTAINERS = frozenset({"class", "struct", "interface", "trait", "impl", "enum", "module", "type"})


_CALLABLE = re.compile(r"([A-Za-z_$][\w$]*)\s*\(")


@dataclass(frozen=True)
class Definition:
    name: str
    indent: int
    container: bool


def _indent(line: str) -> int:
    expanded = line.expandtabs(4)
    return len(expanded) - len(expanded.lstrip())


def definition(line: str) -> Definition | None:
    """The function or class ``line`` opens, if it opens one."""
    match = _DEFINITION.match(line)
    if match:
        return Definition(match.group("name"), _indent(line), match.group("kw") in _CONTAINERS)
    match = _ARROW.match(line) or _METHOD.match(line)
    if match and match.group("name") not in _NOT_METHODS:
        return Definition(match.group("name"), _indent(line), False)
    return None


def symbol_from_text(text: str) -> str | None:
    """A name from git's hunk function context or a V4A ``@@ hint @@``."""
    text = text.strip()
    if not text:
        return None
    found = definition(text)
    if found:
        return found.name
    match = _CALLABLE.search(text)
    return match.group(1) if match and match.group(1) not in _NOT_METHODS else None


def enclosing(lines: Sequence[str], index: int) -> str | None:
    """The function or class that line ``index`` is part of: the line itself when it opens
    one, else the nearest preceding definition indented less (qualified by its class)."""
    if not 0 <= index < len(lines):
        return None
    target = lines[index]
    if target.lstrip().startswith("@"):  # a decorator belongs to the definition below it
        for line in lines[index + 1 : index + 6]:
            found = definition(line)
            if found:
                return _qualify(lines, index, found)
    found = definition(target)
    if found:
        return _qualify(lines, index, found)
    indent = _indent(target) if target.strip() else None
    for j in range(index - 1, -1, -1):
        found = definition(lines[j])
        if found and (indent is None or found.indent < indent):
            return _qualify(lines, j, found)
    return None


def _qualify(lines: Sequence[str], index: int, found: Definition) -> str:
    if found.container or found.indent == 0:
        return found.name
    for j in range(index - 1, -1, -1):
        outer = definition(lines[j])
        if outer and outer.indent < found.indent:
            return f"{outer.name}.{found.name}" if outer.container else found.name
    return found.name


def hunk_symbol(hunk: Hunk) -> str | None:
    """Where a hunk is: what its first change sits in (from its own lines), else git's
    function context, else a definition among the changed lines."""
    body = [line[1:] for line in hunk.lines]
    marks = [line[:1] for line in hunk.lines]
    changed = [i for i, m in enumerate(marks) if m in "-+"]
    first = next((i for i in changed if body[i].strip()), changed[0] if changed else None)
    if first is not None:
        before = [body[i] for i in range(first) if marks[i] != "+"]
        found = enclosing([*before, body[first]], len(before))
        if found:
            return found
    hinted = symbol_from_text(hunk.funcname)
    if hinted:
        return hinted
    for i in changed:
        opened = definition(body[i])
        if opened:
            return opened.name
    return None


def hunks_symbol(hunks: Sequence[Hunk]) -> str | None:
    return next((s for s in (hunk_symbol(h) for h in hunks) if s), None)


def symbol_at(file_text: str, anchor: str) -> str | None:
    """The definition around the one place ``anchor`` occurs in ``file_text`` (None when it
    occurs nowhere or more than once: a guess would be worse than nothing)."""
    anchor = anchor.strip("\n")
    if not anchor.strip() or file_text.count(anchor) != 1:
        return None
    start = file_text.index(anchor)
    lines = file_text.splitlines()
    first = file_text.count("\n", 0, start)
    offset = next((k for k, line in enumerate(anchor.splitlines()) if line.strip()), 0)
    return enclosing(lines, first + offset)


def changed_line_symbol(old_text: str, new_text: str) -> str | None:
    """For a whole-file write with a known previous version: where its first change is."""
    new_lines = new_text.splitlines()
    matcher = difflib.SequenceMatcher(None, old_text.splitlines(), new_lines, autojunk=False)
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        index = next((j for j in range(j1, j2) if new_lines[j].strip()), j1)
        return enclosing(new_lines, min(index, len(new_lines) - 1)) if new_lines else None
    return None
