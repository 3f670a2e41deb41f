"""Self-tests of the e2e machinery: the fake LLM server, and real ``hermes -z`` runs
that use only a built-in tool or a test-only probe plugin (independent of this project's
plugin), so a failure here means the harness (or Hermes) broke, not the plugin.
"""

from __future__ import annotations

import http.client
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from . import harness
from .harness import FAKE_MODEL

HERE = Path(__file__).resolve().parent
PROBE_PLUGIN = HERE / "probe_plugin"

# The fake server module lives in tests/fakes; import it by path so this works whatever
# sys.path pytest chose.
import importlib.util  # noqa: E402

_spec = importlib.util.spec_from_file_location("phr_fake_llm_server", HERE.parent / "fakes" / "llm_server.py")
assert _spec and _spec.loader
llm_server = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(llm_server)


# -- fake server, in-process on 127.0.0.1 ----------------------------------------


@pytest.fixture()
def fake_server(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    log = tmp_path / "req.jsonl"
    script = llm_server.load_script(
        text=json.dumps(harness.tool_call_script("echo_tool", {"q": "retry policy"}, final="all done"))
    )
    server = llm_server.FakeLLMServer(("127.0.0.1", 0), script, str(log))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], log
    finally:
        server.shutdown()
        server.server_close()


def _post(port: int, body: dict[str, Any]) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read().decode()
    conn.close()
    return resp.status, data


TOOLS = [{"type": "function", "function": {"name": "echo_tool", "parameters": {"type": "object"}}}]


def test_fake_server_plain_json_turns(fake_server: tuple[int, Path]) -> None:
    port, log = fake_server
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    status, data = _post(port, {"model": FAKE_MODEL, "messages": msgs, "tools": TOOLS})
    assert status == 200
    msg = json.loads(data)["choices"][0]["message"]
    call = msg["tool_calls"][0]
    assert call["function"]["name"] == "echo_tool"
    assert json.loads(call["function"]["arguments"]) == {"q": "retry policy"}
    assert json.loads(data)["choices"][0]["finish_reason"] == "tool_calls"

    msgs += [msg, {"role": "tool", "tool_call_id": call["id"], "content": '{"ok": 1}'}]
    status, data = _post(port, {"model": FAKE_MODEL, "messages": msgs, "tools": TOOLS})
    assert json.loads(data)["choices"][0]["message"]["content"] == "all done"

    # auxiliary request (no tools): aux answer, script position untouched
    status, data = _post(port, {"model": FAKE_MODEL, "messages": [{"role": "user", "content": "title?"}]})
    assert json.loads(data)["choices"][0]["message"]["content"] == "Fake title"

    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["kind"] for e in entries] == ["main", "main", "aux"]
    assert entries[1]["tool_messages"] == [{"role": "tool", "tool_call_id": call["id"], "content": '{"ok": 1}'}]


def test_fake_server_streaming_parses_with_openai_sdk(fake_server: tuple[int, Path]) -> None:
    """The SSE stream must be something the OpenAI SDK (what Hermes uses) accumulates."""
    openai = pytest.importorskip("openai")
    port, _log = fake_server
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
    stream = client.chat.completions.create(
        model=FAKE_MODEL,
        messages=[{"role": "user", "content": "hi"}],
        tools=TOOLS,
        stream=True,
        stream_options={"include_usage": True},
    )
    name, args, finish, usage = "", "", None, None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for choice in chunk.choices:
            for tc in choice.delta.tool_calls or []:
                if tc.function is not None:
                    name += tc.function.name or ""
                    args += tc.function.arguments or ""
            finish = choice.finish_reason or finish
    assert name == "echo_tool"
    assert json.loads(args) == {"q": "retry policy"}
    assert finish == "tool_calls"
    assert usage is not None and usage.total_tokens > 0
    models = client.models.list()
    assert [m.id for m in models.data] == [FAKE_MODEL]


# -- real hermes -z in a private network namespace --------------------------------


@pytest.fixture(scope="module")
def netns() -> None:
    harness.require_netns()


@pytest.mark.e2e
def test_oneshot_plain_answer(tmp_path: Path, netns: None) -> None:
    home = harness.make_hermes_home(tmp_path / "hermes")
    proj = tmp_path / "proj"
    proj.mkdir()
    res = harness.run_hermes_oneshot(home, "say hi", proj, harness.plain_answer_script("Hi from the fake."))
    assert res.returncode == 0, res.describe()
    assert res.stdout.strip() == "Hi from the fake.", res.describe()
    mains = res.main_requests()
    assert len(mains) == 1, res.describe()
    body = mains[0]["body"]
    assert body["model"] == FAKE_MODEL
    assert body["messages"][-1] == {"role": "user", "content": "say hi"}


@pytest.mark.e2e
def test_oneshot_builtin_tool_result_is_sent_back(tmp_path: Path, netns: None) -> None:
    home = harness.make_hermes_home(tmp_path / "hermes")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "notes.txt").write_text("MARKER-7f3a exponential backoff\n", encoding="utf-8")
    script = harness.tool_call_script("read_file", {"path": str(proj / "notes.txt")}, final="read it")
    res = harness.run_hermes_oneshot(home, "read notes.txt", proj, script)
    assert res.returncode == 0, res.describe()
    assert res.stdout.strip() == "read it"
    assert "read_file" in res.advertised_tools()
    results = res.tool_messages("read_file")
    assert len(results) == 1, res.describe()
    assert "MARKER-7f3a" in harness.message_text(results[0]["content"])


@pytest.mark.e2e
def test_plugin_handler_kwargs_and_current_session(tmp_path: Path, netns: None) -> None:
    """Documents how a directory plugin's tool handler is called in a real ``hermes -z`` run."""
    home = harness.make_hermes_home(tmp_path / "hermes", plugins_enabled=["kw-probe"])
    shutil.copytree(PROBE_PLUGIN, home / "plugins" / "kw-probe")
    proj = harness.git_init(tmp_path / "proj")
    harness.seed_session(home, "20200101_000000_aaaaaa", proj, [("user", "old question"), ("assistant", "old")])
    before = {r["id"] for r in harness.session_rows(home)}

    res = harness.run_hermes_oneshot(
        home, "probe please", proj, harness.tool_call_script("kw_probe", {"note": "hi"}, final="probed")
    )
    assert res.returncode == 0, res.describe()
    assert "kw_probe" in res.advertised_tools(), res.describe()
    [probe] = res.tool_results("kw_probe")
    assert probe["args"] == {"note": "hi"}
    # handler(args, **kwargs): exactly these kwargs for a plugin tool in a CLI run
    assert set(probe["kwargs"]) == {"session_id", "task_id", "user_task"}
    assert probe["kwargs"]["user_task"] is None
    assert probe["cwd"] == str(proj)
    assert probe["env_HERMES_HOME"] == str(home)

    [new] = harness.new_sessions(home, before)
    sid = new["id"]
    assert probe["kwargs"]["session_id"] == sid == probe["env_HERMES_SESSION_ID"] == probe["context_session_id"]
    assert new["source"] == "cli"
    assert new["cwd"] == str(proj)  # os.getcwd() of the hermes process
    assert new["git_repo_root"] is None  # -z never records the repo root
    # while the tool runs, the current session row and its first messages are already stored
    db = probe["db_at_call_time"]
    assert db["row"]["cwd"] == str(proj)
    assert db["messages"][0] == ["user", "probe please"]
