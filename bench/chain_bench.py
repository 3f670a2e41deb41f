"""What the edit chain costs the keyword index (issue 13: nothing, since it is its own phase).

``python bench/chain_bench.py [--edits 10000] [--repeats 3]`` builds a Hermes history
through ``hermes_state.SessionDB``, in a real git repo, with ``--edits`` edits in the
shapes Hermes's file tools store — ``patch`` replace (with the unified diff Hermes
returns, or without one so the symbol is looked up on disk), ``patch`` in V4A form,
``write_file``, failures (dropped), a diff quoted in a reply — between user requests,
replies and other tool calls. It then builds the index from scratch, alternately
without and with the :class:`~project_history_recall.index.edit_phase.EditPhase`, and prints
the keyword phase's time in both builds (it must not grow with the chain), the edit
phase's own time, and the whole build: wall time of each phase, CPU time of the whole
process, best of ``--repeats`` with medians beside.

The generated history is edit-dense on purpose (about four messages per edit), the
worst case for the ratio: the chain's cost grows with edits, the keyword index's with
all messages. ``--home bench/out/corpus-M/hermes`` measures the shared benchmark
corpus instead (about 13 messages per edit), read only.

Deterministic: the history depends only on ``--seed``.
"""

from __future__ import annotations

import argparse
import difflib
import json
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hermes_state import SessionDB

from project_history_recall.index.edit_phase import EditPhase
from project_history_recall.index.indexer import Indexer
from project_history_recall.index.store import Index
from project_history_recall.sources.hermes import HermesSource

FILES = 60
FUNCTIONS = 12
WORDS = ("timeout", "retry", "cache", "parser", "config", "session", "index", "token", "queue", "worker",
         "schema", "client", "limit", "batch", "stream", "buffer", "handler", "router", "payload", "backoff")
REQUESTS = ("make the {w} configurable", "fix the {w} bug in {f}", "the {w} is wrong when it is empty, handle it",
            "rename {f} so it says what it does", "add a test for the {w} path", "why does {f} ignore the {w}?")


def source_file(rng: random.Random, index: int) -> tuple[str, list[str]]:
    names = [f"{rng.choice(WORDS)}_{rng.choice(WORDS)}_{index}_{k}" for k in range(FUNCTIONS)]
    lines = [f'"""Module {index}: {rng.choice(WORDS)} and {rng.choice(WORDS)}."""', "", "import logging", ""]
    for name in names:
        word = rng.choice(WORDS)
        lines += ["", f"def {name}(value, {word}=3):", f"    # keep the {word} bounded",
                  "    if value is None:", f"        raise ValueError('{name}: no {word}')",
                  f"    result = value * {word}", f"    logging.debug('{name} %s', result)", "    return result"]
    return "\n".join(lines) + "\n", names


def make_repo(root: Path, rng: random.Random) -> list[tuple[str, list[str]]]:
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    files = []
    for i in range(FILES):
        rel = f"src/pkg/mod_{i:02d}.py"
        text, names = source_file(rng, i)
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
        files.append((rel, names))
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "-c", "user.email=b@example.com", "-c", "user.name=b", "commit", "-q",
                    "-m", "bench"], check=True)
    return files


def hermes_diff(abs_path: str, old: str, new: str, context: list[str]) -> str:
    """The diff ``patch`` returns: difflib over the file, labelled with the absolute path."""
    before = [*context, *old.splitlines(), *context]
    after = [*context, *new.splitlines(), *context]
    return "\n".join(difflib.unified_diff(before, after, f"a/{abs_path}", f"b/{abs_path}", lineterm="")) + "\n"


class Writer:
    """Appends one session's messages through SessionDB, with a clock that moves forward."""

    def __init__(self, db: SessionDB, clock: float) -> None:
        self.db = db
        self.clock = clock
        self.calls = 0

    def say(self, sid: str, role: str, content: str, **kwargs: object) -> None:
        self.clock += 7.0
        self.db.append_message(sid, role, content, timestamp=self.clock, **kwargs)

    def tool(self, sid: str, name: str, args: dict, result: dict | str) -> None:
        self.calls += 1
        call_id = f"call_{self.calls}"
        self.say(sid, "assistant", "", tool_calls=[{"id": call_id, "type": "function",
                                                    "function": {"name": name, "arguments": json.dumps(args)}}])
        self.say(sid, "tool", result if isinstance(result, str) else json.dumps(result), tool_call_id=call_id,
                 tool_name=name)


