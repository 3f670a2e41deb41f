"""End to end: the real ``hermes -z`` offers ``project_history`` and ``project_history_index``,
the scripted model calls them, and what Hermes hands back is checked (offline, in a netns)."""

from __future__ import annotations

from pathlib import Path

import pytest

try:
    from e2e import harness
except ImportError:  # tests/ became a package
    from tests.e2e import harness  # type: ignore[no-redef]

pytestmark = pytest.mark.e2e

PLUGIN = "project-history-recall"
FINAL = "Here is the history."


@pytest.fixture(scope="module", autouse=True)
def _netns() -> None:
    harness.require_netns()


def test_the_model_browses_and_indexes_through_hermes(tmp_path: Path) -> None:
    home = harness.make_hermes_home(tmp_path / "hermes", plugins_enabled=[PLUGIN])
    repo = harness.git_init(tmp_path / "repo")
    other = tmp_path / "other"
    other.mkdir()
    harness.seed_session(home, "20261101_090000_aaaaaa", repo, [("user", "plan the heron release"),
                                                                ("assistant", "tag, build, publish")])
    harness.seed_session(home, "20261102_090000_bbbbbb", other, [("user", "unrelated otter notes")])
    script = {
        "model": harness.FAKE_MODEL,
        "turns": [
            {"tool_calls": [{"name": "project_history", "arguments": {"operation": "timeline"}}]},
            {"tool_calls": [{"name": "project_history", "arguments": {"operation": "session",
                                                                      "session_id": "20261101"}}]},
            {"tool_calls": [{"name": "project_history_index", "arguments": {}}]},
            {"tool_calls": [{"name": "project_history", "arguments": {"operation": "status"}}]},
            {"content": FINAL},
        ],
        "aux_content": "Fake title",
    }
    res = harness.run_hermes_oneshot(home, "What did we do in this project before?", repo, script)
    assert res.returncode == 0, res.describe()
    assert res.stdout.strip() == FINAL, res.describe()
    assert {"project_history", "project_history_index"} <= set(res.advertised_tools()), res.describe()
    timeline, opened, status = res.tool_results("project_history")
    ids = [s["session_id"] for s in timeline["sessions"]]
    assert "20261101_090000_aaaaaa" in ids and "20261102_090000_bbbbbb" not in ids, timeline
    assert opened["session"]["session_id"] == "20261101_090000_aaaaaa"
    assert [e["text"] for e in opened["entries"]] == ["plan the heron release", "tag, build, publish"]
    (indexed,) = res.tool_results("project_history_index")
    assert indexed["success"] and indexed["status"] == "done", indexed
    assert status["index_status"] == "ready" and status["sessions_indexed"] >= 2, status
