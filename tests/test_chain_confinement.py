"""``project_code_history`` reads files only inside the project's folders (issue 18 §6):
never through ``../..``, an absolute path, a symlink out of the repo, or a diff merely quoted
in a reply that names a file elsewhere — through Hermes's tool dispatch."""

from __future__ import annotations

import pytest

from builders import History, dispatch, git_init

pytestmark = pytest.mark.usefixtures("registered_plugin")

OUTSIDE = "def leaked():\n    return 'outside the project'\n"


def quoted_diff(path: str) -> str:
    return (f"Here is the change:\n```diff\ndiff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
            "@@ -1 +1,2 @@\n def leaked():\n"
            f"+    return 'outside the project'\n```")


@pytest.fixture
def world(tmp_path):
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "work" / "repo")
    outside = tmp_path / "work" / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text(OUTSIDE)
    (repo / "linked.py").symlink_to(outside / "secret.py")
    (repo / "inside.py").write_text(OUTSIDE)
    h.session("edits", repo, "show me the changes",
              quoted_diff("../outside/secret.py"), "and the absolute one", quoted_diff(str(outside / "secret.py")),
              "and the linked one", quoted_diff("linked.py"), "and the real one", quoted_diff("inside.py"))
    h.session("ask", repo)
    yield h, repo, outside
    h.close()


def last_round(path: str) -> dict:
    reply = dispatch("project_code_history", {"path": path}, session_id="ask")
    assert reply["success"], reply
    assert reply["rounds"], reply
    return reply["rounds"][-1]


@pytest.mark.parametrize("path", ["../outside/secret.py", "{outside}/secret.py", "linked.py"])
def test_files_outside_the_project_are_never_read(world, path):
    _, _, outside = world
    assert last_round(path.format(outside=outside))["still_in_file"] is None


def test_a_file_inside_the_project_is_still_read(world):
    assert last_round("inside.py")["still_in_file"] is True
