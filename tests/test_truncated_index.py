"""An index truncated in place while Hermes is quiet heals on the next read (issue 18 §9):
the answer comes from a rebuilt index and says so; a damaged file is kept, never deleted."""

from __future__ import annotations

import pytest

from builders import History, dispatch, git_init

pytestmark = pytest.mark.usefixtures("registered_plugin")


@pytest.mark.parametrize("size", [0, 50, 4096])
def test_a_truncated_index_is_rebuilt_on_read(tmp_path, size):
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    h.session("old", repo, "the ibis rollout plan")
    h.session("now", repo)
    first = dispatch("project_history_search", {"query": "ibis rollout", "mode": "keyword"}, session_id="now")
    assert [r["session_id"] for r in first["results"]] == ["old"]
    index = h.recall().index
    with open(index.path, "r+b") as handle:  # truncated in place; state.db does not change
        handle.truncate(size)
    for suffix in ("-wal", "-shm"):
        index.path.with_name(index.path.name + suffix).unlink(missing_ok=True)
    reply = dispatch("project_history_search", {"query": "ibis rollout", "mode": "keyword"}, session_id="now")
    assert reply["success"], reply
    assert [r["session_id"] for r in reply["results"]] == ["old"]
    assert "rebuilt" in reply["index_rebuilt"]
    if size:
        assert list(index.data_dir.glob("index.db.index_*")), "the damaged file is kept for inspection"
    again = dispatch("project_history_search", {"query": "ibis rollout", "mode": "keyword"}, session_id="now")
    assert "index_rebuilt" not in again
    h.close()
