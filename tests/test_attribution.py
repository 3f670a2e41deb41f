"""Attribution and path keys: examples for each rule, properties for the invariants."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from project_history_recall.attribution import Environment, ExplicitProject, ProjectFolder, Resolver, resolve_project
from project_history_recall.paths import is_same_or_under, path_key

ENV = Environment(home="/home/dev", junk_roots=("/", "/tmp"))


def project(pid: str, *folders: str) -> ExplicitProject:
    return ExplicitProject(id=pid, name=pid.upper(), folders=tuple(ProjectFolder(f) for f in folders))


def resolve(cwd, root=None, projects=()):
    return resolve_project({"cwd": cwd, "git_repo_root": root}, list(projects), ENV)


def test_explicit_project_by_cwd_and_by_repo_root():
    alpha = project("p_alpha", "/home/dev/alpha")
    assert resolve("/home/dev/alpha/src/x", None, [alpha]).id == "p_alpha"
    # The cwd is outside, but the recorded repo root is the project's folder.
    assert resolve("/elsewhere/build", "/home/dev/alpha", [alpha]).id == "p_alpha"


def test_nested_project_wins_over_its_parent():
    outer = project("p_outer", "/home/dev/mono")
    inner = project("p_inner", "/home/dev/mono/services/billing")
    assert resolve("/home/dev/mono/services/billing/api", "/home/dev/mono", [outer, inner]).id == "p_inner"
    assert resolve("/home/dev/mono/services/other", "/home/dev/mono", [outer, inner]).id == "p_outer"


def test_sibling_prefix_is_not_an_ancestor():
    ab = project("p_ab", "/a/b")
    assert resolve("/a/bc/d", None, [ab]).kind == "auto"
    assert not is_same_or_under(path_key("/a/bc"), path_key("/a/b"))


def test_auto_from_repo_root_else_cwd():
    assert resolve("/home/dev/tool/src", "/home/dev/tool").as_dict() == {
        "kind": "auto", "key": "/home/dev/tool", "name": "tool"}
    assert resolve("/home/dev/scratch").key == "/home/dev/scratch"


def test_home_for_no_cwd_and_for_junk_roots():
    for cwd in (None, "", "/", "/home/dev", "~", "/tmp", "/home/dev/"):
        assert resolve(cwd).kind == "home", cwd


def test_windows_paths_are_casefolded_and_separator_agnostic():
    proj = project("p_win", "C:\\Users\\Dev\\Repo\\")
    assert resolve("c:/users/dev/repo/src", None, [proj]).id == "p_win"
    assert path_key("C:\\A\\B\\") == path_key("c:/a/b")


def test_tilde_expands_against_home():
    proj = project("p_t", "~/work/t")
    assert resolve("/home/dev/work/t/x", None, [proj]).id == "p_t"


segment = st.text(alphabet="abcxyz-_.1", min_size=1, max_size=5).filter(lambda s: s not in (".", ".."))
paths = st.lists(segment, min_size=1, max_size=5).map(lambda parts: "/" + "/".join(parts))


@given(paths, st.integers(min_value=0, max_value=3))
def test_trailing_and_doubled_separators_do_not_change_the_key(path, extra):
    noisy = path.replace("/", "/" * (1 + extra)) + "/" * extra
    assert path_key(noisy) == path_key(path)


@given(st.lists(paths, min_size=1, max_size=6, unique=True), paths, st.randoms())
def test_deepest_ancestor_wins_whatever_the_order(folders, tail, rnd):
    projects = [project(f"p_{i}", folder) for i, folder in enumerate(folders)]
    cwd = folders[0] + tail
    ancestors = [p for p in projects if is_same_or_under(path_key(cwd), path_key(p.folders[0].path))]
    expected = max(ancestors, key=lambda p: (path_key(p.folders[0].path).count("/"), len(p.folders[0].path)))
    shuffled = projects[:]
    rnd.shuffle(shuffled)
    got = Resolver(shuffled, ENV).resolve(cwd, None)
    assert got.kind == "explicit"
    # The winner's folder is as deep as the deepest ancestor (equal folders tie-break by id, stably).
    winner = next(p for p in projects if p.id == got.id)
    assert path_key(winner.folders[0].path).count("/") == path_key(expected.folders[0].path).count("/")
    assert Resolver(list(reversed(shuffled)), ENV).resolve(cwd, None) == got


@given(paths, paths)
def test_resolution_is_a_function_of_the_paths_only(cwd, root):
    projects = [project("p_a", "/abc"), project("p_b", "/abc/x")]
    random.shuffle(projects)
    assert resolve(cwd, root, projects) == resolve(cwd + "/", root + "//", projects)


@given(paths, st.sampled_from([" ", "  ", "\n", "\t", " \n"]))
def test_whitespace_in_a_folder_name_is_part_of_it(path, space):
    # ``shop``, ``shop `` and ``shop\n`` are three folders (issue 18 §4).
    assert path_key(path + space) != path_key(path)
    assert path_key(space + path) != path_key(path)
    assert path_key(path + space + "/") == path_key(path + space)


def test_folders_differing_only_in_whitespace_are_different_projects():
    shop, spaced = project("p_shop", "/w/shop"), project("p_spaced", "/w/shop ")
    assert resolve("/w/shop/src", None, [shop, spaced]).id == "p_shop"
    assert resolve("/w/shop /src", None, [shop, spaced]).id == "p_spaced"
    assert resolve("/w/shop\n", None, [shop]).kind == "auto"


@given(segment, segment, st.randoms())
def test_at_equal_depth_the_cwds_project_wins_as_in_hermes(a, b, rnd):
    # A linked worktree (cwd) whose probed repo root is another project's folder, both as deep:
    # Hermes's sidebar gives the session to the cwd's project, whatever the names' lengths.
    cwd_folder, root_folder = f"/w/{a}", f"/w/{b}x"
    projects = [project("p_cwd", cwd_folder), project("p_root", root_folder)]
    rnd.shuffle(projects)
    assert resolve(cwd_folder + "/src", root_folder, projects).id == "p_cwd"
    assert resolve(cwd_folder, root_folder + "/deeper", [*projects, project("p_deep", root_folder + "/deeper")]
                   ).id == "p_deep"  # strictly deeper still wins
