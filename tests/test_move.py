"""project_session_move: explicit targets, Home, and the searches that follow."""

from __future__ import annotations

import pytest

from builders import History, dispatch, git_init, register_plugin


@pytest.fixture
def world(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "hermes"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    register_plugin()
    h = History(tmp_path / "hermes")
    alpha, beta = git_init(tmp_path / "alpha"), git_init(tmp_path / "beta")
    ids = {"alpha": h.project("Alpha", alpha), "beta": h.project("Beta", beta)}
    h.session("a-old", alpha, "the heron cache in alpha")
    h.session("b-old", beta, "the heron cache in beta")
    h.session("me", alpha, "heron question")
    h.session("a-ask", alpha)
    yield h, ids, tmp_path
    h.close()


def found(query, asker):
    reply = dispatch("project_history_search", {"query": query, "limit": 10}, asker)
    return [r["session_id"] for r in reply["results"]]


def test_move_to_another_project(world):
    h, ids, tmp = world
    assert set(found("heron", "me")) == {"a-old"}
    reply = dispatch("project_session_move", {"project_id": ids["beta"]}, session_id="me")
    assert reply["success"] and reply["project"] == {"kind": "explicit", "id": ids["beta"], "name": "Beta"}
    assert reply["cwd"] == str(tmp / "beta")
    row = h.db.get_session("me")
    assert row["cwd"] == str(tmp / "beta") and row["git_repo_root"] == str(tmp / "beta")
    assert set(found("heron", "me")) == {"b-old"}  # searches from the moved session use the new project
    assert "me" not in found("heron", "a-ask")  # and it left the old project's scope


def test_move_by_slug(world):
    h, _, tmp = world
    assert dispatch("project_session_move", {"project_id": "beta"}, session_id="me")["success"]
    assert h.db.get_session("me")["cwd"] == str(tmp / "beta")


def test_move_to_home_with_a_stale_recorded_repo_root(world):
    h, ids, tmp = world
    dispatch("project_session_move", {"project_id": ids["beta"]}, session_id="me")
    reply = dispatch("project_session_move", {"project_id": ""}, session_id="me")
    assert reply["success"] and reply["project"] == {"kind": "home"}
    row = h.db.get_session("me")
    assert row["cwd"] == str(tmp / "home")
    # Hermes 0.19 keeps the old git_repo_root; the probe of the new cwd decides.
    assert row["git_repo_root"] == str(tmp / "beta")
    assert dispatch("project_history_search", {"query": "heron"}, "me")["sessions_in_scope"] == 0
    assert "me" not in found("heron", "a-ask")
    h.session("b-ask", tmp / "beta")
    assert "me" not in found("heron", "b-ask")


def test_move_to_home_uses_terminal_cwd_from_config(world):
    h, _, tmp = world
    target = tmp / "elsewhere"
    target.mkdir()
    (h.root / "config.yaml").write_text(f"terminal:\n  cwd: {target}\n")
    assert dispatch("project_session_move", {"project_id": ""}, session_id="me")["cwd"] == str(target)


def test_move_unknown_session(world):
    reply = dispatch("project_session_move", {"project_id": ""}, session_id="nope")
    assert reply["success"] is False and reply["code"] == "session_not_found"


def test_move_without_project_id_type(world):
    reply = dispatch("project_session_move", {"project_id": 7}, session_id="me")
    assert reply["code"] == "bad_argument"
