"""A seeded Claude Code history for the benchmarks, and the figures measured on it.

``python -m bench.claude_corpus --size M --out bench/out/claude-M`` writes
``DIR/claude/projects/<encoded cwd>/<uuid>.jsonl`` (what ``$CLAUDE_CONFIG_DIR`` points at),
``DIR/work/<project>`` (the cwds) and an empty Hermes home ``DIR/hermes`` for our index.
M is 5,000 transcript files and 200,000 lines; S a tenth of that. The text comes from the
Hermes corpus's generator (:mod:`bench.textgen`, same projects, a third Chinese), written in
Claude Code's layout: ``user``/``assistant`` lines with ``tool_use``/``tool_result`` parts
(``Bash``, ``Read``, ``Edit``, ``Write``), ``thinking`` parts, ``summary`` and
``file-history-snapshot`` lines. A pure function of (seed, size); each file's mtime is its
last line's time (2025), as an agent leaves its transcripts.

``--measure`` then runs, on a fresh index each time it is given:

* the full keyword index from scratch (``Recall.refresh``; the edit chain included), beside
  the floor (``json.loads`` of every line once) and the peak RSS;
* a refresh with nothing changed, the check that decides it (:mod:`~project_history_recall.sources.file_watch`:
  the folders and the files in use; once right after the build, once after a pause longer than
  a sweep interval, when the background sweeper has run), and the full sweep it replaces (one
  ``stat`` per file);
* a refresh after one line appended to the session in use (the largest transcript, written
  a moment before the build): seconds, lines parsed
  (:data:`project_history_recall.sources.transcripts.lines_parsed`), messages re-read;
* keyword search p50/p95 from the large project.

Figures go to stdout and ``DIR/measure.json``. The machine is shared: timings are noisy, the
line counts are not.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import sys
import time
import uuid
from pathlib import Path

from .textgen import SessionText, Topic
from .vocab import LARGE_PROJECT, PROJECTS

DEFAULT_SEED = 7
SIZES = {"S": (500, 20_000), "M": (5_000, 200_000)}
END = 1_767_225_600.0
SPAN = 365 * 86_400.0
MARKER = "claude-corpus.json"
GENERATOR_VERSION = 2


def _median_ms(call, repeats: int = 5) -> float:
    """Median wall time of ``call()`` over ``repeats`` runs, in milliseconds."""
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return round(statistics.median(samples) * 1000, 3)


def _stamp(moment: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment)) + f".{int(moment * 1000) % 1000:03d}Z"


def _tool(message: dict, cwd: Path) -> list[dict]:
    """Hermes's tool call as Claude Code's tool_use input."""
    call = message["function"]
    args = json.loads(call["arguments"])
    name = call["name"]
    if name == "terminal":
        return [{"type": "tool_use", "id": message["id"], "name": "Bash", "input": {"command": args["command"]}}]
    path = str(cwd / args["path"])
    if name == "read_file":
        return [{"type": "tool_use", "id": message["id"], "name": "Read", "input": {"file_path": path}}]
    if name == "patch":
        return [{"type": "tool_use", "id": message["id"], "name": "Edit", "input": {
            "file_path": path, "old_string": args["old_string"], "new_string": args["new_string"],
            "replace_all": False}}]
    return [{"type": "tool_use", "id": message["id"], "name": "Write",
             "input": {"file_path": path, "content": args["content"]}}]


class _File:
    def __init__(self, rng: random.Random, sid: str, cwd: Path, started: float) -> None:
        self.rng, self.sid, self.cwd, self.clock = rng, sid, cwd, started
        self.lines: list[dict] = []
        self.parent: str | None = None

    def add(self, kind: str, content: object) -> None:
        self.clock += self.rng.uniform(2, 90)
        uid = str(uuid.UUID(int=self.rng.getrandbits(128)))
        self.lines.append({"parentUuid": self.parent, "isSidechain": False, "userType": "external",
                           "cwd": str(self.cwd), "sessionId": self.sid, "version": "1.0.80",
                           "gitBranch": "main", "type": kind, "message": {"role": kind, "content": content},
                           "uuid": uid, "timestamp": _stamp(self.clock)})
        self.parent = uid


def _session(rng: random.Random, sid: str, cwd: Path, spec: object, target: int,
             started: float) -> tuple[list[dict], float]:
    """A transcript's lines, and when its last line was written."""
    lang = "zh" if rng.random() < spec.zh_share else "en"  # type: ignore[attr-defined]
    topic = Topic.draw(rng, spec, lang)  # type: ignore[arg-type]
    text = SessionText(random.Random(sid), topic)
    out = _File(rng, sid, cwd, started)
    out.lines.append({"type": "summary", "summary": topic.title(), "leafUuid": sid})
    while len(out.lines) < target:
        out.add("user", text.user()["content"])
        for _ in range(rng.choice((0, 1, 1, 2))):
            if len(out.lines) >= target:
                break
            round_ = text.tool_round()
            call, results = round_[0], round_[1:]
            out.add("assistant", [{"type": "text", "text": call["content"]},
                                  *[part for c in call["tool_calls"] for part in _tool(c, cwd)]])
            out.add("user", [{"type": "tool_result", "tool_use_id": r["tool_call_id"], "content": r["content"],
                              "is_error": False} for r in results])
        reply = text.assistant()["content"]
        out.add("assistant", [{"type": "thinking", "thinking": "Let me think about " + reply[:60],
                               "signature": "sig"}, {"type": "text", "text": reply}])
        if rng.random() < 0.1:
            out.lines.append({"type": "file-history-snapshot", "messageId": out.parent, "snapshot": {},
                              "isSnapshotUpdate": False})
    return out.lines[:target], out.clock


