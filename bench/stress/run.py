"""The stress run: every reliability theme at full length, figures to ``bench/out/stress.json``.

``python -m bench.stress.run`` (about 15-20 minutes on 2 cores) or ``--quick`` (the CI
sizes, 3-4 minutes). ``--only crash,fuzz`` runs some themes; ``--work DIR`` keeps the work
folders (default: a temporary folder outside any git repository, removed at the end).
The printed figures are the ones quoted in docs/reliability.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from .world import ROOT, child_env, python

THEMES = ("crash", "corruption", "hostile", "fuzz", "isolation", "privacy", "live")

FULL = {
    "crash": {"sessions": 1200, "messages": 20000, "embed_sessions": 150, "embed_messages": 2500,
              "kills": {"full_build": 20, "incremental_refresh": 15, "embedding_run": 10, "phr_index_job": 5,
                        "state_files": 100}},
    "corruption": {"random_pages": 60},
    "hostile": {"examples": 300, "surrogate_examples": 60},
    "fuzz": {"seconds": 120},
    "isolation": {"layouts": 100},
    "live": {"seconds": 30, "baseline_seconds": 10, "lock_seconds": 10},
}
QUICK = {
    "crash": {"sessions": 300, "messages": 4500, "embed_sessions": 40, "embed_messages": 600,
              "kills": {"full_build": 4, "incremental_refresh": 3, "embedding_run": 3, "phr_index_job": 2,
                        "state_files": 15}},
    "corruption": {"random_pages": 5},
    "hostile": {"examples": 30, "surrogate_examples": 10},
    "fuzz": {"seconds": 15},
    "isolation": {"layouts": 8},
    "live": {"seconds": 6, "baseline_seconds": 2, "lock_seconds": 3},
}


def _machine() -> dict[str, Any]:
    try:
        import hermes_cli

        hermes = getattr(hermes_cli, "__version__", None)
    except Exception:
        hermes = None
    from importlib.metadata import version

    return {"python": platform.python_version(), "sqlite": sqlite3.sqlite_version, "cpus": os.cpu_count(),
            "platform": platform.platform(), "hermes_agent": hermes or version("hermes-agent"),
            "project_history_recall": version("project-history-recall"), "load_average": os.getloadavg()}


def theme_crash(work: Path, p: dict, server) -> dict:
    from . import crash

    return crash.run(work / "crash", server_url=server.base_url, **p)


def theme_corruption(work: Path, p: dict, server) -> dict:
    from . import corruption

    return corruption.run(work / "corruption", **p)


def theme_hostile(work: Path, p: dict, server) -> dict:
    from . import hostile

    sys.path.insert(0, str(ROOT / "tests"))
    from builders import register_plugin

    out: dict[str, Any] = {}
    for label, examples, surrogates in (("main", p["examples"], False),
                                        ("with_lone_surrogates", p["surrogate_examples"], True)):
        w = hostile.build_world(work / f"hostile-{label}", server.base_url)
        w.surrogates = surrogates
        os.environ["HERMES_HOME"] = str(w.home)
        register_plugin()
        out[label] = hostile.run_properties(w, examples)
    return out


def theme_fuzz(work: Path, p: dict, server) -> dict:
    out = work / "fuzz-tokenizer.json"
    started = time.monotonic()
    proc = subprocess.run([python(), "-m", "bench.stress.fuzz_tokenizer", "--seconds", str(p["seconds"]), "--out",
                           str(out)], env=child_env(), cwd=str(ROOT), capture_output=True, text=True,
                          timeout=p["seconds"] + 300)
    data = json.loads(out.read_text()) if out.exists() else {"error": proc.stderr[-2000:]}
    data["wall_seconds"] = round(time.monotonic() - started, 1)
    data["exit_code"] = proc.returncode
    tail = [line for line in proc.stderr.splitlines() if line.startswith("Done ")]
    data["libfuzzer"] = tail[-1] if tail else ""
    return data


def theme_isolation(work: Path, p: dict, server) -> dict:
    from . import isolation

    return isolation.run(None, **p)


def theme_privacy(work: Path, p: dict, server) -> dict:
    from . import privacy

    os.environ.pop("PROJECT_HISTORY_EMBEDDING_API_KEY", None)
    return privacy.run(work / "privacy", server)


def theme_live(work: Path, p: dict, server) -> dict:
    from . import live

    return live.run(work / "live", server.base_url, **p)


def figures(report: dict[str, Any]) -> dict[str, Any]:
    """The headline numbers (docs/reliability.md quotes these)."""
    t = report["themes"]
    out: dict[str, Any] = {}
    if "crash" in t:
        c = t["crash"]
        out["kill_points_survived_tried"] = f"{c['kill_points_survived']}/{c['kill_points_tried']}"
        out["state_file_kills_survived_tried"] = f"{c['state_file_kills_survived']}/{c['state_file_kills_tried']}"
    if "corruption" in t:
        c = t["corruption"]
        out["corruption_cases_handled_tried"] = f"{c['cases_handled']}/{c['cases_tried']}"
        out["corruption_unhandled"] = [x["name"] for x in c["cases"] if not x["handled"]]
        out["random_page_damage"] = {"tried": c["random_pages_tried"], **c["random_pages"]}
    if "hostile" in t:
        h = t["hostile"]
        out["hostile_calls"] = sum(v["calls"] for v in h.values())
        out["hostile_failures"] = {k: v["failures"] for k, v in h.items()}
        out["hostile_call_max_s"] = max(v["max_s"] for v in h.values())
    if "fuzz" in t:
        f = t["fuzz"]
        out["fuzz"] = {"engine": f.get("engine"), "inputs": f.get("inputs"), "seconds": f.get("seconds"),
                       "crashes": f.get("crashes"), "crash_classes": len(f.get("crash_signatures", {})),
                       "fts_syntax_errors": f.get("fts_syntax_errors"), "self_misses": f.get("self_misses")}
    if "isolation" in t:
        i = t["isolation"]
        out["isolation"] = {"layouts": i["layouts"], "cases": i["cases"], "violations": i["violations"],
                            "label_errors": i["label_errors"], "missed": i["missed"]}
    if "privacy" in t:
        pr = t["privacy"]
        out["privacy"] = {"paths_before_consent": pr["paths_before_consent"],
                          "bytes_before_consent": pr["bytes_before_consent"],
                          "connections_before_consent": pr["connections_before_consent"],
                          "bytes_with_non_matching_consent": pr["bytes_with_non_matching_consent"],
                          "planted_secret_parts": pr["planted_secrets"],
                          "requests_after_consent": pr["requests_after_consent"],
                          "secret_leaks": sorted({x["secret"] for x in pr["secret_leaks"]}),
                          "other_project_texts_with_one_project_consent":
                              pr["other_project_texts_sent_with_one_project_consent"]}
    if "live" in t:
        lv = t["live"]
        out["live"] = {"writer_wait_p99_s": lv["writer_under_load"]["p99_s"],
                       "writer_wait_max_s": lv["writer_under_load"]["max_s"],
                       "writer_baseline_p99_s": lv["writer_baseline"]["p99_s"],
                       "writer_baseline_max_s": lv["writer_baseline"]["max_s"],
                       "appends_under_load": lv["writer_under_load"]["appends"],
                       "query_p95_s": lv["query_p95_s"], "searches": lv["searches"],
                       "visible_checked": f"{lv['visible']}/{lv['visibility_checked']}",
                       "missed_while_fresh": lv["missed_while_fresh"],
                       "writer_lock_overlaps": lv["writer_lock_under_load"]["overlaps"]
                       + lv["writer_lock_contention"]["overlaps"],
                       "writer_lock_holds": lv["writer_lock_under_load"]["holds"]
                       + lv["writer_lock_contention"]["holds"]}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stress.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the CI sizes (a few minutes)")
    parser.add_argument("--only", default=",".join(THEMES), help=f"comma list of {', '.join(THEMES)}")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "stress.json")
    parser.add_argument("--work", type=Path, default=None, help="keep the work folders here")
    parser.add_argument("--merge", action="store_true", help="update these themes in an existing --out file")
    args = parser.parse_args(argv)
    logging.disable(logging.CRITICAL)  # the plugin logs every internal error it turns into JSON
    os.environ["PROJECT_HISTORY_RECALL_UPDATE_CHECK"] = "0"
    os.environ["PIP_INDEX_URL"] = "http://127.0.0.1:9/simple"
    params = QUICK if args.quick else FULL
    themes = [t.strip() for t in args.only.split(",") if t.strip()]
    unknown = set(themes) - set(THEMES)
    if unknown:
        parser.error(f"unknown themes {sorted(unknown)}")
    work = args.work or Path(tempfile.mkdtemp(prefix="phr-stress-"))
    from .fake import embedding_server

    report: dict[str, Any] = {"mode": "quick" if args.quick else "full", "started": time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": _machine(), "params": {t: params.get(t) for t in themes},
        "command": "python -m bench.stress.run" + (" --quick" if args.quick else ""), "themes": {}, "seconds": {}}
    if args.merge and args.out.exists():
        previous = json.loads(args.out.read_text(encoding="utf-8"))
        previous["themes"] = {k: v for k, v in previous.get("themes", {}).items() if k not in themes}
        previous.setdefault("errors", {})
        for theme in themes:
            previous["errors"].pop(theme, None)
        previous["params"] = {**previous.get("params", {}), **report["params"]}
        previous["merged"] = [*previous.get("merged", []), {"themes": themes, "at": report["started"]}]
        report = {**previous, "machine": report["machine"]}
        report.setdefault("seconds", {})
    failed: list[str] = []
    try:
        with embedding_server() as server:
            for theme in themes:
                started = time.monotonic()
                print(f"== {theme}", file=sys.stderr, flush=True)
                try:
                    report["themes"][theme] = globals()[f"theme_{theme}"](work, params.get(theme, {}), server)
                except Exception as exc:  # one theme's harness failing must not lose the others' figures
                    failed.append(theme)
                    report.setdefault("errors", {})[theme] = traceback.format_exc()[-4000:]
                    print(f"   {theme} FAILED: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                report["seconds"][theme] = round(time.monotonic() - started, 1)
                print(f"   {theme}: {report['seconds'][theme]} s", file=sys.stderr, flush=True)
                _write(report, args.out)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    _write(report, args.out)
    print(json.dumps(report["figures"], indent=1, ensure_ascii=False))
    print(f"wrote {args.out}", file=sys.stderr)
    return 1 if failed else 0


def _write(report: dict[str, Any], out: Path) -> None:
    report["figures"] = figures(report)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=1, ensure_ascii=False, default=str), encoding="utf-8")
    os.replace(tmp, out)


if __name__ == "__main__":
    sys.exit(main())
