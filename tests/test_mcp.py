"""``phr mcp``: a real subprocess spoken to over stdio with the MCP SDK's own client, beside
hermes-agent 0.19.0 and its ``[mcp]`` extra in the same environment."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from builders import alpha_and_beta

TOOLS = {"project_history_search", "project_history", "project_history_index", "project_code_history"}


def test_the_server_installs_beside_hermes_and_its_mcp_extra():
    """The same environment holds hermes-agent 0.19.0 with its ``[mcp]`` extra (what Hermes imports
    for its own MCP client) and our server; pip finds nothing broken."""
    from packaging.requirements import Requirement

    hermes_wants = [r for r in map(Requirement, importlib.metadata.requires("hermes-agent") or [])
                    if r.name == "mcp" and r.marker is not None and r.marker.evaluate({"extra": "mcp"})]
    assert importlib.metadata.version("hermes-agent") == "0.19.0"
    assert hermes_wants and all(r.specifier.contains(importlib.metadata.version("mcp")) for r in hermes_wants)
    __import__("mcp.server.fastmcp")
    check = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def _server(tmp_path: Path, cwd: Path, *extra: str) -> StdioServerParameters:
    """``phr mcp`` in ``cwd`` with a tmp Hermes home and a tmp $HOME (never the real one)."""
    (tmp_path / "home").mkdir(exist_ok=True)
    env = {**os.environ, "HERMES_HOME": str(tmp_path / "hermes"), "HOME": str(tmp_path / "home"),
           "PROJECT_HISTORY_RECALL_UPDATE_CHECK": "0", "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
           "PIP_CONFIG_FILE": os.devnull}
    return StdioServerParameters(command=sys.executable, args=["-m", "project_history_recall.faces.cli", "mcp", *extra],
                                 env=env, cwd=str(cwd))


def _talk(params: StdioServerParameters, calls: list[tuple[str, dict]]) -> tuple[set[str], list[dict]]:
    """initialize, tools/list, then each tools/call; every answer's text must be the tools' JSON."""

    async def run() -> tuple[set[str], list[dict]]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            names = {tool.name for tool in (await session.list_tools()).tools}
            answers = []
            for name, arguments in calls:
                result = await session.call_tool(name, arguments)
                payload = json.loads(result.content[0].text)
                assert result.isError is (payload.get("success") is False)
                answers.append(payload)
            return names, answers

    return anyio.run(run)


def _two_projects(tmp_path: Path) -> tuple[Path, Path]:
    """Two repos, each with one session about the quokka rollout; the index built beforehand, so
    the server's freshness check has nothing to wait for."""
    h, alpha, beta = alpha_and_beta(tmp_path)
    h.session("s-alpha", alpha, "how do we ship the quokka service", "quokka ships blue-green", title="Alpha")
    h.session("s-beta", beta, "the quokka secret rotation", "rotate the quokka key monthly", title="Beta")
    h.recall().refresh()
    h.close()
    return alpha, beta


def test_phr_mcp_answers_only_for_the_project_of_its_folder(tmp_path):
    alpha, _ = _two_projects(tmp_path)
    names, (search, opened, other, timeline, everywhere, unknown) = _talk(_server(tmp_path, alpha), [
        ("project_history_search", {"query": "quokka", "mode": "keyword"}),
        ("project_history", {"operation": "session", "session_id": "s-alpha"}),
        ("project_history", {"operation": "session", "session_id": "s-beta"}),
        ("project_history", {"operation": "timeline"}),
        ("project_history_search", {"query": "quokka", "mode": "keyword", "scope": "all"}),
        ("project_session_move", {"project_id": ""}),
    ])
    assert names == TOOLS
    # No current session: the folder's own sessions all count, the other project's never appear.
    assert [r["session_id"] for r in search["results"]] == ["s-alpha"]
    assert opened["success"] is True
    assert other == {"success": False, "error": other["error"], "code": "not_in_project"}
    assert [s["session_id"] for s in timeline["sessions"]] == ["s-alpha"]
    assert everywhere["code"] == "cross_project_disabled"
    assert unknown["code"] == "unknown_tool"


def test_cwd_flag_names_the_project_when_the_host_starts_the_server_elsewhere(tmp_path):
    _, beta = _two_projects(tmp_path)
    _, (search, bad) = _talk(_server(tmp_path, tmp_path, "--cwd", str(beta)), [
        ("project_history_search", {"query": "quokka", "mode": "keyword"}),
        ("project_history_search", {"query": "quokka", "mode": "sideways"}),
    ])
    assert [r["session_id"] for r in search["results"]] == ["s-beta"]
    assert bad["success"] is False and bad["code"]


def test_results_from_claude_code_and_codex_carry_their_source(tmp_path, monkeypatch):
    """Other agents' histories answer over MCP too, each result saying which agent it came from;
    the other project's transcripts never appear."""
    from agent_transcripts import Claude, Codex

    alpha, beta = _two_projects(tmp_path)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    mine = Claude(tmp_path / "claude", "5d1e0c2a-0000-4000-8000-000000000001", alpha)
    mine.user("is the quokka service behind the load balancer")
    theirs = Claude(tmp_path / "claude", "5d1e0c2a-0000-4000-8000-000000000002", beta)
    theirs.user("the quokka key lives in beta")
    rollout = Codex(tmp_path / "codex", "5d1e0c2a-0000-4000-8000-000000000003", alpha)
    rollout.meta()
    rollout.user("add a quokka health check")
    _, (search, opened) = _talk(_server(tmp_path, alpha), [
        ("project_history_search", {"query": "quokka", "mode": "keyword"}),
        ("project_history", {"operation": "session", "session_id": f"@session:{mine.session_id}"}),
    ])
    assert {(r["session_id"], r["source"]) for r in search["results"]} == {
        ("s-alpha", "hermes"), (mine.session_id, "claude-code"), (rollout.session_id, "codex")}
    assert opened["session"]["source"] == "claude-code"
