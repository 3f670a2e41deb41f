"""No result ever comes from another scope; hidden things are never returned."""

from __future__ import annotations

import pytest

from builders import History, add_worktree, git_init, session_ids, two_projects


@pytest.fixture
def world(tmp_path):
    """Projects of every kind, each with a session saying the same thing."""
    h = History(tmp_path / "hermes")
    mono = git_init(tmp_path / "mono")
    billing = mono / "services" / "billing"
    billing.mkdir(parents=True)
    tool = git_init(tmp_path / "tool")
    wt = add_worktree(tool, tmp_path / "tool-wt", "feature")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    recorded = tmp_path / "gone" / "recorded-repo"  # not on disk: the recorded root decides
    h.project("Mono", mono)
    h.project("Billing", billing)
    said = "the zebra cache uses a ttl of ninety seconds"
    h.session("mono-1", mono / "web", said)
    h.session("mono-ask", mono)
    h.session("bill-1", billing, said)
    h.session("bill-ask", billing / "api")
    h.session("tool-1", tool, said)
    h.session("tool-wt-1", wt, said + " on the worktree")
    h.session("tool-ask", tool)
    h.session("rec-1", recorded / "src", said, repo_root=str(recorded))
    h.session("rec-ask", recorded, repo_root=str(recorded))
    h.session("scratch-1", scratch, said)
    h.session("scratch-ask", scratch)
    h.session("home-1", str(tmp_path.home()), said)
    h.session("home-ask", None)
    yield h
    h.close()


@pytest.mark.parametrize(
    ("asker", "expected"),
    [
        ("mono-ask", {"mono-1"}),  # explicit; the nested Billing project is not Mono's
        ("bill-ask", {"bill-1"}),  # nested explicit
        ("tool-ask", {"tool-1", "tool-wt-1"}),  # auto, probed root; the linked worktree folds in
        ("rec-ask", {"rec-1"}),  # auto, recorded root
        ("scratch-ask", {"scratch-1"}),  # auto, a plain folder outside any repo
    ],
)
def test_each_scope_sees_only_itself(world, asker, expected):
    response = world.recall().search("zebra cache ttl", session_id=asker, mode="keyword", limit=10)
    assert set(session_ids(response)) == expected


def test_home_has_no_scope(world):
    for asker in ("home-ask", "home-1"):
        response = world.recall().search("zebra cache", session_id=asker, limit=10)
        assert response["results"] == [] and response["sessions_in_scope"] == 0
    assert world.recall().search("zebra", session_id="home-ask")["message"].startswith("No project context")


def test_home_sessions_are_in_no_projects_scope(world):
    everywhere = set()
    for asker in ("mono-ask", "bill-ask", "tool-ask", "rec-ask", "scratch-ask"):
        everywhere |= set(session_ids(world.recall().search("zebra", session_id=asker, limit=10)))
    assert "home-1" not in everywhere


def test_current_session_is_never_returned(world):
    world.say("mono-ask", "zebra cache question from the current session")
    assert "mono-ask" not in session_ids(world.recall().search("zebra", session_id="mono-ask", limit=10))


def test_archived_hidden_and_rewound_are_never_returned(world, tmp_path):
    mono = tmp_path / "mono"
    world.session("mono-archived", mono, "zebra archived words")
    world.db.set_session_archived("mono-archived", True)
    world.session("mono-sub", mono, "zebra subagent words", source="subagent")
    world.session("mono-tool", mono, "zebra tool words", source="tool")
    world.session("mono-delegate", mono, "zebra delegate words", parent="mono-1",
                  model_config={"_delegate_from": "mono-1"})
    ids = world.session("mono-rewound", mono, "first question about giraffes", "zebra rewound answer",
                        "zebra kiwi question", "zebra kiwi answer")
    world.db.rewind_to_message("mono-rewound", ids[2])
    response = world.recall().search("zebra", session_id="mono-ask", mode="keyword", limit=10)
    assert set(session_ids(response)) == {"mono-1", "mono-rewound"}
    assert all("kiwi" not in r["snippet"] for r in response["results"])
    assert session_ids(world.recall().search("kiwi", session_id="mono-ask", mode="keyword", limit=10)) == []


def test_scope_all_is_deliberate_and_labels_projects(world):
    response = world.recall().search("zebra", session_id="mono-ask", scope="all", limit=10)
    projects = {r["session_id"]: r["project"]["kind"] for r in response["results"]}
    assert projects["bill-1"] == "explicit" and "mono-ask" not in projects


def test_a_project_made_between_two_searches_scopes_the_second(world, tmp_path):
    """Hermes's projects are read again once projects.db changes, by the same Recall."""
    recall = world.recall()
    assert set(session_ids(recall.search("zebra cache", session_id="scratch-ask", mode="keyword", limit=10))) == {
        "scratch-1"}
    world.project("Scratch and tool", tmp_path / "scratch", tmp_path / "tool")
    assert set(session_ids(recall.search("zebra cache", session_id="scratch-ask", mode="keyword", limit=10))) == {
        "scratch-1", "tool-1", "tool-wt-1"}


def test_one_process_scopes_the_sessions_that_come_and_a_session_moved_after(tmp_path):
    """A long-lived process attributes only the sessions new since its last search (a /new in
    Hermes): each must land in its own project's scope, in start order, and a later move (an
    indexed session's cwd changed) must still re-attribute it."""
    h, a, b, pid_b = two_projects(tmp_path)
    recall = h.recall()

    def found(asker: str) -> list[str]:
        return session_ids(recall.search("heron", session_id=asker, mode="keyword", limit=10))

    assert found("ask-a") == ["old"] and found("ask-b") == []
    h.session("b-new", b, "heron notes for b", "ok")
    h.session("a-new", a, "heron again, in a", "ok")
    assert sorted(found("ask-a")) == ["a-new", "old"] and found("ask-b") == ["b-new"]
    timeline = recall.timeline(session_id="ask-a")
    assert [s["session_id"] for s in timeline["sessions"]] == ["ask-a", "a-new", "old"]
    assert recall.move_session("a-new", pid_b)["success"]
    assert found("ask-a") == ["old"] and sorted(found("ask-b")) == ["a-new", "b-new"]
    h.close()
