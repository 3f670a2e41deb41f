"""Issue 15, item 4: isolation holds for every model-facing tool, not just search.

Hypothesis draws random layouts (``bench.stress.isolation.generate``: nested explicit projects,
repos with linked worktrees, ``-extra`` siblings sharing a name prefix, symlinked cwds, moved
sessions, deleted folders, Home) and adds NFC/NFD twin folders, titles and recorded edits. For
a sample of askers it calls, through Hermes's own registry, every model-facing read —
``project_history_search`` (hybrid, semantic against a fake embedding server on 127.0.0.1,
``scope: all``), ``project_history`` with every operation (``session`` by another project's full
id, ``@session:`` link and shared prefix; ``timeline`` with both scopes; ``projects``;
``status``), ``project_history_index`` and ``project_code_history`` (by relative path, by another
project's absolute path, by its token) — and checks that no id, title or text of a session of
another project (for Home: of any other session) is in the answer. What the asker itself typed
into the call (an id it was given, a token it searched) is taken out of the answer before
looking. The expected projects are the layout generator's, never the plugin's resolver.
"""

from __future__ import annotations

import json
import os
import random
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from builders import dispatch, register_plugin, tool_call
from fakes.embedding_server import FakeEmbeddingServer

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.stress import isolation, world  # noqa: E402 - needs the repo root on sys.path

LAYOUTS = 5  # hypothesis examples; each is a whole layout (a few seconds on a busy machine)
ASKERS = 6  # askers per layout
LINK = "@session:"
TOTALS = {"layouts": 0, "calls": 0, "violations": 0, "examples": []}


@pytest.fixture(scope="module")
def server():
    with FakeEmbeddingServer(dim=8) as fake:
        yield fake
    TOTALS["examples"] = TOTALS["examples"][:5]
    print(f"\nisolation property: {TOTALS['layouts']} layouts x calls = {TOTALS['calls']} calls, "
          f"{TOTALS['violations']} violations {TOTALS['examples'] or ''}")


def augment(layout: isolation.Layout, rng: random.Random) -> dict[str, str]:
    """NFC/NFD twin folders with a session each (one twin maybe an explicit project), titles and
    ``write_file`` edits. Returns each session's title token."""
    from hermes_cli import projects_db
    from hermes_state import SessionDB

    base = Path(os.path.realpath(layout.root)) / "w"
    twins = []
    for form in ("NFC", "NFD"):
        folder = base / unicodedata.normalize(form, "café-notes")
        folder.mkdir()
        key = isolation._key(str(folder))
        layout.folders[key] = isolation.Folder(key, None, key)
        twins.append(key)
    if rng.random() < 0.5:
        with projects_db.connect_closing(layout.home / "projects.db") as conn:
            pid = projects_db.create_project(conn, name="Café", folders=[twins[0]])
        layout.projects.append((pid, "Café", [twins[0]]))
    titles: dict[str, str] = {}
    db = SessionDB(db_path=layout.home / "state.db")
    try:
        for n, cwd in enumerate(twins):
            spec = isolation.SessionSpec(f"twin-{n}", cwd, token=f"uq{rng.randrange(10**9):09d}x")
            db.create_session(spec.id, "cli", cwd=cwd)
            db.append_message(spec.id, "user", f"{isolation.SHARED} notes {spec.token}", timestamp=1_767_500_000.0)
            layout.sessions.append(spec)
        for spec in layout.sessions:
            if rng.random() < 0.5:
                titles[spec.id] = f"tt{spec.token}{spec.id}"
                db.set_session_title(spec.id, f"Title {titles[spec.id]}")
            if spec.cwd and rng.random() < 0.5:
                call = tool_call(f"c-{spec.id}", "write_file",
                                 {"path": f"{spec.cwd.rstrip('/')}/notes.txt", "content": f"{spec.token} edit\n"})
                db.append_message(spec.id, "assistant", "", tool_calls=[call], timestamp=1_767_600_000.0)
                db.append_message(spec.id, "tool", json.dumps({"bytes_written": 20}), tool_call_id=f"c-{spec.id}",
                                  tool_name="write_file", timestamp=1_767_600_001.0)
    finally:
        db.close()
    return titles


def calls(asker: isolation.SessionSpec, other: isolation.SessionSpec) -> list[tuple[str, dict]]:
    """Every model-facing read, aimed at ``other`` (a session of another project) where it takes aim."""
    where = f"{other.cwd.rstrip('/')}/notes.txt" if other.cwd else "notes.txt"
    return [
        ("project_history_search", {"query": other.token}),
        ("project_history_search", {"query": f"{isolation.SHARED} notes", "mode": "semantic"}),
        ("project_history_search", {"query": isolation.SHARED, "scope": "all"}),
        ("project_history", {"operation": "session", "session_id": other.id}),
        ("project_history", {"operation": "session", "session_id": LINK + other.id}),
        ("project_history", {"operation": "session", "session_id": other.id[:5]}),
        ("project_history", {"operation": "timeline"}),
        ("project_history", {"operation": "timeline", "scope": "all"}),
        ("project_history", {"operation": "projects"}),
        ("project_history", {"operation": "status"}),
        ("project_history_index", {}),
        ("project_code_history", {"path": "notes.txt"}),
        ("project_code_history", {"path": where}),
        ("project_code_history", {"path": "notes.txt", "query": other.token}),
    ]


def leaked(reply: dict, args: dict, forbidden: list[str]) -> list[str]:
    text = json.dumps(reply, ensure_ascii=False)
    for value in args.values():
        if isinstance(value, str):
            text = text.replace(value, "«asked»").replace(value.removeprefix(LINK), "«asked»")
    return [f for f in forbidden if f in text]


# No shrinking: a failing layout is reported as it is (its seed reproduces it), in bounded time.
@settings(max_examples=LAYOUTS, deadline=None, database=None, derandomize=True, phases=[Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 10**9))
def test_no_tool_returns_another_projects_history(tmp_path_factory, server, monkeypatch, seed):
    rng = random.Random(seed)
    layout = isolation.generate(tmp_path_factory.mktemp("layout"), rng, max_sessions=16)
    titles = augment(layout, rng)
    world.write_config(layout.home, embedding=world.remote_embedding(server.base_url, dimensions=8))
    world.consent_all(layout.home, server.base_url)
    monkeypatch.setenv("HERMES_HOME", str(layout.home))
    register_plugin()
    keys = {s.id: isolation._scope_key(isolation.expected_identity(layout, s)) for s in layout.sessions}
    TOTALS["layouts"] += 1
    violations = []
    for asker in rng.sample(layout.sessions, min(ASKERS, len(layout.sessions))):
        mine = keys[asker.id]
        strangers = [s for s in layout.sessions if s.id != asker.id and (mine == "home" or keys[s.id] != mine)]
        if not strangers:
            continue
        forbidden = [x for s in strangers for x in (s.id, s.token, titles.get(s.id)) if x]
        for tool, args in calls(asker, rng.choice(strangers)):
            reply = dispatch(tool, args, session_id=asker.id)
            TOTALS["calls"] += 1
            found = leaked(reply, args, forbidden)
            if found:
                violations.append({"seed": seed, "asker": asker.id, "cwd": asker.cwd, "tool": tool, "args": args,
                                   "leaked": found})
    TOTALS["violations"] += len(violations)
    TOTALS["examples"] += violations[:2]
    assert violations == []
