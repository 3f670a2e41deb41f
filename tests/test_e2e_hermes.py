"""End to end: the real ``hermes -z`` loads the plugin, the scripted model calls
``project_history_search``, and what Hermes sends back to the model is checked.

Everything runs in a private network namespace (``unshare -n``) with a fake
OpenAI-compatible server on its loopback; see ``tests/e2e/harness.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

try:  # tests/ is on sys.path (rootdir-less layout, pytest's default "prepend" import mode)
    from e2e import harness
except ImportError:  # tests/ became a package
    from tests.e2e import harness  # type: ignore[no-redef]

pytestmark = pytest.mark.e2e

PLUGIN = "project-history-recall"
TOOL = "project_history_search"

SID_A1 = "20261101_090000_a1a1a1"
SID_A2 = "20261102_090000_a2a2a2"
SID_B1 = "20261103_090000_b1b1b1"

A_DECISION = "For the retry policy we chose exponential backoff with jitter in the payments worker."
A_FOLLOWUP = "Retry policy detail: exponential backoff starts at 0.5 s, at most 5 attempts, payments only."
B_DECISION = "For the retry policy we chose exponential backoff in the mobile uploader."
B_ONLY_WORD = "uploader"
FINAL = "You chose exponential backoff with jitter."


@pytest.fixture(scope="module", autouse=True)
def _netns() -> None:
    harness.require_netns()


def _two_projects(tmp_path: Path) -> dict[str, Any]:
    """HERMES_HOME with the plugin enabled, project A (git repo) and project B (plain folder),
    earlier sessions in both that use the same words."""
    home = harness.make_hermes_home(tmp_path / "hermes", plugins_enabled=[PLUGIN])
    proj_a = harness.git_init(tmp_path / "projA")
    (proj_a / "src").mkdir()
    proj_b = tmp_path / "projB"
    proj_b.mkdir()
    (proj_b / "main.py").write_text("print('b')\n", encoding="utf-8")

    a1 = harness.seed_session(
        home, SID_A1, proj_a, [("user", A_DECISION), ("assistant", "Agreed, exponential backoff with jitter.")]
    )
    # a session started in a subfolder of repo A belongs to project A too
    a2 = harness.seed_session(
        home, SID_A2, proj_a / "src", [("user", "What about retries?"), ("assistant", A_FOLLOWUP)]
    )
    b1 = harness.seed_session(
        home, SID_B1, proj_b, [("user", B_DECISION), ("assistant", "Agreed for the mobile uploader.")]
    )
    return {"home": home, "a": proj_a, "b": proj_b, "a1": a1, "a2": a2, "b1": b1}


def _search(setup: dict[str, Any], cwd: Path, arguments: dict[str, Any]) -> tuple[harness.OneshotResult, str]:
    before = {r["id"] for r in harness.session_rows(setup["home"])}
    res = harness.run_hermes_oneshot(
        setup["home"],
        "What did we decide about the retry policy earlier?",
        cwd,
        harness.tool_call_script(TOOL, arguments, final=FINAL),
    )
    assert res.returncode == 0, res.describe()
    assert res.stdout.strip() == FINAL, res.describe()
    assert TOOL in res.advertised_tools(), f"{TOOL} not offered to the model:\n{res.describe()}"
    msgs = res.tool_messages(TOOL)
    assert len(msgs) == 1, res.describe()
    [new] = harness.new_sessions(setup["home"], before)
    assert new["cwd"] == str(cwd)
    setup["current_session"] = new["id"]
    return res, harness.message_text(msgs[0]["content"])


def test_keyword_search_from_project_a_returns_only_project_a(tmp_path: Path) -> None:
    setup = _two_projects(tmp_path)
    _res, text = _search(setup, setup["a"], {"query": "retry policy", "mode": "keyword"})
    payload = json.loads(text)

    assert payload["success"] is True, payload
    results = payload["results"]
    by_session = {r["session_id"]: r for r in results}
    assert SID_A1 in by_session, payload

    hit = by_session[SID_A1]
    assert hit["link"] == f"@session:{SID_A1}"
    assert hit["message_id"] in setup["a1"]
    assert "backoff" in hit["snippet"].lower()

    # nothing from project B, in any field
    assert SID_B1 not in text
    assert B_ONLY_WORD not in text
    assert not set(by_session) - {SID_A1, SID_A2}, payload
    # the one-shot session itself (whose prompt also says "retry policy") is not a result
    assert setup["current_session"] not in by_session

    assert payload["sessions_in_scope"] >= 1
    assert "semantic_status" in payload


def test_search_from_project_b_returns_only_project_b(tmp_path: Path) -> None:
    setup = _two_projects(tmp_path)
    _res, text = _search(setup, setup["b"], {"query": "retry policy", "mode": "keyword"})
    payload = json.loads(text)

    assert payload["success"] is True, payload
    ids = {r["session_id"] for r in payload["results"]}
    assert ids == {SID_B1}, payload
    assert SID_A1 not in text and SID_A2 not in text
    assert "payments" not in text
