"""The check before each search over other agents' transcripts (sources/file_watch.py): what it
sees at once, what waits for the next full sweep, and that it does not ``stat`` every file."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from agent_transcripts import Claude
from builders import History, git_init
from project_history_recall.recall import Recall
from project_history_recall.sources import file_watch
from project_history_recall.sources.file_watch import HOT_SECONDS, FileWatch

DAY = 86_400.0


def age(path: Path, seconds: float) -> None:
    moment = time.time() - seconds
    os.utime(path, (moment, moment))


def transcripts(root: Path, *names: str) -> list[Path]:
    """Transcript files under ``root/<project>/``, idle for two days, their folders as old."""
    paths = []
    for name in names:
        project, _, file = name.partition("/")
        path = root / project / file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('{"line": 1}\n')
        paths.append(path)
    for path in [*paths, *{p.parent for p in paths}, root]:
        age(path, 2 * DAY)
    return paths


def watch_of(root: Path, **kwargs: float) -> FileWatch:
    return FileWatch(str(root), lambda: (str(p) for p in sorted(root.glob("*/*.jsonl"))), **kwargs)


def test_nothing_changed_costs_no_sweep_and_an_append_to_a_file_in_use_is_seen_at_once(tmp_path):
    _, in_use = transcripts(tmp_path, "a/idle.jsonl", "b/in-use.jsonl")
    age(in_use, 60)  # written a minute ago: in use
    watch = watch_of(tmp_path, sweep_seconds=1e9)
    first = watch.marker()
    assert first[0] == 2 and watch.sweeps == 1
    assert watch.marker() == first and watch.sweeps == 1
    with in_use.open("a") as handle:
        handle.write('{"line": 2}\n')
    assert watch.marker() != first
    assert watch.sweeps == 1
    assert watch.stats()[str(in_use)].st_size == in_use.stat().st_size


def test_a_new_or_deleted_transcript_is_seen_at_once_by_its_folder(tmp_path):
    _, other = transcripts(tmp_path, "a/idle.jsonl", "b/other.jsonl")
    watch = watch_of(tmp_path, sweep_seconds=1e9)
    first = watch.marker()
    (tmp_path / "a" / "new.jsonl").write_text('{"line": 1}\n')
    second = watch.marker()
    assert second[0] == 3 and second != first
    age(tmp_path / "a", 2 * DAY)  # its folder settles
    watch.marker()
    other.unlink()
    assert watch.marker()[0] == 2
    (tmp_path / "c").mkdir()  # a new project folder: the root's mtime changes
    (tmp_path / "c" / "x.jsonl").write_text('{"line": 1}\n')
    assert watch.marker()[0] == 3


def test_an_append_to_an_idle_transcript_is_seen_after_the_background_sweep(tmp_path):
    """The documented limit: a file idle for longer than HOT_SECONDS is looked at by the sweeps,
    which the process's sweeper thread runs; a check alone does not see its append."""
    idle, = transcripts(tmp_path, "a/idle.jsonl")
    age(idle, HOT_SECONDS + 3600)
    watch = watch_of(tmp_path, sweep_seconds=1e9)
    first = watch.marker()
    assert any(t.name == "transcript-sweeper" and t.daemon for t in threading.enumerate())
    with idle.open("a") as handle:
        handle.write('{"line": 2}\n')
    assert watch.marker() == first
    file_watch.sweep_due()
    assert watch.sweeps == 1  # not due yet
    watch.sweep_seconds = 0
    file_watch.sweep_due()
    watch.sweep_seconds = 1e9  # the check would not sweep itself
    assert watch.sweeps == 2
    assert watch.marker() != first
    assert watch.marker() == watch_of(tmp_path).marker()


def test_a_check_sweeps_itself_when_no_sweep_ran_for_long(tmp_path):
    idle, = transcripts(tmp_path, "a/idle.jsonl")
    age(idle, HOT_SECONDS + 3600)
    watch = watch_of(tmp_path, sweep_seconds=1e9)
    first = watch.marker()
    with idle.open("a") as handle:
        handle.write('{"line": 2}\n')
    watch.sweep_seconds = 0  # as if the sweeper had not run for STALE_SWEEPS intervals
    assert watch.marker() != first


def test_a_folder_written_during_the_sweep_is_not_trusted(tmp_path):
    transcripts(tmp_path, "a/one.jsonl")
    os.utime(tmp_path / "a")  # modified just now: a file created in the same tick would not show
    watch = watch_of(tmp_path, sweep_seconds=1e9)
    watch.marker()
    watch.marker()
    assert watch.sweeps == 2


def test_one_process_finds_the_session_in_use_and_a_new_session_at_the_next_search(tmp_path, monkeypatch):
    """Through the whole search: a long-lived process (the Hermes plugin, the MCP server)."""
    claude_dir = tmp_path / "claude"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude_dir))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    repo = git_init(tmp_path / "repo")
    History(tmp_path / "hermes").close()
    in_use = Claude(claude_dir, "0b6a1c52-1111-4a5e-9c1e-aaaaaaaaaaaa", repo)
    in_use.user("the wombat cache question")
    in_use.say("answered")
    for folder in [in_use.path.parent, claude_dir / "projects"]:  # settled folders: trusted
        age(folder, 2 * DAY)
    recall = Recall(tmp_path / "hermes")

    def found(query: str) -> list[str]:
        return [r["session_id"] for r in recall.search(query, cwd=str(repo), mode="keyword")["results"]]

    assert found("wombat") == [in_use.session_id]
    in_use.user("a numbat follow-up")
    assert found("numbat") == [in_use.session_id]
    new = Claude(claude_dir, "0b6a1c52-2222-4a5e-9c1e-bbbbbbbbbbbb", repo)
    new.user("a quokka question in a new session")
    assert found("quokka") == [new.session_id]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_checks_even_when_the_parent_was_mid_sweep(tmp_path):
    """A lock the parent's sweep held at the fork is not inherited held."""
    _, in_use = transcripts(tmp_path, "a/one.jsonl", "b/in-use.jsonl")
    age(in_use, 60)
    listing, release = threading.Event(), threading.Event()

    def files():
        if threading.current_thread().name == "slow-sweep":
            listing.set()
            release.wait(30)
        return (str(p) for p in sorted(tmp_path.glob("*/*.jsonl")))

    watch = FileWatch(str(tmp_path), files, sweep_seconds=1e9)
    first = watch.marker()
    sweeping = threading.Thread(target=watch.sweep, name="slow-sweep")
    sweeping.start()
    assert listing.wait(10)  # the sweep is under way, its lock held
    pid = os.fork()
    if pid == 0:  # the child: a check must answer
        with in_use.open("a") as handle:
            handle.write('{"line": 2}\n')
        os._exit(0 if watch.marker() != first else 1)
    release.set()
    sweeping.join()
    deadline = time.monotonic() + 20
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    assert done[0] == pid and os.waitstatus_to_exitcode(done[1]) == 0
