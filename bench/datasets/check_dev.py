"""Sanity checks for a retrieval evaluation set (default: bench/datasets/dev.json).

    python bench/datasets/check_dev.py [SET.json] [--verbose]

Exits non-zero on a hard error. Also prints review aids: word overlap of
paraphrase queries with their gold messages, same-project sessions that contain
an identifier query's text but are not gold, and same-project term hits for
negative controls.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUIRED = {"identifier": 20, "keyword": 20, "paraphrase": 20, "zh": 20, "cross-language": 20, "temporal": 20,
            "negative": 12}
STOP = set("""a an the of to in on for and or is are was were be been it its this that with we our us you your
i me my what how why when where which who did do does done about after before from at by as into out up so
not no can could should would will any all some than then there their them they he she his her had has have
get got one two more most much many very just also still only ever""".split())


def norm(p: str | None) -> str:
    if not p:
        return ""
    p = re.sub(r"/+", "/", p.strip())
    return p.rstrip("/") or "/"


def under(child: str, anc: str) -> bool:
    return bool(child) and bool(anc) and (child == anc or child.startswith(anc.rstrip("/") + "/"))


def resolve(sess: dict, projects: list[dict]) -> str:
    """Explicit = deepest project folder that is cwd/git_repo_root or an ancestor; else repo root; else cwd."""
    cwd, root = norm(sess.get("cwd")), norm(sess.get("git_repo_root"))
    best = None
    for p in projects:
        for f in p.get("folders") or [p.get("primary_path")]:
            f = norm(f)
            if f and (under(cwd, f) or under(root, f)):
                d = f.count("/")
                if best is None or d > best[0]:
                    best = (d, p["name"])
    if best:
        return "explicit:" + best[1]
    if root:
        return "auto:" + root
    if cwd:
        return "cwd:" + cwd
    return "home"


def text_of(m: dict) -> str:
    parts = [m.get("content") or ""]
    for c in m.get("tool_calls") or []:
        parts.append(c["function"]["arguments"])
    return "\n".join(parts)


def terms(text: str) -> set[str]:
    out = {w for w in re.findall(r"[a-z][a-z0-9_.\-]{2,}", text.lower()) if w not in STOP}
    for run in re.findall(r"[\u4e00-\u9fff]+", text):
        out |= {run[i:i + 2] for i in range(len(run) - 1)}
        if len(run) == 1:
            out.add(run)
    return out


def main(argv: list[str]) -> int:
    verbose = "--verbose" in argv
    args = [a for a in argv if not a.startswith("--")]
    path = Path(args[0]) if args else HERE / "dev.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    errors: list[str] = []
    projects = data.get("projects") or []
    sessions = {s["id"]: s for s in data["sessions"]}
    if len(sessions) != len(data["sessions"]):
        errors.append("duplicate session ids")
    scope = {sid: resolve(s, projects) for sid, s in sessions.items()}

    # Cross-check attribution against the project's own resolver when it is importable.
    try:
        sys.path.insert(0, str(HERE.parents[1] / "src"))
        from project_history_recall.attribution import Environment, ExplicitProject, ProjectFolder, Resolver

        eps = [ExplicitProject(id=f"p{i}", name=p["name"], primary_path=p.get("primary_path"),
                               folders=tuple(ProjectFolder(f) for f in p["folders"])) for i, p in enumerate(projects)]
        res = Resolver(eps, Environment(home="/home/dev", junk_roots=("/", "/tmp")))
        for sid, s in sessions.items():
            ident = res.resolve(s.get("cwd"), s.get("git_repo_root"))
            mine = scope[sid]
            theirs = {"explicit": f"explicit:{ident.name}", "auto": f"auto:{ident.key}", "home": "home"}[ident.kind]
            if mine != theirs and not (ident.kind == "home" and mine in ("home", "cwd:/home/dev")):
                errors.append(f"{sid}: resolver disagrees: {mine} vs {theirs}")
    except ImportError as exc:  # pragma: no cover - informational only
        print(f"(project resolver not importable, skipped cross-check: {exc})")

    # Titles, archived, timestamps, messages, tool call pairing.
    titles = [s["title"] for s in data["sessions"] if s.get("title")]
    for t, n in Counter(titles).items():
        if n > 1:
            errors.append(f"title not unique: {t!r}")
    archived = {sid for sid, s in sessions.items() if s.get("archived")}
    askers = {q["current_session"] for q in data["queries"]}
    n_msgs = 0
    for sid, s in sessions.items():
        msgs = s.get("messages") or []
        n_msgs += len(msgs)
        if sid not in askers and not 4 <= len(msgs) <= 14:
            errors.append(f"{sid}: {len(msgs)} messages (want 4-14)")
        last = s.get("started_at", 0) - 1e-9
        pending: set[str] = set()
        for i, m in enumerate(msgs):
            ts = m.get("timestamp")
            if ts is None or ts <= last:
                errors.append(f"{sid}[{i}]: timestamp not increasing")
            last = ts if ts is not None else last
            for c in m.get("tool_calls") or []:
                pending.add(c["id"])
                json.loads(c["function"]["arguments"])
            if m["role"] == "tool" and (m.get("tool_call_id") not in pending or not m.get("tool_name")):
                errors.append(f"{sid}[{i}]: tool message without matching call / tool_name")
        if not 1790812800 <= s.get("started_at", 0) <= 1796083199:  # 2026-10-01 .. 2026-11-30 UTC
            errors.append(f"{sid}: started_at outside 2026-10-01..2026-11-30")
    if not 2 <= len(archived) <= 3:
        errors.append(f"{len(archived)} archived sessions (want 2-3)")

    # Queries.
    qids = Counter(q["id"] for q in data["queries"])
    errors += [f"query id not unique: {k}" for k, v in qids.items() if v > 1]
    cats, langs, catlang = Counter(), Counter(), Counter()
    decoyed = 0
    full_text = {sid: "\n".join(text_of(m) for m in s.get("messages") or []) + "\n" + (s.get("title") or "")
                 for sid, s in sessions.items()}
    for q in data["queries"]:
        qid, cur = q["id"], q["current_session"]
        cats[q["category"]] += 1
        langs[q["lang"]] += 1
        catlang[(q["category"], q["lang"])] += 1
        if cur not in sessions:
            errors.append(f"{qid}: unknown current_session")
            continue
        if scope[cur] in ("home", "cwd:/home/dev"):
            errors.append(f"{qid}: asked from Home")
        if q["lang"] not in ("en", "zh", "mixed"):
            errors.append(f"{qid}: bad lang")
        gold = q["gold_sessions"]
        if (q["category"] == "negative") != (not gold):
            errors.append(f"{qid}: negative iff empty gold violated")
        for g in gold:
            if g not in sessions:
                errors.append(f"{qid}: unknown gold {g}")
            elif g == cur:
                errors.append(f"{qid}: gold is the current session")
            elif g in archived:
                errors.append(f"{qid}: gold {g} is archived")
            elif scope[g] != scope[cur]:
                errors.append(f"{qid}: gold {g} in {scope[g]}, asked from {scope[cur]}")
        for g, idx in q.get("gold_messages") or []:
            if g not in gold:
                errors.append(f"{qid}: gold message in non-gold session {g}")
            elif not 0 <= idx < len(sessions[g]["messages"]):
                errors.append(f"{qid}: gold message index {idx} out of range for {g}")
        if gold and not q.get("gold_messages"):
            errors.append(f"{qid}: no gold_messages")

        qterms = terms(q["query"])
        same = [sid for sid in sessions if scope[sid] == scope[cur] and sid != cur and sid not in archived]
        other = [sid for sid in sessions if scope[sid] != scope[cur] and sid not in archived]
        if gold and any(qterms & terms(full_text[sid]) for sid in other):
            decoyed += 1
        if q["category"] == "paraphrase":
            gm = " ".join(text_of(sessions[g]["messages"][i]) for g, i in q["gold_messages"])
            shared = sorted(qterms & terms(gm))
            print(f"[paraphrase] {qid} shared={shared}  | {q['query']}")
        if q["category"] == "identifier":
            needle = q["query"].lower()
            extra = [sid for sid in same if sid not in gold and needle in full_text[sid].lower()]
            if extra:
                print(f"[identifier] {qid} {q['query']!r} also in non-gold {extra}")
        if q["category"] == "negative":
            hits = {sid: sorted(qterms & terms(full_text[sid])) for sid in same}
            hits = {k: v for k, v in hits.items() if v}
            elsewhere = sum(1 for sid in other if qterms & terms(full_text[sid]))
            if elsewhere == 0:
                errors.append(f"{qid}: negative has no other-project match at all")
            if hits or verbose:
                print(f"[negative] {qid} {q['query']!r} same-project term hits: {hits}")

    for cat, need in REQUIRED.items():
        if cats[cat] < need:
            errors.append(f"category {cat}: {cats[cat]} < {need}")
    if len(data["queries"]) < 160:
        errors.append(f"only {len(data['queries'])} queries")

    scopes = Counter(scope[s] for s in sessions)
    print("\nprojects (resolved scope -> sessions):")
    for k, v in sorted(scopes.items()):
        print(f"  {k:40s} {v}")
    print(f"sessions={len(sessions)} messages={n_msgs} archived={len(archived)} asking={len(askers)} "
          f"queries={len(data['queries'])} with_other_project_term_decoy={decoyed}")
    print("by category:", dict(cats))
    print("by lang:", dict(langs))
    print("by category x lang:", {f"{c}/{lang}": n for (c, lang), n in sorted(catlang.items())})
    if errors:
        print("\nERRORS:")
        for e in errors:
            print("  " + e)
        return 1
    print("\nOK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
