"""Manual driver: one offline ``hermes -z`` run against the scripted fake LLM; prints JSON.

    python tests/e2e/run_hermes_oneshot.py --hermes-home /tmp/h --cwd /path/to/repo \\
        --prompt "what did we decide?" --tool project_history_search \\
        --args '{"query": "retry policy", "mode": "keyword"}' [--enable project-history-recall]

``--script FILE`` gives a full script instead of ``--tool/--args/--final`` (format in
``tests/fakes/llm_server.py``).  ``--init`` (re)writes an offline config.yaml first.
Prints returncode, stdout, stderr, the tool results sent back to the model, the request
kinds, timings and the work dir (which keeps requests.jsonl, server.log, ...).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from e2e import harness
else:
    from . import harness


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--hermes-home", required=True)
    ap.add_argument("--cwd", required=True)
    ap.add_argument("--prompt", required=True)
    ap.add_argument("--script", help="JSON script file")
    ap.add_argument("--tool", help="tool the fake model calls first")
    ap.add_argument("--args", default="{}", help="JSON arguments for --tool")
    ap.add_argument("--final", default="Done.", help="final answer after the tool result")
    ap.add_argument("--enable", action="append", default=[], help="plugin to enable (with --init)")
    ap.add_argument("--init", action="store_true", help="write an offline config.yaml first")
    ap.add_argument("--timeout", type=float, default=120.0)
    a = ap.parse_args(argv)

    home = Path(a.hermes_home).resolve()
    if a.init or not (home / "config.yaml").exists():
        harness.make_hermes_home(home, plugins_enabled=a.enable)
    if a.script:
        script = json.loads(Path(a.script).read_text(encoding="utf-8"))
    elif a.tool:
        script = harness.tool_call_script(a.tool, json.loads(a.args), final=a.final)
    else:
        script = harness.plain_answer_script(a.final)

    res = harness.run_hermes_oneshot(home, a.prompt, a.cwd, script, timeout=a.timeout)
    out = {
        "returncode": res.returncode,
        "timed_out": res.timed_out,
        "error": res.error,
        "stdout": res.stdout,
        "stderr": res.stderr[-4000:],
        "advertised_tools": res.advertised_tools(),
        "tool_results": {a.tool: res.tool_results(a.tool)} if a.tool else None,
        "requests": [(r.get("method"), r.get("path"), r.get("kind")) for r in res.requests],
        "timings": res.timings,
        "work_dir": str(res.work_dir),
    }
    print(json.dumps(out, indent=2, ensure_ascii=False, default=str))
    return 0 if res.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
