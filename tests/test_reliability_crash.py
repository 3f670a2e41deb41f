"""Crash safety (issue 6 §1): SIGKILL at seeded points of a full build, an incremental refresh,
an embedding run and a ``phr index`` job; writers of the state files killed in a loop.

The CI subset: 12 index kill points and 15 state-file kills on a small corpus. The stress run
(``python -m bench.stress.run``) does the same with more points on a larger corpus; see
docs/reliability.md. What each kill is checked for is in ``bench/stress/crash.py``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.stress import crash, world  # noqa: E402 - needs the repo root on sys.path
from bench.stress.fake import embedding_server  # noqa: E402

KILLS = {"full_build": 4, "incremental_refresh": 3, "embedding_run": 3, "phr_index_job": 2, "state_files": 15}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    work = tmp_path_factory.mktemp("crash")
    with embedding_server() as server:
        yield crash.run(work, sessions=300, messages=4500, embed_sessions=40, embed_messages=600, kills=KILLS,
                        seed=6, server_url=server.base_url)


def _scenario(report: dict, name: str) -> dict:
    return next(s for s in report["scenarios"] if s["name"] == name)


@pytest.mark.parametrize("name", ["full_build", "incremental_refresh", "embedding_run", "phr_index_job"])
def test_every_kill_point_leaves_a_sound_index_that_recovers_to_the_same_content(report, name):
    scenario = _scenario(report, name)
    assert scenario["tried"] >= KILLS[name] - 1, scenario  # a kill can land after the run finished
    assert scenario["failures"] == [], scenario["failures"]
    assert scenario["survived"] == scenario["tried"]


def test_at_least_ten_index_kill_points_in_ci(report):
    assert report["kill_points_tried"] >= 10
    assert report["kill_points_survived"] == report["kill_points_tried"]


def test_state_files_are_never_half_written(report):
    scenario = _scenario(report, "state_files")
    assert scenario["tried"] >= 10 and scenario["failures"] == [], scenario["failures"]


def test_a_process_notices_that_the_index_file_was_replaced(tmp_path):
    from hermes_state import SessionDB

    from project_history_recall.index.store import Index
    from project_history_recall.recall import Recall

    home = tmp_path / "hermes"
    repo = world.git_init(tmp_path / "repo")
    db = SessionDB(db_path=home / "state.db")
    for n in range(30):
        db.create_session(f"s{n}", "cli", cwd=str(repo))
        db.append_message(f"s{n}", "user", f"note {n} about the ibex", timestamp=1.7e9 + n)
    db.close()
    world.write_config(home)
    time.sleep(1.2)  # past the change marker's racy window (1 s): the marker is trusted from now on
    Recall(home).refresh()
    time.sleep(1.2)
    Recall(home).refresh()  # now the process remembers "state.db unchanged since the index was fresh"
    # Another process found the file damaged, moved it aside and was killed early in the rebuild,
    # after SQLite's first checkpoint (a real build checkpoints every 1000 pages).
    world.restore_index(home, None)
    Index(world.data_dir(home)).connect().close()
    world.checkpoint(world.data_dir(home) / "index.db")
    time.sleep(1.2)
    Recall(home).refresh()
    conn = Recall(home).index.connect_readonly()
    assert conn is not None
    assert conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == 30