def generate(out: Path, size: str, seed: int = DEFAULT_SEED) -> dict:
    files, total_lines = SIZES[size]
    marker = out / MARKER
    facts = {"generator": GENERATOR_VERSION, "seed": seed, "size": size, "files": files, "lines": total_lines}
    if marker.is_file() and json.loads(marker.read_text()) == facts:
        return facts
    shutil.rmtree(out, ignore_errors=True)
    rng = random.Random(f"{seed}:{size}")
    projects = [p for p in PROJECTS if p.kind != "home"]
    weights = [p.share for p in projects]
    base, extra = divmod(total_lines, files)
    lengths = [base + (1 if i < extra else 0) for i in range(files)]
    for i in range(0, files - 1, 2):  # uneven sessions, the same total
        shift = rng.randint(0, base - 4)
        lengths[i], lengths[i + 1] = lengths[i] + shift, lengths[i + 1] - shift
    for n in range(files):
        spec = rng.choices(projects, weights)[0]
        cwd = out / "work" / spec.key
        cwd.mkdir(parents=True, exist_ok=True)
        sid = str(uuid.UUID(int=rng.getrandbits(128)))
        folder = out / "claude" / "projects" / str(cwd).replace("/", "-")
        folder.mkdir(parents=True, exist_ok=True)
        lines, last = _session(rng, sid, cwd, spec, lengths[n], END - SPAN + SPAN * n / files)
        path = folder / f"{sid}.jsonl"
        path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
        os.utime(path, (last, last))  # as the agent left it: files idle since their last line
    (out / "hermes").mkdir(exist_ok=True)
    marker.write_text(json.dumps(facts))
    return facts