def one_edit(w: Writer, rng: random.Random, sid: str, repo: Path, files: list[tuple[str, list[str]]]) -> None:
    rel, names = rng.choice(files)
    name = rng.choice(names)
    word, other = rng.choice(WORDS), rng.choice(WORDS)
    abs_path = str(repo / rel)
    old = f"    result = value * {word}"
    new = f"    result = value * {word} + {other}_offset"
    roll = rng.random()
    if roll < 0.45:  # replace, with Hermes's diff in the result
        context = [f"def {name}(value, {word}=3):", "    # keep it bounded"]
        w.tool(sid, "patch", {"mode": "replace", "path": rel, "old_string": old, "new_string": new},
               {"success": True, "diff": hermes_diff(abs_path, old, new, context), "files_modified": [abs_path],
                "lint": {"status": "ok", "output": ""}, "resolved_path": abs_path})
    elif roll < 0.60:  # replace whose result carries no diff: the symbol is looked up in the file
        anchor = f"    # keep the {word} bounded"
        w.tool(sid, "patch", {"mode": "replace", "path": rel, "old_string": anchor,
                              "new_string": anchor + f" (see {other})"},
               {"success": True, "files_modified": [abs_path], "resolved_path": abs_path})
    elif roll < 0.78:  # V4A
        patch = (f"*** Begin Patch\n*** Update File: {rel}\n@@ def {name} @@\n"
                 f"-    if value is None:\n+    if value is None or value == {other!r}:\n*** End Patch")
        w.tool(sid, "patch", {"mode": "patch", "patch": patch},
               {"success": True, "diff": hermes_diff(rel, "    if value is None:",
                                                     f"    if value is None or value == {other!r}:", []),
                "files_modified": [abs_path], "lint": {rel: {"status": "ok", "output": ""}},
                "resolved_path": abs_path})
    elif roll < 0.90:  # write_file
        body = "\n".join(f"def {n}(value):\n    return value  # {rng.choice(WORDS)}\n" for n in names[:6])
        w.tool(sid, "write_file", {"path": rel, "content": body},
               {"bytes_written": len(body), "dirs_created": True, "lint": {"status": "ok", "output": ""},
                "resolved_path": abs_path, "files_modified": [abs_path]})
    elif roll < 0.95:  # failed: dropped by the chain, indexed by keyword search all the same
        w.tool(sid, "patch", {"mode": "replace", "path": rel, "old_string": "no such text", "new_string": new},
               {"success": False, "error": f"Could not find a match for old_string in {abs_path}",
                "_hint": "old_string not found. Use read_file to verify the current content."})
    else:  # a diff the assistant quotes in its reply
        w.say(sid, "assistant", f"Here is the change:\n```diff\ndiff --git a/{rel} b/{rel}\n--- a/{rel}\n"
                                f"+++ b/{rel}\n@@ -1,1 +1,1 @@\n-{old}\n+{new}\n```")


