"""A real Hermes alongside (issue 6 §3): a SessionDB writer appending as fast as it can and a
second one rewinding and retitling, while other processes search, refresh and embed. The
writer never waits on us, searches see what was committed before they started, and two index
writers never overlap."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.stress import live  # noqa: E402 - needs the repo root on sys.path
from bench.stress.fake import embedding_server  # noqa: E402


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    with embedding_server() as server:
        yield live.run(tmp_path_factory.mktemp("live"), server.base_url, seconds=6, baseline_seconds=2,
                       lock_seconds=3)


def test_the_writer_never_waits_near_hermes_busy_timeout(report):
    load = report["writer_under_load"]
    assert load["appends"] > 100
    assert load["p99_s"] < 0.25 and load["max_s"] < 0.6, load


def test_searches_answer_and_see_what_was_committed_before_they_started(report):
    assert report["searches"] >= 3 and report["search_errors"] == 0
    assert report["visibility_checked"] >= 3
    assert report["missed_while_fresh"] == 0, report


def test_two_index_writers_never_overlap(report):
    for phase in ("writer_lock_under_load", "writer_lock_contention"):
        locks = report[phase]
        assert locks["holds"] > 0 and locks["processes"] >= 2, locks
        assert locks["overlaps"] == 0 and locks["marker_collisions"] == 0, locks
