"""Which project a real folder belongs to, through Hermes's tool dispatch (issue 18 §4, §5)."""

from __future__ import annotations

import pytest

from builders import History, add_worktree, dispatch, git_init

pytestmark = pytest.mark.usefixtures("registered_plugin")


def found(query: str, asker: str) -> set[str]:
    reply = dispatch("project_history_search", {"query": query, "mode": "keyword", "limit": 10}, session_id=asker)
    assert reply["success"], reply
    return {r["session_id"] for r in reply["results"]}


def test_repos_differing_only_in_whitespace_are_different_projects(tmp_path):
    h = History(tmp_path / "hermes")
    for name in ("shop", "shop ", "shop\n"):
        tag = str(len(name))
        git_init(tmp_path / name)
        h.session(f"said{tag}", tmp_path / name, "the pelican checkout total")
        h.session(f"ask{tag}", tmp_path / name)
    assert found("pelican checkout", "ask4") == {"said4"}
    assert found("pelican checkout", "ask5") == {"said5"}
    h.close()


def test_a_worktrees_own_project_wins_over_its_main_repos_at_equal_depth(tmp_path):
    # The main repo's folder name is the longer one: a length tie-break would give it the worktree.
    h = History(tmp_path / "hermes")
    main = git_init(tmp_path / "application-main")
    wt = add_worktree(main, tmp_path / "wt", "feature")
    h.project("Main", main)
    h.project("Feature", wt)
    h.session("on-main", main, "the albatross migration")
    (wt / "src").mkdir()
    h.session("on-wt", wt / "src", "the albatross migration, on the worktree")
    h.session("ask-main", main)
    h.session("ask-wt", wt)
    assert found("albatross migration", "ask-wt") == {"on-wt"}
    assert found("albatross migration", "ask-main") == {"on-main"}
    h.close()
