"""mini-swe-agent SWE-bench Verified trajectories → a coding-agent evaluation set.

Source: github.com/gruckion/mini-swe-agent (a fork of SWE-agent/mini-swe-agent, MIT licence,
"Copyright (c) 2025 Kilian A. Lieret and Carlos E. Jimenez"), folder
``swebench_results/20251118_gemini-3-pro-74pct/trajs/``: 500 real agent trajectories (Gemini 3 Pro
driving mini-swe-agent 1.15 on SWE-bench Verified, 2025-11-18), one ``<instance>.traj.json`` each.
The converted sets stay local (``bench/out/real/``, gitignored); only this converter is committed.

Mapping:
* project = one GitHub repository (``django/django``: 231 trajectories, ``sympy/sympy``: 75, ...),
  folder ``/home/dev/<owner>/<name>``; repositories with fewer than ``MIN_SESSIONS`` (8)
  trajectories are left out (seaborn 2, flask 1);
* session = one trajectory: the system prompt is dropped; the first user message becomes the
  user's task, reduced to the PR/issue text inside ``<pr_description>`` (the fixed instruction
  template around it is dropped); each assistant turn becomes an assistant message whose content
  is its ``THOUGHT`` text and whose ``tool_calls`` hold one ``terminal`` call with the bash block
  as ``{"command": ...}``; every later user turn (command output, format errors, the final
  ``git diff``) becomes a ``tool`` message answering that call, cut to ``TOOL_OUTPUT_CHARS``
  (8,000) characters; timestamps are the model responses' ``created`` times (tool outputs take
  their call's time), ``started_at`` is the first of them; cwd and git_repo_root = the project
  folder, branch ``main``; title = the instance id (``django__django-11099``);
* queries (mechanical, paraphrase-free, from the task text):
  - ``issue-title``: the first non-empty line of the issue text (its title), markdown heading
    marks stripped, at most 30 words;
  - ``issue-sentence``: one sentence of the body (outside code fences, 6-30 words, mostly
    words), picked by ``stable_hash(instance)``;
  gold_sessions = that trajectory, gold_messages = its task message (index 0);
  asked from one empty "asking" session per project dated after its last trajectory;
* withheld (negative controls): trajectories with ``stable_hash(instance) % 8 == 0`` are left
  out of the set; their title queries become negatives (category ``withheld``: the same
  repository, similar topics, but the session that worked on it is not there); plus 4 titles
  per project from another repository (``other-project``);
* split (fixed): by query, ``stable_hash("swe-split", query id) % 2`` → tune (0) / held-out (1);
  both files carry every session (the same corpus), each its own half of the queries. An
  ``other-project`` control goes where the title it asks goes, so that no question of one split
  is a control of the other (the confidence tables are fitted on tune's controls).
  ``--max-per-project N`` keeps the N lowest-hash trajectories per project (a CI-sized set).

Command (deterministic)::

    python -m bench.datasets.swe_trajs [--source /work/.mirror/gruckion+mini-swe-agent/repo] [--out bench/out/real]
        [--max-per-project N --name swe-small]
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

from .realcommon import MIRRORS, Snapshot, converter_arguments, foreign_control, session_id, stable_hash, write_set

DEFAULT_SOURCE = MIRRORS / "gruckion+mini-swe-agent" / "repo"
TRAJ_DIR = "swebench_results/20251118_gemini-3-pro-74pct/trajs"
MIN_SESSIONS = 8
TOOL_OUTPUT_CHARS = 8000
WITHHOLD_MOD = 8
OTHER_PROJECT_QUERIES = 4
BASH = re.compile(r"```(?:bash|sh)?\s*\n(.*?)```", re.S)


def repo_of(instance: str) -> str:
    owner, rest = instance.split("__", 1)
    return f"{owner}/{rest.rsplit('-', 1)[0]}"


def task_text(content: str) -> str:
    match = re.search(r"<pr_description>\s*(?:Consider the following PR description:\s*)?(.*?)</pr_description>",
                      content, re.S)
    return (match.group(1) if match else content).strip()


def title_of(task: str) -> str | None:
    for line in task.splitlines():
        line = re.sub(r"^#+\s*", "", line.strip()).strip()
        if line and len(re.findall(r"\w+", line)) >= 3:
            return " ".join(line.split()[:30])
    return None


def body_sentence(task: str, key: str) -> str | None:
    lines, fenced = [], False
    for line in task.splitlines()[1:]:
        if line.strip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced and not line.startswith(("    ", "\t", ">>>", "$ ")):
            lines.append(line.strip())
    text = " ".join(lines)
    candidates = []
    for sentence in re.split(r"(?<=[.?!])\s+", text):
        words = sentence.split()
        letters = sum(ch.isalpha() or ch.isspace() for ch in sentence)
        if 6 <= len(words) <= 30 and letters >= 0.8 * len(sentence):
            candidates.append(sentence.strip())
    if not candidates:
        return None
    return candidates[stable_hash("sentence", key) % len(candidates)]


def convert_traj(instance: str, traj: dict, folder: str) -> dict | None:
    raw = traj.get("messages") or []
    raw = [m for m in raw if m.get("role") != "system"]
    if not raw or raw[0].get("role") != "user":
        return None
    task = task_text(str(raw[0].get("content") or ""))
    created = [m.get("extra", {}).get("response", {}).get("created") for m in raw if m.get("role") == "assistant"]
    created = [float(c) for c in created if isinstance(c, int | float)]
    start = (min(created) - 1.0) if created else 1.7e9 + stable_hash(instance) % 10**7
    messages = [{"role": "user", "content": task, "timestamp": start}]
    last_call, now, n_call = None, start, 0
    for m in raw[1:]:
        content = str(m.get("content") or "")
        if m.get("role") == "assistant":
            stamp = m.get("extra", {}).get("response", {}).get("created")
            now = float(stamp) if isinstance(stamp, int | float) else now
            block = BASH.search(content)
            thought = BASH.sub("", content).strip()
            thought = re.sub(r"^THOUGHT:\s*", "", thought)
            message = {"role": "assistant", "content": thought, "timestamp": now}
            if block:
                n_call += 1
                last_call = f"call_{n_call}"
                message["tool_calls"] = [{"id": last_call, "type": "function", "function": {
                    "name": "terminal", "arguments": json.dumps({"command": block.group(1).strip()})}}]
            else:
                last_call = None
            messages.append(message)
        else:
            out = content if len(content) <= TOOL_OUTPUT_CHARS else content[:TOOL_OUTPUT_CHARS] + "\n[... cut]"
            if last_call:
                messages.append({"role": "tool", "tool_name": "terminal", "tool_call_id": last_call,
                                 "content": out, "timestamp": now})
                last_call = None
            else:
                messages.append({"role": "tool", "tool_name": "terminal", "content": out, "timestamp": now})
    return {"id": session_id(start, "swe", instance), "source": "cli", "cwd": folder, "git_repo_root": folder,
            "git_branch": "main", "title": instance, "started_at": start, "messages": messages,
            "_task": task, "_instance": instance}


def convert(source: Path, out: Path, max_per_project: int | None, name: str) -> dict:
    snap = Snapshot(source)
    paths = [p for p in snap.list(TRAJ_DIR) if p.endswith(".traj.json")]
    by_repo: dict[str, list[str]] = defaultdict(list)
    for p in paths:
        by_repo[repo_of(Path(p).name[: -len(".traj.json")])].append(p)
    projects, sessions, per_project_queries = [], [], {}
    negatives_pool: dict[str, list[dict]] = {}
    for repo in sorted(by_repo):
        files = by_repo[repo]
        if len(files) < MIN_SESSIONS:
            continue
        if max_per_project:
            files = sorted(files, key=lambda p: stable_hash("keep", p))[:max_per_project]
        folder = f"/home/dev/{repo}"
        projects.append({"name": repo, "folders": [folder], "primary_path": folder})
        kept: list[dict] = []
        withheld: list[dict] = []
        for p in sorted(files):
            instance = Path(p).name[: -len(".traj.json")]
            session = convert_traj(instance, json.loads(snap.read(p)), folder)
            if session is None:
                continue
            (withheld if stable_hash(instance) % WITHHOLD_MOD == 0 else kept).append(session)
        last = max(s["messages"][-1]["timestamp"] for s in kept)
        asking = {"id": session_id(last + 3600, "swe", repo, "asking"), "source": "cli", "cwd": folder,
                  "git_repo_root": folder, "git_branch": "main", "started_at": last + 3600, "messages": []}
        queries = []
        for s in kept:
            inst = s["_instance"]
            title = title_of(s["_task"])
            sentence = body_sentence(s["_task"], inst)
            for cat, text in (("issue-title", title), ("issue-sentence", sentence)):
                if text:
                    queries.append({"id": f"{inst}:{cat}", "query": text, "current_session": asking["id"],
                                    "gold_sessions": [s["id"]], "gold_messages": [[s["id"], 0]], "lang": "en",
                                    "category": cat})
        for s in withheld:
            title = title_of(s["_task"])
            if title:
                queries.append({"id": f"{s['_instance']}:withheld", "query": title, "current_session": asking["id"],
                                "gold_sessions": [], "lang": "en", "category": "withheld"})
        negatives_pool[repo] = [q for q in queries if q["category"] == "issue-title"]
        per_project_queries[repo] = (asking["id"], queries)
        for s in kept:
            del s["_task"], s["_instance"]
        sessions += [*kept, asking]
    repos = sorted(per_project_queries)
    split_of: dict[str, str] = {}  # a control's id → the id of the query whose split it takes
    for i, repo in enumerate(repos):
        asking_id, queries = per_project_queries[repo]
        other = repos[(i + 1) % len(repos)]
        pool = sorted(negatives_pool[other], key=lambda q: stable_hash("other", repo, q["id"]))
        for q in pool[:OTHER_PROJECT_QUERIES]:
            control = foreign_control(q, repo, asking_id, "other-project")
            queries.append(control)
            split_of[control["id"]] = q["id"]
    all_queries = [q for repo in repos for q in per_project_queries[repo][1]]
    report = {"source": str(source), "commit": snap.head(), "trajectories": len(paths)}
    for split, bit in (("tune", 0), ("heldout", 1)):
        chosen = [q for q in all_queries if stable_hash("swe-split", split_of.get(q["id"], q["id"])) % 2 == bit]
        report[split] = write_set(out / f"{name}-{split}.json", f"{name}-{split}", projects, sessions, chosen)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = converter_arguments(__doc__, DEFAULT_SOURCE)
    parser.add_argument("--max-per-project", type=int, default=None)
    parser.add_argument("--name", default="swe")
    args = parser.parse_args(argv)
    print(json.dumps(convert(args.source, args.out, args.max_per_project, args.name), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
