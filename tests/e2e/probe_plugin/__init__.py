"""Test-only Hermes plugin: tool ``kw_probe`` (toolset ``kwprobe``) echoes its call.

Copied into ``$HERMES_HOME/plugins/kw-probe/`` by the e2e tests to record, from inside a
real ``hermes -z`` run, which positional args / kwargs a plugin tool handler receives.
"""

import json
import os

SCHEMA = {
    "name": "kw_probe",
    "description": "Echo the arguments and call context (test probe).",
    "parameters": {
        "type": "object",
        "properties": {"note": {"type": "string", "description": "anything"}},
        "required": [],
    },
}


def _jsonable(value):
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


def _db_view(session_id):
    """The current session's row and messages as state.db holds them while the tool runs."""
    import sqlite3

    home = os.environ.get("HERMES_HOME") or os.path.expanduser("~/.hermes")
    path = os.path.join(home, "state.db")
    if not session_id or not os.path.exists(path):
        return None
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        row = con.execute(
            "SELECT cwd, git_repo_root, source, ended_at FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        msgs = con.execute(
            "SELECT role, substr(COALESCE(content, ''), 1, 80) FROM messages WHERE session_id = ? ORDER BY id",
            (session_id,),
        ).fetchall()
    finally:
        con.close()
    return {
        "row": None if row is None else {"cwd": row[0], "git_repo_root": row[1], "source": row[2], "ended_at": row[3]},
        "messages": [list(m) for m in msgs],
    }


def _handler(args, **kwargs):
    try:
        from gateway.session_context import get_session_env

        ctx_session = get_session_env("HERMES_SESSION_ID", "")
    except Exception as exc:  # pragma: no cover - diagnostic only
        ctx_session = f"<error {exc}>"
    session_id = kwargs.get("session_id") or ""
    db_view = _db_view(session_id)
    return json.dumps(
        {
            "db_at_call_time": db_view,
            "success": True,
            "args": _jsonable(args),
            "kwargs": {k: _jsonable(v) for k, v in sorted(kwargs.items())},
            "cwd": os.getcwd(),
            "env_HERMES_HOME": os.environ.get("HERMES_HOME"),
            "env_HERMES_SESSION_ID": os.environ.get("HERMES_SESSION_ID"),
            "context_session_id": ctx_session,
        }
    )


def register(ctx):
    ctx.register_tool(name="kw_probe", toolset="kwprobe", schema=SCHEMA, handler=_handler)
