"""The house's rules, read from the source: one-way imports and rooms of a readable size.

Every ``project_history_recall`` import counts — at module level, inside a function, or
under ``TYPE_CHECKING`` — because each one is a dependency a reader has to follow.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "project_history_recall"
ROOT = Path(__file__).resolve().parent.parent / "src" / PACKAGE
MAX_LINES = 600

#: Which rooms may import which. A room is a top-level module or folder of the package.
#: Faces sit on the facade, the facade on the services, the services on storage, and
#: storage on the pure rooms; nothing below imports anything above it.
FACES = {"faces"}
FACADE = {"recall"}
SERVICES = {"services", "search"}
STORAGE = {"index", "sources", "embeddings", "hermes_home", "settings"}
PURE = {"arguments", "attribution", "chunking", "errors", "locks", "paths", "quoting", "redaction", "tokenizer",
        "when", "workers"}
LAYERS = [FACES, FACADE, SERVICES, STORAGE, PURE]


def module_name(path: Path) -> str:
    parts = [PACKAGE, *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def imports_of(name: str) -> set[str]:
    """The package's modules that ``name`` imports (``from pkg import module`` names the module)."""
    path = MODULES[name]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                found.add(candidate if candidate in MODULES else target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: imports_of(name) for name in MODULES}


def room(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer(name: str) -> int:
    return next(i for i, rooms in enumerate(LAYERS) if room(name) in rooms)


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_inside_the_package():
    assert find_cycle(GRAPH) is None


def test_every_module_belongs_to_a_room():
    assert [m for m in MODULES if m != PACKAGE and not any(room(m) in rooms for rooms in LAYERS)] == []


@pytest.mark.parametrize("name", sorted(m for m in MODULES if m != PACKAGE))
def test_imports_only_point_down(name):
    upward = sorted(t for t in GRAPH[name] if t != PACKAGE and layer(t) < layer(name))
    assert upward == [], f"{name} imports a room above it"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_over_the_size_limit(name):
    assert len(MODULES[name].read_text(encoding="utf-8").splitlines()) <= MAX_LINES