def _rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def measure(out: Path) -> dict:
    os.environ["CLAUDE_CONFIG_DIR"] = str(out / "claude")
    os.environ["CODEX_HOME"] = str(out / "no-codex")
    from project_history_recall.recall import Recall
    from project_history_recall.sources import file_watch, transcripts
    from project_history_recall.sources.file_watch import FileWatch

    home = out / "hermes"
    shutil.rmtree(home / "plugins", ignore_errors=True)
    files = sorted((out / "claude" / "projects").glob("*/*.jsonl"))
    figures: dict = {"files": len(files), "bytes": sum(f.stat().st_size for f in files)}

    started, cpu = time.perf_counter(), time.process_time()
    lines = 0
    for path in files:
        with path.open("rb") as handle:
            for raw in handle:
                json.loads(raw)
                lines += 1
    figures["lines"] = lines
    figures["floor_json_loads_s"] = round(time.perf_counter() - started, 3)
    figures["floor_json_loads_cpu_s"] = round(time.process_time() - cpu, 3)

    largest = max(files, key=lambda f: f.stat().st_size)
    os.utime(largest)  # the session in use: written a moment ago
    recall = Recall(home)
    started, cpu = time.perf_counter(), time.process_time()
    report = recall.refresh()
    figures["full_index_s"] = round(time.perf_counter() - started, 2)
    figures["full_index_cpu_s"] = round(time.process_time() - cpu, 2)  # less at the mercy of the neighbours
    figures["full_index_keyword_s"] = report.keyword_seconds
    figures["full_index_phases"] = report.phases
    figures["sessions"] = report.sessions_total
    figures["messages_read"] = report.messages_read
    figures["lines_parsed"] = transcripts.lines_parsed.get("claude-code", 0)
    figures["lines_per_s"] = round(figures["lines_parsed"] / figures["full_index_s"])
    figures["peak_rss_mb"] = _rss_mb()

    source = recall.workspace.sources[1]
    figures["full_sweep_ms_median"] = _median_ms(
        lambda: FileWatch(str(source.root), lambda: source.format.files(source.root)).marker())
    figures["check_ms_median"] = _median_ms(source.change_marker)
    # Searches come minutes apart: the check after a pause longer than a sweep interval.
    time.sleep(file_watch.SWEEP_SECONDS + file_watch.TICK_SECONDS + 1)
    figures["check_after_a_pause_ms"] = _median_ms(source.change_marker, repeats=1)
    figures["refresh_nothing_changed_ms_median"] = _median_ms(recall.refresh)

    last = json.loads(largest.read_text(encoding="utf-8").splitlines()[-2])
    last.update(uuid=str(uuid.uuid4()), type="user", message={"role": "user", "content": "one appended quokka line"})
    before = transcripts.lines_parsed.get("claude-code", 0)
    size = largest.stat().st_size
    with largest.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(last) + "\n")
    started = time.perf_counter()
    report = recall.refresh()
    figures["append_one_line"] = {
        "file_bytes": largest.stat().st_size, "seconds": round(time.perf_counter() - started, 4),
        "lines_parsed": transcripts.lines_parsed.get("claude-code", 0) - before,
        "sessions_updated": report.sessions_updated, "messages_reread": report.messages_read}

    large_cwd = out / "work" / LARGE_PROJECT
    queries = ["retry", "ledger timeout", "refund webhook", "修复", "quokka", "currency rounding",
               "idempotency key", "settlement", "flaky test", "migration"]
    latencies = []
    for _ in range(3):
        for query in queries:
            started = time.perf_counter()
            recall.search(query, cwd=str(large_cwd), mode="keyword")
            latencies.append((time.perf_counter() - started) * 1000)
    latencies.sort()
    figures["keyword_ms_p50"] = round(statistics.median(latencies), 1)
    figures["keyword_ms_p95"] = round(latencies[int(len(latencies) * 0.95) - 1], 1)
    index_files = list((home / "plugins" / "project-history-recall").glob("index.db*"))
    figures["index_bytes"] = sum(p.stat().st_size for p in index_files)
    os.truncate(largest, size)  # the corpus stays what its marker says, for the next run
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="M")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--measure", action="store_true")
    args = parser.parse_args(argv)
    out = (args.out or Path("bench/out") / f"claude-{args.size}").resolve()
    started = time.perf_counter()
    facts = generate(out, args.size, args.seed)
    print(f"corpus {out}: {facts['files']} files, {facts['lines']} lines ({time.perf_counter() - started:.1f} s)")
    if args.measure:
        figures = measure(out)
        (out / "measure.json").write_text(json.dumps(figures, indent=2))
        json.dump(figures, sys.stdout, indent=2)
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
