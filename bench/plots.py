"""The two figures the docs show, drawn from the JSON the benchmark and the harness write.

``python -m bench.plots [--runs bench/out/run-S.json ...] [--eval bench/out/eval-dev.json] [--out docs/img]``

* ``query-latency.png``: p50 query latency (bar) and p95 (whisker) per mode and
  corpus size, from a session in the large project and from one in a small
  project, with Hermes's ``session_search`` beside;
* ``hit-at-k.png``: hit@1 / hit@5 / hit@10 per mode and query category of one
  evaluation set.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # the backend is chosen first

OUT = Path(__file__).resolve().parent / "out"
DOCS_IMG = Path(__file__).resolve().parent.parent / "docs" / "img"
COLORS = {"keyword": "#4C72B0", "semantic": "#DD8452", "hybrid": "#55A868", "hermes": "#8C8C8C"}
LABELS = {"hermes": "Hermes session_search"}
SIZE_ORDER = {"S": 0, "M": 1, "L": 2}
SCOPES = (("large", "asked from the large project"), ("small", "asked from a small project"))


def _runs(paths: list[Path]) -> list[dict]:
    runs = [json.loads(p.read_text(encoding="utf-8")) for p in paths]
    by_size: dict[str, dict] = {}
    for run in runs:  # a full run beats a quick one of the same size
        if run["size"] not in by_size or by_size[run["size"]].get("quick"):
            by_size[run["size"]] = run
    return sorted(by_size.values(), key=lambda r: SIZE_ORDER.get(r["size"], 9))


def _label(run: dict) -> str:
    c = run["corpus"]
    return f"{run['size']}\n{c['sessions']:,} sessions\n{c['messages_active']:,} messages"


def latency_figure(runs: list[dict], out: Path) -> Path:
    modes = ["keyword", "semantic", "hybrid", "hermes"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6), sharey=True)
    width = 0.8 / len(modes)
    for ax, (scope, title) in zip(axes, SCOPES, strict=True):
        for i, mode in enumerate(modes):
            xs: list[float] = []
            p50: list[float] = []
            err: list[float] = []
            for x, run in enumerate(runs):
                fig_ = run["hermes"][scope] if mode == "hermes" else run["latency"][scope].get(mode)
                if not fig_ or fig_.get("p50_ms") is None:
                    continue
                xs.append(x + (i - (len(modes) - 1) / 2) * width)
                p50.append(fig_["p50_ms"])
                err.append(max(0.0, fig_["p95_ms"] - fig_["p50_ms"]))
            label = LABELS.get(mode, mode) if scope == "large" else None
            ax.bar(xs, p50, width * 0.95, color=COLORS[mode], label=label,
                   yerr=[[0] * len(err), err], capsize=3, error_kw={"elinewidth": 1, "ecolor": "#333333"})
            for bar_x, low, extra in zip(xs, p50, err, strict=True):
                ax.annotate(f"{low:.0f}/{low + extra:.0f}", (bar_x, low + extra), xytext=(0, 2),
                            textcoords="offset points", ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(runs)), [_label(r) for r in runs], fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    axes[0].set_ylabel("latency, ms")
    machine = runs[0]["machine"] if runs else {}
    fig.suptitle(f"Query latency by mode and corpus size ({runs[0]['queries']['n'] if runs else 0} queries, limit 10; "
                 f"{machine.get('cpu', '?')}, {machine.get('cores', '?')} cores)", fontsize=10)
    fig.legend(fontsize=8, ncol=4, loc="upper center", bbox_to_anchor=(0.5, 0.95), frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.91))
    path = out / "query-latency.png"
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def hit_figure(results: dict, set_name: str | None, out: Path) -> Path:
    name = set_name or next(iter(results))
    modes_data = results[name]
    modes = [m for m in ("keyword", "semantic", "hybrid", "hermes") if m in modes_data]
    first = modes_data[modes[0]]
    categories = ["all", *[c for c, f in first["by_category"].items() if f["n"]]]
    ks = ("hit@1", "hit@5", "hit@10")
    fig, axes = plt.subplots(len(ks), 1, figsize=(11, 8.2), sharex=True)
    width = 0.8 / len(modes)
    for ax, k in zip(axes, ks, strict=True):
        for i, mode in enumerate(modes):
            values = []
            for category in categories:
                f = modes_data[mode] if category == "all" else modes_data[mode]["by_category"].get(category, {})
                values.append(f.get(k) or 0.0)
            xs = [x + (i - (len(modes) - 1) / 2) * width for x in range(len(categories))]
            label = LABELS.get(mode, mode) if k == ks[0] else None
            bars = ax.bar(xs, values, width * 0.95, color=COLORS[mode], label=label)
            ax.bar_label(bars, fmt="%.2f", fontsize=6, padding=1)
        ax.set_ylim(0, 1.12)
        ax.set_ylabel(k)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    counts = {c: (first["n"] if c == "all" else first["by_category"][c]["n"]) for c in categories}
    axes[-1].set_xticks(range(len(categories)), [f"{c}\n(n={counts[c]})" for c in categories], fontsize=8)
    fig.suptitle(f"Retrieval quality on '{name}' by mode and query category (session-level hit@k)", fontsize=10)
    fig.legend(fontsize=8, ncol=len(modes), loc="upper center", bbox_to_anchor=(0.5, 0.965), frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    path = out / "hit-at-k.png"
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.plots", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, nargs="*", help="run-*.json files (default bench/out/run-*.json)")
    parser.add_argument("--eval", type=Path, default=OUT / "eval-dev.json", help="the harness's --json output")
    parser.add_argument("--set", dest="set_name", help="which set of the eval JSON (default the first)")
    parser.add_argument("--out", type=Path, default=DOCS_IMG)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    run_paths = args.runs if args.runs else sorted(OUT.glob("run-*.json"))
    wrote = []
    if run_paths:
        wrote.append(latency_figure(_runs(run_paths), args.out))
    else:
        print("no run-*.json: skipping the latency figure (run python -m bench.run first)", file=sys.stderr)
    if args.eval.is_file():
        wrote.append(hit_figure(json.loads(args.eval.read_text(encoding="utf-8")), args.set_name, args.out))
    else:
        print(f"no {args.eval}: skipping the hit@k figure (run python -m bench.eval_retrieval first)", file=sys.stderr)
    for path in wrote:
        print(f"wrote {path}")
    return 0 if wrote else 1


if __name__ == "__main__":
    sys.exit(main())
