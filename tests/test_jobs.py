"""``project_history_index`` and its jobs: a detached job outlives the call and the process that
started it, reports progress, and two concurrent requests never start two writers.

The test holds the index's writer lock to keep a job "running" for as long as it needs
(the job waits for the lock); releasing it lets the job finish.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from builders import History, dispatch, git_init
from project_history_recall.faces.cli import main as phr
from project_history_recall.index.store import Index
from project_history_recall.services import jobs

TESTS = Path(__file__).resolve().parent

# A process that asks for an index through the real registry and exits at once; with
# T_LARGE=0 every history counts as large, so the work goes to a detached job.
STARTER = f"""
import json, os, sys
sys.path.insert(0, {str(TESTS)!r})
from project_history_recall.services import jobs
jobs.LARGE_HISTORY = int(os.environ.get("T_LARGE", "1000"))
jobs.BACKGROUND_GLANCE = 0.0
from builders import dispatch, register_plugin
register_plugin()
print(json.dumps(dispatch("project_history_index", {{"force": os.environ.get("T_FORCE") == "1"}})))
"""


pytestmark = pytest.mark.usefixtures("registered_plugin")


@pytest.fixture()
def children():
    """Job processes started during a test; any still alive at the end are stopped (by pid)."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)


def make_history(tmp_path: Path, sessions: int = 3) -> History:
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    for i in range(sessions):
        h.session(f"s{i:04d}", repo, f"note {i} about the kestrel")
    return h


def start_process(env_extra: dict[str, str] | None = None) -> subprocess.Popen:
    env = {**os.environ, **(env_extra or {})}
    return subprocess.Popen([sys.executable, "-c", STARTER], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def finish(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def status() -> dict:
    return dispatch("project_history", {"operation": "status"})


def wait_until_running(job_id: str, timeout: float = 30.0) -> dict:
    """The detached child writes "running" once it has started (imports take a moment)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = status().get("job") or {}
        if job.get("id") == job_id and job["state"] != "starting":
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} never started: {status()}")


def wait_for_job(job_id: str, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = status().get("job") or {}
        if job.get("id") == job_id and job["state"] in ("done", "failed"):
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} did not finish: {status()}")


def test_small_history_is_indexed_within_the_call(tmp_path):
    h = make_history(tmp_path)
    reply = dispatch("project_history_index", {})
    assert reply["success"] and reply["status"] == "done" and reply["sessions_updated"] == 3
    assert reply["job"]["detached"] is False and reply["job"]["progress"] == "3/3 sessions"
    again = dispatch("project_history_index", {})
    assert again["status"] == "done" and again["sessions_updated"] == 0
    forced = dispatch("project_history_index", {"force": True})
    assert forced["full"] is True and forced["sessions_updated"] == 3
    h.close()


def test_detached_job_outlives_its_starter_and_reports_progress(tmp_path, children):
    h = make_history(tmp_path, sessions=450)
    index = Index(h.root / "plugins" / "project-history-recall")
    with index.writer(timeout=5):  # the job will wait for this lock: it stays running
        starter = start_process({"T_LARGE": "0"})
        reply = finish(starter)
        assert reply["success"] and reply["status"] == "running", reply
        job = reply["job"]
        children.append(job["pid"])
        assert job["detached"] is True and job["pid"] not in (starter.pid, os.getpid())
        assert "continues in the background" in reply["message"]
        ended = time.time()  # the starter process is gone now
        assert status()["job"]["state"] in ("starting", "running")
        assert wait_until_running(job["id"])["state"] == "running"
        first = status()
        assert first["job"]["id"] == job["id"] and first["index_status"] == "building"
        record = jobs.JobStore(index.data_dir).read(job["id"])
        assert record is not None
        beat = record.updated_at
        time.sleep(jobs.HEARTBEAT_SECONDS + 0.6)
        later = jobs.JobStore(index.data_dir).read(job["id"])
        assert later is not None and later.state == "running" and later.updated_at > beat  # heartbeat
    done = wait_for_job(job["id"])
    assert done["state"] == "done" and done["done"] == done["total"] == 450
    record = jobs.JobStore(index.data_dir).read(job["id"])
    assert record is not None and record.finished_at is not None and record.finished_at > ended
    assert record.report and record.report["sessions_updated"] == 450
    final = status()
    assert final["index_status"] == "ready" and final["sessions_indexed"] == 450
    h.close()


def test_two_concurrent_requests_start_one_writer(tmp_path, children):
    h = make_history(tmp_path)
    index = Index(h.root / "plugins" / "project-history-recall")
    with index.writer(timeout=5):
        a, b = start_process({"T_LARGE": "0"}), start_process({"T_LARGE": "0"})
        replies = [finish(a), finish(b)]
        # The job's record may not carry its pid yet when the second request reads it.
        children.extend({r["job"]["pid"] for r in replies} - {None})
        assert all(r["success"] and r["status"] == "running" for r in replies), replies
        assert len({r["job_id"] for r in replies}) == 1
        assert sorted(r["already_running"] for r in replies) == [False, True]
        assert len(list((index.data_dir / "jobs").glob("*.json"))) == 1
        # A third request, from this process, reports the same running job.
        third = dispatch("project_history_index", {"force": True})
        assert third["already_running"] is True and third["job_id"] == replies[0]["job_id"]
        assert "already running" in third["message"]
    assert wait_for_job(replies[0]["job_id"])["state"] == "done"
    assert len(list((index.data_dir / "jobs").glob("*.json"))) == 1
    h.close()


def test_a_dead_jobs_record_does_not_block_the_next(tmp_path):
    h = make_history(tmp_path)
    store = jobs.JobStore(h.root / "plugins" / "project-history-recall")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = jobs.Job("19990101-000000-dead00", state="running", pid=int(gone.stdout), detached=True)
    store.write(dead)
    assert store.active() is None
    reply = dispatch("project_history_index", {})
    assert reply["status"] == "done" and reply["job_id"] != dead.id
    h.close()


def test_a_failed_job_says_why(tmp_path):
    h = make_history(tmp_path)
    h.close()
    (h.root / "state.db").write_bytes(b"this is not a database at all" * 100)
    for suffix in ("-wal", "-shm"):
        (h.root / f"state.db{suffix}").unlink(missing_ok=True)
    reply = dispatch("project_history_index", {})
    assert reply["success"] is False and reply["code"] == "db_unreadable"


def test_no_database_no_job(tmp_path):
    (tmp_path / "hermes").mkdir()
    reply = dispatch("project_history_index", {})
    assert reply["success"] is False and reply["code"] == "no_db"
    assert not (tmp_path / "hermes" / "plugins").exists()


def test_cli_index_and_status_show_the_job(tmp_path, children):
    h = make_history(tmp_path)
    home = str(h.root)
    result = CliRunner().invoke(phr, ["--home", home, "index", "--json"])
    payload = json.loads(result.output)
    assert result.exit_code == 0 and payload["sessions_updated"] == 3 and payload["job"]["reason"] == "cli"
    index = Index(h.root / "plugins" / "project-history-recall")
    with index.writer(timeout=5):
        reply = finish(start_process({"T_LARGE": "0", "T_FORCE": "1"}))
        children.append(reply["job"]["pid"])
        result = CliRunner().invoke(phr, ["--home", home, "index"])
        assert result.exit_code == 0 and "already running" in result.output and reply["job_id"] in result.output
        wait_until_running(reply["job_id"])
        result = CliRunner().invoke(phr, ["--home", home, "status"])
        assert f"job {reply['job_id']}: running" in result.output
    assert wait_for_job(reply["job_id"])["state"] == "done"
    h.close()