def build_history(home: Path, repo: Path, edits: int, per_session: int, seed: int) -> tuple[int, int]:
    rng = random.Random(seed)
    files = make_repo(repo, rng)
    db = SessionDB(db_path=home / "state.db")
    w = Writer(db, 1_760_000_000.0)
    sessions = 0
    done = 0
    try:
        while done < edits:
            sid = f"bench-{sessions:05d}"
            db.create_session(sid, "cli", cwd=str(repo))
            db.update_session_cwd(sid, str(repo), git_branch=rng.choice(("main", "main", "feature-x")),
                                  git_repo_root=str(repo))
            sessions += 1
            for k in range(min(per_session, edits - done)):
                if k % 2 == 0:
                    rel, names = rng.choice(files)
                    w.say(sid, "user", rng.choice(REQUESTS).format(w=rng.choice(WORDS), f=rng.choice(names)))
                    # Hermes's read_file answer: the file with line numbers (agents read before they patch).
                    text = (repo / rel).read_text().splitlines()
                    w.tool(sid, "read_file", {"path": rel},
                           {"content": "\n".join(f"{n:6d}|{line}" for n, line in enumerate(text, 1)),
                            "total_lines": len(text), "file_size": sum(map(len, text)), "truncated": False})
                one_edit(w, rng, sid, repo, files)
                done += 1
                if k % 4 == 3:
                    w.say(sid, "assistant", f"Done; the {rng.choice(WORDS)} now follows the {rng.choice(WORDS)}.")
    finally:
        db.close()
    return sessions, done


def build_index(data_dir: Path, state_db: Path, with_chain: bool) -> tuple[dict[str, float], int]:
    """One full build into an empty folder: its figures (seconds) and the edits recorded."""
    shutil.rmtree(data_dir, ignore_errors=True)
    indexer = Indexer(Index(data_dir), HermesSource(state_db), phases=[EditPhase()] if with_chain else [])
    wall, cpu = time.perf_counter(), time.process_time()
    report = indexer.refresh()
    figures = {"build wall": time.perf_counter() - wall, "build CPU": time.process_time() - cpu,
               "keyword phase": report.keyword_seconds,
               "edit phase": report.phases.get("edits", {}).get("seconds", 0.0)}
    conn = sqlite3.connect(data_dir / "index.db")
    try:
        rows = conn.execute("SELECT COUNT(*) FROM edits").fetchone()[0]
    finally:
        conn.close()
    return figures, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edits", type=int, default=10_000)
    parser.add_argument("--per-session", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=None, help="keep the history here (default: a temp dir)")
    parser.add_argument("--home", type=Path, default=None,
                        help="measure an existing Hermes home instead (read only), e.g. bench/out/corpus-M/hermes")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when the chain makes the keyword phase over 5%% slower")
    args = parser.parse_args(argv)

    work = args.workdir or Path(tempfile.mkdtemp(prefix="chain-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    home, repo = args.home or work / "home", work / "repo"
    try:
        if args.home is None and not (home / "state.db").exists():
            home.mkdir(parents=True, exist_ok=True)
            started = time.perf_counter()
            sessions, edits = build_history(home, repo, args.edits, args.per_session, args.seed)
            print(f"history: {edits} edits in {sessions} sessions, written through SessionDB "
                  f"in {time.perf_counter() - started:.1f} s")
        state_db = home / "state.db"
        conn = sqlite3.connect(state_db)
        messages = conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
        conn.close()
        runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
        recorded = 0
        for _ in range(args.repeats):
            for with_chain in (False, True):
                figures, rows = build_index(work / ("index-chain" if with_chain else "index-plain"), state_db,
                                            with_chain)
                runs[with_chain].append(figures)
                if with_chain:
                    recorded = rows
        print(f"messages: {messages}; edits recorded by the chain: {recorded}; best of {args.repeats}, "
              "medians in brackets")

        def best(with_chain: bool, name: str) -> tuple[float, float]:
            values = [run[name] for run in runs[with_chain]]
            return min(values), statistics.median(values)

        for name in ("keyword phase", "edit phase", "build wall", "build CPU"):
            (plain, plain_median), (chain, chain_median) = best(False, name), best(True, name)
            print(f"{name:>13}: without chain {plain:.3f} s ({plain_median:.3f}), "
                  f"with chain {chain:.3f} s ({chain_median:.3f})")
        ratio = best(True, "keyword phase")[0] / best(False, "keyword phase")[0]
        print(f"keyword phase with the chain / without: {ratio:.3f} ({100 * (ratio - 1):+.1f}%); "
              f"the chain costs its own phase, {best(True, 'edit phase')[0]:.3f} s, after the keyword commit")
        return 1 if args.check and ratio > 1.05 else 0
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
