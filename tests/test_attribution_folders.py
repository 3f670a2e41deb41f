"""Which project a real folder belongs to, through Hermes's tool dispatch (issue 18 §4, §5)."""

from __future__ import annotations

import subprocess

import pytest

from builders import History, add_worktree, dispatch, git_init
from project_history_recall.index.probes import git_probe

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


# -- a folder re-pointed under the index (issue 18 §3) ---------------------------------------


def test_a_retargeted_symlink_moves_its_sessions_to_the_new_repo(tmp_path):
    h = History(tmp_path / "hermes")
    alpha, beta = git_init(tmp_path / "alpha"), git_init(tmp_path / "beta")
    link = tmp_path / "current"
    link.symlink_to(alpha)
    h.session("via-link", link, "the kingfisher deploy script")
    h.session("ask-alpha", alpha)
    h.session("ask-beta", beta)
    assert found("kingfisher deploy", "ask-alpha") == {"via-link"}
    link.unlink()
    link.symlink_to(beta)  # state.db is not written again
    assert found("kingfisher deploy", "ask-beta") == {"via-link"}
    assert found("kingfisher deploy", "ask-alpha") == set()
    h.close()


def test_a_folder_that_becomes_its_own_repo_leaves_the_outer_one(tmp_path):
    h = History(tmp_path / "hermes")
    outer = git_init(tmp_path / "outer")
    tool = outer / "tool"
    tool.mkdir()
    h.session("in-tool", tool, "the osprey release checklist")
    h.session("ask-outer", outer)
    h.session("ask-tool", tool)
    assert found("osprey release", "ask-outer") == {"in-tool"}
    git_init(tool)
    assert found("osprey release", "ask-tool") == {"in-tool"}
    assert found("osprey release", "ask-outer") == set()
    h.close()


def test_commits_in_a_repo_do_not_probe_its_folders_again(tmp_path):
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    h.session("said", repo, "the heron cache")
    h.session("ask", repo)
    probes: list[str] = []

    def counting_probe(cwd: str):
        probes.append(cwd)
        return git_probe(cwd)

    recall = h.recall(probe=counting_probe)
    assert recall.search("heron cache", session_id="ask", mode="keyword")["results"]
    probed = len(probes)
    (repo / "file.txt").write_text("x")
    subprocess.run(["git", "-C", str(repo), "add", "file.txt"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
                   check=True)
    assert recall.search("heron cache", session_id="ask", mode="keyword")["results"]
    assert len(probes) == probed
    h.close()
