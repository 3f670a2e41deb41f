"""A small demo Hermes home, written through Hermes's own APIs, and a guided run over it.

Used by ``phr demo`` (the README's quick start) when the user has no history of
their own. Three projects: an explicit one, an auto (git) one in Chinese, and
a nested explicit project; plus a Home session.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from project_history_recall.hermes_home import HermesHome

DAY = 86400.0

# (project folder, session id, title, [(role, content, tool_call)])
DEMO_SESSIONS: list[tuple[str, str, str, list[tuple[str, str, dict | None]]]] = [
    ("shop-api", "20261103_091500_a1b2c3", "Retry policy for the payment client", [
        ("user", "The payment client keeps failing when the gateway is slow. What retry policy should we use?", None),
        ("assistant", "Let's use exponential backoff with jitter: base 200ms, factor 2, max 5 attempts. "
                      "I'll put it in RetryPolicy in src/payments/client.py.", None),
        ("assistant", "", {"name": "patch", "arguments": {"path": "src/payments/client.py",
                                                          "old_string": "MAX_RETRIES = 1",
                                                          "new_string": "MAX_RETRIES = 5"}}),
        ("tool", "Patch applied", None),
        ("user", "Good. Also make E_GATEWAY_TIMEOUT retryable.", None),
        ("assistant", "Done: E_GATEWAY_TIMEOUT and HTTP 503 are now retryable; 4xx are not.", None),
    ]),
    ("shop-api", "20261110_140000_d4e5f6", "Flaky login test", [
        ("user", "tests/test_auth.py::test_login is flaky on CI", None),
        ("assistant", "", {"name": "terminal", "arguments": {"command": "pytest tests/test_auth.py -x -q --count 20"}}),
        ("tool", "3 failed, 17 passed", None),
        ("assistant", "The auth request kept timing out under load; I raised the client timeout from 2s to "
                      "10s and the test passed 20 times in a row.", None),
    ]),
    ("shop-api/services/billing", "20261115_100000_0a0b0c", "Billing invoices PDF", [
        ("user", "Generate invoice PDFs with weasyprint instead of reportlab", None),
        ("assistant", "Switched invoice rendering to weasyprint; templates live in billing/templates/.", None),
    ]),
    ("ad-sdk", "20261120_200000_f1f2f3", "广告SDK缓存问题", [
        ("user", "我今天在改广告SDK，重跑gen-itgc后缓存失效了", None),
        ("assistant", "缓存失效是因为 settings-prod.yaml 里的 TTL 太短，我把 cache_ttl 从 60 改成 3600。", None),
        ("assistant", "", {"name": "terminal", "arguments": {"command": "make gen-itgc && make test"}}),
        ("tool", "ok", None),
    ]),
    ("ad-sdk", "20261125_093000_c7c8c9", "开屏广告点击统计", [
        ("user", "开屏广告的点击统计不准，怎么排查？", None),
        ("assistant", "点击事件在 ClickTracker.report() 里被重复上报了，加了去重逻辑。", None),
    ]),
    ("", "20261126_080000_e0e0e0", "Weekend plans", [
        ("user", "Remind me what retry policy means in general", None),
        ("assistant", "A retry policy decides when and how often a failed operation is tried again.", None),
    ]),
]


def build_demo_home(root: Path) -> HermesHome:
    """Write the demo history into ``root`` (a Hermes home) and real project folders beside it."""
    from hermes_cli import projects_db
    from hermes_state import SessionDB

    home = HermesHome(root)
    work = root.parent / "demo-work"
    for folder in ("shop-api/services/billing", "ad-sdk"):
        (work / folder).mkdir(parents=True, exist_ok=True)
    for repo in ("shop-api", "ad-sdk"):
        if not (work / repo / ".git").exists():
            subprocess.run(["git", "init", "-q", str(work / repo)], check=True)
    root.mkdir(parents=True, exist_ok=True)
    with projects_db.connect_closing(home.projects_db) as conn:
        if not projects_db.list_projects(conn):
            projects_db.create_project(conn, name="Shop API", folders=[str(work / "shop-api")])
            projects_db.create_project(conn, name="Billing", folders=[str(work / "shop-api/services/billing")])
    db = SessionDB(db_path=home.state_db)
    try:
        start = time.time() - 30 * DAY
        for n, (folder, sid, title, messages) in enumerate(DEMO_SESSIONS):
            if db.get_session(sid):
                continue
            cwd = str(work / folder) if folder else str(Path.home())
            db.create_session(sid, "cli", cwd=cwd)
            t = start + n * 4 * DAY
            for i, (role, content, call) in enumerate(messages):
                calls = None
                if call:
                    calls = [{"id": f"call_{sid}_{i}", "type": "function",
                              "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])}}]
                tool_call_id = f"call_{sid}_{i - 1}" if role == "tool" else None
                db.append_message(sid, role, content, tool_calls=calls, tool_call_id=tool_call_id,
                                  tool_name=messages[i - 1][2]["name"] if role == "tool" else None,  # type: ignore[index]
                                  timestamp=t + i * 60)
            db.set_session_title(sid, title)
        db.create_session("20261130_120000_ask001", "cli", cwd=str(work / "shop-api"))
        db.create_session("20261130_120500_ask002", "cli", cwd=str(work / "ad-sdk"))
    finally:
        db.close()
    return home


DEMO_QUERIES = [
    ("20261130_120000_ask001", "what retry policy did we choose"),
    ("20261130_120000_ask001", "E_GATEWAY_TIMEOUT"),
    ("20261130_120000_ask001", "what exactly did we run for the flaky login test"),
    ("20261130_120500_ask002", "广告"),
    ("20261130_120500_ask002", "gen-itgc 缓存"),
]


def run_demo(home: HermesHome, demo_root: Path | None, *, echo: Callable[[str], None],
             print_search: Callable[[dict], None]) -> dict:
    """Prints the demo for a person (``echo``, ``print_search``) and returns the same as data
    (what ``phr demo --json`` shows): the home used, the index report and each search."""
    from project_history_recall.recall import Recall

    if home.state_db.is_file() and demo_root is None:
        echo(f"Using your Hermes history at {home.root} (read-only).")
        recall = Recall(home)
        report = recall.refresh(progress=None)
        echo(f"Indexed {report.sessions_updated} changed sessions of {report.sessions_total} "
             f"in {report.seconds:.2f}s.")
        status = recall.status()
        echo(f"{status.get('sessions_indexed')} sessions, {status.get('messages_indexed')} messages indexed.")
        echo('Try: phr search "what did we decide about X" --cwd /path/to/your/project')
        return {"success": True, "hermes_home": str(home.root), "demo": False, "index": report.as_dict(),
                "searches": []}
    root = demo_root or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / \
        "project-history-recall" / "demo-home"
    echo(f"No Hermes history found at {home.root}; building a demo one at {root}.")
    demo_home = build_demo_home(root)
    recall = Recall(demo_home)
    report = recall.refresh()
    echo(f"Indexed {report.sessions_total} sessions ({report.messages_read} messages) in {report.seconds:.2f}s.\n")
    searches = []
    for session_id, query in DEMO_QUERIES:
        echo(f"$ phr --home {root} search --session {session_id} {query!r}")
        found = recall.search(query, session_id=session_id, limit=3)
        searches.append(found)
        print_search(found)
        echo("")
    return {"success": True, "hermes_home": str(root), "demo": True, "index": report.as_dict(), "searches": searches}
