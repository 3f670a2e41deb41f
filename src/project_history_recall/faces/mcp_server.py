"""``phr mcp``: the model's tools over the Model Context Protocol (stdio), for any MCP host
(Claude Code, Codex, Hermes's own ``mcp_servers:``).

The same tools, names and JSON as the Hermes plugin (:mod:`.tools`), minus the move, which
changes a Hermes session and has no meaning here. The asker is a folder, not a session: the
project of the folder the server was started in (how Claude Code and Codex start servers),
or of ``--cwd``. That folder is the person's configuration; the model cannot pick another
per call, so the tools keep the plugin's rule (this project only, unless the user enabled
``allow_cross_project``). There is no current session, so nothing is excluded as current.

Importing this module loads the MCP SDK; ``phr`` imports it only for ``phr mcp``.
"""

from __future__ import annotations

import importlib.metadata
import json
from collections.abc import Callable
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from project_history_recall.errors import RecallError
from project_history_recall.faces import tools
from project_history_recall.faces.tools import Asker

NAME = "project-history-recall"


def _version() -> str:
    try:
        return importlib.metadata.version(NAME)
    except importlib.metadata.PackageNotFoundError:
        return "0"


def build_server(recall_factory: Callable[[], Any], cwd: str) -> Server:
    """A server whose every tool asks as the folder ``cwd``."""
    asker = Asker(cwd=cwd)
    handlers = tools.make_handlers(recall_factory, lambda _context: asker)
    server: Server = Server(NAME, version=_version())
    listed = [types.Tool(name=name, description=schema["description"], inputSchema=schema["parameters"])
              for name, schema in tools.SCHEMAS.items()]

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return listed

    # Our own argument checks answer bad input with the tools' JSON error, as in Hermes.
    @server.call_tool(validate_input=False)
    async def call_tool(name: str, arguments: dict) -> types.CallToolResult:
        handler = handlers.get(name)
        if handler is None:
            text = json.dumps(RecallError(f"unknown tool {name!r}", "unknown_tool").as_dict())
        else:
            # Handlers block (a refresh, an embedding): off the event loop, so pings still answer.
            text = await anyio.to_thread.run_sync(handler, arguments)
        failed = json.loads(text).get("success") is False
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=failed)

    return server


def serve(recall_factory: Callable[[], Any], cwd: str) -> None:
    """Answer MCP on stdin/stdout until the host closes them."""
    server = build_server(recall_factory, cwd)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)
