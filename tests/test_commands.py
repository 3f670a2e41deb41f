"""``/recall`` through Hermes's own slash-command dispatch.

The interactive CLI (``cli.py`` ``process_command``) and the TUI gateway call a plugin
command the same way: ``get_plugin_command_handler(name)`` then
``resolve_plugin_command_result(handler(args))``; the desktop/TUI path is also driven
through ``tui_gateway.server``'s real ``command.dispatch`` method.
"""

from __future__ import annotations

import queue

import pytest
import yaml

from builders import History, git_init, register_plugin
from project_history_recall.faces.hermes import commands
from project_history_recall.services import jobs


@pytest.fixture(autouse=True)
def plugin(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "hermes"))
    monkeypatch.delenv("HERMES_SESSION_ID", raising=False)
    registered = register_plugin()
    assert "recall" in registered["commands"]
    assert registered["commands"]["recall"]["args_hint"] == commands.ARGS_HINT


def recall(args: str = "") -> str:
    """What the CLI does with ``/recall <args>``."""
    from hermes_cli.plugins import get_plugin_command_handler, resolve_plugin_command_result

    handler = get_plugin_command_handler("recall")
    assert handler is not None
    result = resolve_plugin_command_result(handler(args))
    assert isinstance(result, str)
    return result


@pytest.fixture()
def h(tmp_path, monkeypatch):
    h = History(tmp_path / "hermes")
    repo, other = git_init(tmp_path / "repo"), git_init(tmp_path / "other")
    h.project("Repo", repo)
    h.session("20260101_090000_aaaa", repo, "the osprey cache invalidation", "bumped osprey TTL to 3600",
              title="Osprey cache")
    h.session("20260102_090000_bbbb", other, "osprey elsewhere")
    h.session("20260103_090000_now0", repo)
    monkeypatch.chdir(repo)  # the command asks from the process's working directory
    yield h
    h.close()


def test_status_is_the_default_and_creates_no_file(h):
    text = recall()
    assert "index: none" in text and "No index yet" in text
    assert "Hermes sessions: 3 (3 changed since the last index)" in text
    assert "current project: Repo (explicit)" in text
    assert recall("status") == text
    assert not (h.root / "plugins").exists()


def test_index_then_status(h):
    assert recall("index").startswith("indexed 3 changed sessions of 3 (3 messages) in ")
    assert recall("index").startswith("indexed 0 changed sessions of 3")
    text = recall("status")
    assert "index: ready" in text and "3 sessions, 3 messages" in text and "(0 changed since the last index)" in text
    assert "job " in text and ": done" in text
    forced = recall("index --force")
    assert forced.startswith("indexed 3 changed sessions of 3")


def test_index_of_a_large_history_hands_off_to_a_job(h, monkeypatch):
    monkeypatch.setattr(jobs, "LARGE_HISTORY", 0)
    monkeypatch.setattr(jobs, "BACKGROUND_GLANCE", 0.0)
    monkeypatch.setattr(commands, "COMMAND_WAIT", 0.2)
    index = jobs.JobStore(h.root / "plugins" / "project-history-recall")
    from project_history_recall.recall import Recall

    r = Recall(h.root)
    with r.index.writer(timeout=5):  # the job waits for this: it stays running
        text = recall("index")  # answers although the job cannot start yet
        assert "continues in the background" in text and "/recall status" in text
        job = index.active()
        assert job is not None and job.id in text and job.detached
        assert "already running" in recall("index --force")
    assert jobs.wait(r.workspace, job, 60).state == "done"


def test_search_prints_the_top_results_of_this_project(h):
    text = recall("search osprey")
    assert "project: Repo" in text and "@session:20260101_090000_aaaa" in text and "**osprey**" in text
    assert "20260102_090000_bbbb" not in text  # another project
    assert recall("search").startswith("search needs some words")


def test_search_as_the_live_session_excludes_it(h, monkeypatch):
    h.say("20260103_090000_now0", "osprey in the live session")
    assert "20260103_090000_now0" in recall("search osprey")
    monkeypatch.setenv("HERMES_SESSION_ID", "20260103_090000_now0")
    assert "20260103_090000_now0" not in recall("search osprey")


def test_projects_marks_the_current_one(h):
    lines = recall("projects").splitlines()
    assert any(line.startswith("* Repo (explicit)") and "2 sessions" in line for line in lines), lines
    assert any(line.startswith("  other (auto)") for line in lines), lines


def test_sessions_lists_this_project_newest_first(h):
    text = recall("sessions")
    lines = text.splitlines()
    assert lines[0].startswith("Repo: 2 of 2 sessions")
    assert "@session:20260103_090000_now0" in lines[1] and "Osprey cache" in lines[2]
    assert "20260102_090000_bbbb" in recall("sessions all")


def test_unknown_subcommand_and_help(h):
    assert recall("frobnicate").startswith("unknown subcommand 'frobnicate'")
    assert commands.USAGE in recall("help")
    assert "unbalanced" not in recall('search "osprey')  # a stray quote is not a crash


def test_errors_read_as_a_line(tmp_path, monkeypatch):
    (tmp_path / "hermes").mkdir()
    monkeypatch.chdir(tmp_path)
    assert recall("search anything").startswith("error: session database not found")
    assert "Hermes session database not found" in recall("status")


def test_inject_results_feeds_the_output_into_the_conversation(h):
    from hermes_cli.plugins import get_plugin_manager

    class Cli:  # what Hermes's PluginContext.inject_message needs from the interactive CLI
        _agent_running = False

        def __init__(self) -> None:
            self._pending_input: queue.Queue = queue.Queue()
            self._interrupt_queue: queue.Queue = queue.Queue()

    manager = get_plugin_manager()
    cli, saved = Cli(), manager._cli_ref
    manager._cli_ref = cli
    try:
        recall("status")
        assert cli._pending_input.empty()  # off by default
        (h.root / "config.yaml").write_text(yaml.safe_dump(
            {"plugins": {"entries": {"project-history-recall": {"inject_results": True}}}}))
        text = recall("search osprey")
        injected = cli._pending_input.get_nowait()
        assert injected.startswith("[notice] Output of /recall search osprey") and text in injected
    finally:
        manager._cli_ref = saved


def test_the_tui_gateway_dispatches_it(h):
    from tui_gateway import server

    reply = server._methods["command.dispatch"]("r1", {"name": "recall", "arg": "status"})
    assert reply["result"]["type"] == "plugin" and "index: none" in reply["result"]["output"]
