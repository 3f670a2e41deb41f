"""What a new user trips over (issue 19): each through ``phr``'s ``main`` or Hermes's dispatch."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner
from filelock import FileLock

from builders import History, dispatch, git_init, register_plugin, tool_call
from project_history_recall.faces.cli import main
from project_history_recall.services.semantic import SYNC_EMBED_BUDGET


def phr(*args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False)
    return result.exit_code, json.loads(result.output)


def phr_text(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


@pytest.fixture
def indexed(tmp_path) -> tuple[History, str]:
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    h.session("old", repo, "the pelican deploy script", "run deploy/pelican.sh --prod")
    code, _ = phr("--home", str(h.root), "index")
    assert code == 0
    yield h, str(repo)
    h.close()


def test_an_unwritable_lock_file_answers_reads_from_the_index_marked_stale(indexed, monkeypatch):
    h, repo = indexed
    lock = h.root / "plugins" / "project-history-recall" / "index.lock"
    lock.unlink()
    lock.mkdir()  # cannot be opened for writing, whoever runs the test (root ignores permissions)
    home = str(h.root)
    h.session("new", repo, "pelican again")
    code, payload = phr("--home", home, "search", "pelican", "--cwd", repo)
    assert code == 0 and [r["session_id"] for r in payload["results"]] == ["old"]
    assert payload["index_status"] == "stale" and "not writable" in payload["warning"]
    code, payload = phr("--home", home, "timeline", "--cwd", repo)
    assert code == 0 and payload["index_status"] == "stale" and payload["total"] == 1
    code, out = phr_text("--home", home, "search", "pelican", "--cwd", repo)
    assert code == 0 and "index stale" in out and "Traceback" not in out
    code, payload = phr("--home", home, "index")
    assert code == 1 and payload["code"] == "index_read_only"
    monkeypatch.setenv("HERMES_HOME", home)
    monkeypatch.chdir(repo)
    register_plugin()
    answer = dispatch("project_history_search", {"query": "pelican"}, session_id="new")
    assert answer["success"] is True and answer["index_status"] == "stale"


def test_arguments_that_name_nothing_are_refused_or_warned(indexed, tmp_path, monkeypatch):
    h, repo = indexed
    home = str(h.root)
    code, payload = phr("--home", home, "search", "pelican", "--session", "nope")
    assert code == 1 and payload["code"] == "unknown_session"
    code, payload = phr("--home", home, "timeline", "--session", "nope")
    assert code == 1 and payload["code"] == "unknown_session"
    code, payload = phr("--home", home, "search", "pelican", "--session", "old")
    assert code == 0 and payload["project"]["name"] == "repo"
    code, payload = phr("--home", home, "search", "pelican", "--cwd", str(tmp_path / "does" / "not" / "exist"))
    assert code == 1 and payload["code"] == "bad_argument" and "not a folder" in payload["error"]
    code, payload = phr("--home", home, "search", "pelican", "--cwd", repo, "--branch", "no-such-branch")
    assert code == 0 and payload["warning"].endswith("(branches seen: main)")
    code, payload = phr("--home", home, "timeline", "--cwd", repo, "--branch", "no-such-branch")
    assert code == 0 and "no-such-branch" in payload["warning"]
    for bad in ("0", "-3"):
        code, payload = phr("--home", home, "search", "pelican", "--cwd", repo, "--limit", bad)
        assert code == 1 and payload["code"] == "bad_argument" and "at least 1" in payload["error"]
        code, payload = phr("--home", home, "timeline", "--cwd", repo, "--limit", bad)
        assert code == 1 and payload["code"] == "bad_argument"
    monkeypatch.setenv("HERMES_HOME", home)
    register_plugin()
    h.session("now", repo)
    reply = dispatch("project_history_search", {"query": "pelican", "branch": "no-such-branch"}, session_id="now")
    assert reply["success"] is True and "no-such-branch" in reply["warning"]
    reply = dispatch("project_history", {"operation": "timeline", "limit": -3}, session_id="now")
    assert reply["success"] is False and reply["code"] == "bad_argument"


def test_vectors_are_built_in_a_detached_process_after_the_cli_builds_keywords(tmp_path):
    h = History(tmp_path / "hermes")
    repo = str(git_init(tmp_path / "repo"))
    sessions = SYNC_EMBED_BUDGET // 2 + 4  # more messages than a search embeds on the spot
    for n in range(sessions):
        h.session(f"s{n}", repo, f"note {n} about the heron pipeline", f"answer {n} about herons")
    home = str(h.root)
    lock = FileLock(str(h.root / "plugins" / "project-history-recall" / "embed.lock"))
    lock.acquire()  # another process is embedding: nothing new is started, and both reads say so alike
    try:
        code, found = phr("--home", home, "search", "heron", "--cwd", repo, "--mode", "semantic")
        code_status, status = phr("--home", home, "status", "--cwd", repo)
    finally:
        lock.release()
    assert code == code_status == 0 and found["results"]
    assert found["semantic_status"] == status["semantic_status"] == "indexing"
    assert found["semantic_pending"] == status["semantic_pending"] > SYNC_EMBED_BUDGET
    assert "keyword results" in found["semantic_message"]
    code, found = phr("--home", home, "search", "heron", "--cwd", repo, "--mode", "keyword")
    assert code == 0 and found["semantic_status"] == "indexing" and "background process" in found["semantic_message"]
    os.waitpid(found["embedding_pid"], 0)  # it outlives the command that started it
    code, status = phr("--home", home, "status", "--cwd", repo)
    assert status["semantic_status"] == "ready" and status["semantic"]["vectors_indexed"] >= 2 * sessions
    code, found = phr("--home", home, "search", "heron pipeline", "--cwd", repo, "--mode", "semantic")
    assert found["semantic_status"] == "ready" and "semantic_message" not in found
    assert {r["score_source"] for r in found["results"]} == {"semantic"}
    h.close()


def test_human_output_counts_in_words_and_marks_whole_words(tmp_path):
    h = History(tmp_path / "hermes")
    repo = str(git_init(tmp_path / "repo"))
    h.session("old", repo, "we chose the RetryPolicy class", "fine")
    home = str(h.root)
    code, out = phr_text("--home", home, "index")
    assert code == 0 and "indexed 1 changed session of 1 (2 messages)" in out
    code, out = phr_text("--home", home, "search", "retry", "--cwd", repo)
    assert code == 0 and "**RetryPolicy**" in out and "1 session in scope" in out
    code, out = phr_text("--home", home, "status", "--cwd", repo)
    assert "1 session, 2 messages" in out and " 1 sessions" not in out
    code, out = phr_text("--home", home, "timeline", "--cwd", repo)
    assert "1 of 1 session," in out and "[2 msgs]" in out
    h.close()


def test_tests_run_in_a_temporary_home_without_language_servers(tmp_path, monkeypatch):
    from agent.lsp import get_service

    assert "pytest-of-" in os.path.expanduser("~")
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "hermes"))
    assert get_service() is None  # no pyright install, no language server


def test_demo_takes_json_like_every_command(tmp_path):
    code, payload = phr("--home", str(tmp_path / "none"), "demo", "--demo-home", str(tmp_path / "demo"))
    assert code == 0 and payload["demo"] is True and len(payload["searches"]) == 5
    assert all(s["success"] and s["results"] for s in payload["searches"])


def test_past_recall_queries_do_not_outrank_the_history_they_searched(tmp_path):
    h = History(tmp_path / "hermes")
    repo = str(git_init(tmp_path / "repo"))
    h.session("real", repo, "we chose exponential backoff for the quokka retry policy", "done")
    h.session("asked", repo, "what did we pick for quokka retries?",
              ("assistant", "", {"tool_calls": [tool_call("c1", "project_history_search",
                                                          {"query": "quokka retry policy backoff"})]}),
              ("tool", '{"results": []}', {"tool_call_id": "c1"}))
    code, payload = phr("--home", str(h.root), "search", "quokka retry policy", "--cwd", repo,
                        "--kinds", "tool_call")
    assert code == 0 and payload["results"] == []
    code, payload = phr("--home", str(h.root), "search", "quokka retry policy", "--cwd", repo)
    assert code == 0 and payload["results"][0]["session_id"] == "real"
    h.close()
