"""Branch scope (issue 5 §1): a branch narrows a project's sessions, keeps the sessions whose
branch is unknown, and never reaches outside the project."""

from __future__ import annotations

import pytest

from builders import History, add_worktree, git_init, session_ids
from project_history_recall.search.scope import compute_scope

SAID = "the heron queue drains every ninety seconds"


@pytest.fixture
def world(tmp_path):
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    wt = add_worktree(repo, tmp_path / "repo-feature", "feature-x")
    other = git_init(tmp_path / "other")
    plain = tmp_path / "plain"
    plain.mkdir()
    h.project("Plain", plain)
    h.session("main-1", repo, SAID, branch="main")                      # recorded by Hermes
    h.session("feat-1", wt, SAID)                                       # probed: feature-x
    h.session("feat-rec", repo, SAID, branch="feature-x")               # recorded, main checkout
    h.session("unknown-1", repo / "deleted", SAID, repo_root=str(repo))  # folder gone, no branch
    h.session("other-feat", other, SAID, branch="feature-x")            # same branch, other project
    h.session("plain-1", plain, SAID)                                   # no git: unknown branch
    h.session("ask", repo, branch="main")
    h.session("ask-wt", wt)
    h.session("ask-plain", plain)
    h.recall().refresh()
    yield h
    h.close()


def found(h, asker, branch=None):
    return set(session_ids(h.recall().search("heron queue", session_id=asker, mode="keyword", limit=10,
                                             branch=branch)))


def test_index_records_recorded_probed_and_unknown_branches(world):
    conn = world.recall().index.connect_readonly()
    try:
        branches = dict(conn.execute("SELECT id, branch FROM sessions").fetchall())
    finally:
        conn.close()
    assert branches["main-1"] == "main"
    assert branches["feat-1"] == "feature-x"
    assert branches["feat-rec"] == "feature-x"
    assert branches["unknown-1"] is None
    assert branches["plain-1"] is None


def test_branch_keeps_unknown_branch_sessions(world):
    assert found(world, "ask") == {"main-1", "feat-1", "feat-rec", "unknown-1"}
    assert found(world, "ask", "feature-x") == {"feat-1", "feat-rec", "unknown-1"}
    assert found(world, "ask", "main") == {"main-1", "unknown-1"}
    assert found(world, "ask", "no-such-branch") == {"unknown-1"}


def test_branch_never_widens_the_project(world):
    # The other repo's feature-x session never shows, from any checkout of this project.
    assert "other-feat" not in found(world, "ask", "feature-x")
    assert "other-feat" not in found(world, "ask-wt", "feature-x")
    # A project without git: every session has an unknown branch, so a branch changes nothing.
    assert found(world, "ask-plain", "feature-x") == found(world, "ask-plain") == {"plain-1"}


@pytest.mark.parametrize("asker", ["ask", "ask-wt", "ask-plain"])
def test_a_branch_scope_is_a_subset_of_the_project_scope(world, asker):
    recall = world.recall()
    conn = recall.index.connect_readonly()
    try:
        resolver = recall.workspace.resolver()
        identity = recall.workspace.asker(conn, resolver, asker, None).identity
        whole = compute_scope(conn, resolver, identity, asker)
        for branch in ("main", "feature-x", "no-such-branch"):
            narrowed = compute_scope(conn, resolver, identity, asker, branch=branch)
            assert set(narrowed.session_ids) <= set(whole.session_ids)
            assert narrowed.sessions_in_scope <= whole.sessions_in_scope
            unknown = {sid for sid in whole.session_ids
                       if conn.execute("SELECT branch FROM sessions WHERE id = ?", (sid,)).fetchone()[0] is None}
            assert unknown <= set(narrowed.session_ids)
    finally:
        conn.close()
