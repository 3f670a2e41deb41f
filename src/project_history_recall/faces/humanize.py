"""Text for people: the same payloads the tools return, as lines to read.

One module for every human face (``phr`` and ``/recall``), so a status or a
search reads the same in a terminal and in a chat. Each function takes a payload
dict (success or error) and returns a string; none of them does any I/O.
"""

from __future__ import annotations

from collections.abc import Callable

SEARCH_PREVIEW = 10


def count(n: object, noun: str, plural: str | None = None) -> str:
    """``1 session``, ``2 sessions`` (a missing number reads ``?``)."""
    many = plural or noun + "s"
    if not isinstance(n, int):
        return f"? {many}"
    return f"{n} {noun}" if n == 1 else f"{n} {many}"


def _project_name(project: dict | None) -> str:
    project = project or {}
    if project.get("kind") == "home":
        return "Home"
    return str(project.get("name") or project.get("key") or project.get("kind") or "?")


def error(payload: dict) -> str:
    text = f"error: {payload.get('error')} ({payload.get('code')})"
    for c in payload.get("candidates") or []:
        text += f"\n  {c['session_id']}  {c.get('title') or '(untitled)'}  [{c.get('when')}]"
    return text


def _guard(fn: Callable[[dict], str]) -> Callable[[dict], str]:
    """Errors and the "index is being built" answer read the same for every operation."""

    def wrapper(payload: dict) -> str:
        if payload.get("success") is False:
            return error(payload)
        if payload.get("index_status") == "building" and fn is not _status:
            return str(payload.get("message") or "The history index is being built.")
        lines = [fn(payload)]
        if payload.get("index_status") in ("updating", "stale") and fn is not _status:
            lines.append(f"(index {payload['index_status']}: answers may miss the newest messages)")
        if payload.get("warning"):
            lines.append(f"warning: {payload['warning']}")
        if payload.get("notice"):
            lines.append(str(payload["notice"]))
        return "\n".join(line for line in lines if line)

    wrapper.__doc__ = fn.__doc__
    return wrapper


@_guard
def search(payload: dict) -> str:
    in_scope = count(payload.get('sessions_in_scope', 0), 'session')
    lines = [f"project: {_project_name(payload.get('project'))} · {in_scope} in scope · "
             f"semantic: {payload.get('semantic_status')}"]
    if payload.get("message"):
        lines.append(str(payload["message"]))
    if payload.get("semantic_message"):
        lines.append(str(payload["semantic_message"]))
    for n, r in enumerate(payload.get("results", []), start=1):
        title = r.get("title") or "(untitled)"
        where = f", {_project_name(r['project'])}" if r.get("project") else ""
        sure = f", {r['confidence']} confidence" if r.get("confidence") else ""
        lines.append(f"{n}. {r['link']}  {title}  [{r['when']}, {r['kind']}, {r['score_source']}{where}{sure}]")
        lines.append(f"   {r['snippet']}")
        if r.get("reply"):
            lines.append(f"   ↳ reply ({r['reply']['kind']}): {r['reply']['snippet']}")
        if r.get("also"):
            lines.append(f"   + also ({r['also']['kind']}): {r['also']['snippet']}")
    return "\n".join(lines)


def _size(n: object) -> str:
    if not isinstance(n, int | float):
        return "?"
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


def job_line(job: dict | None) -> str:
    if not job:
        return ""
    state = job.get("state")
    progress = f", {job['progress']}" if job.get("progress") else ""
    when = f", finished {job['finished']}" if job.get("finished") else f", started {job.get('created')}"
    return f"job {job.get('id')}: {state}{progress}{when} ({job.get('seconds')}s, {job.get('reason')})"


def _status(payload: dict) -> str:
    lines = [f"project-history-recall {payload.get('version', '')} · Hermes home {payload.get('hermes_home')}"]
    lines.append(f"index: {payload.get('index_status')} · {payload.get('index_path')}")
    if payload.get("index_exists"):
        lines.append(f"  {count(payload.get('sessions_indexed'), 'session')}, "
                     f"{count(payload.get('messages_indexed'), 'message')}, "
                     f"{count(payload.get('entries_indexed'), 'entry', 'entries')} · "
                     f"{_size(payload.get('index_bytes'))}")
        seconds = payload.get("last_index_seconds")
        took = f" (took {seconds:.2f}s)" if isinstance(seconds, int | float) else ""
        lines.append(f"  last indexed {payload.get('last_index_at') or 'never'}{took}")
    if "state_db_sessions" in payload:
        lines.append(f"Hermes sessions: {payload['state_db_sessions']} "
                     f"({payload.get('sessions_pending', 0)} changed since the last index)")
    elif not payload.get("state_db_exists"):
        lines.append(f"Hermes session database not found: {payload.get('state_db')}")
    if payload.get("job"):
        lines.append(job_line(payload["job"]))
    consent = payload.get("consent") or {}
    semantic = payload.get("semantic") or {}
    pending = f", {payload['semantic_pending']} messages waiting" if payload.get("semantic_pending") else ""
    lines.append(f"semantic: {payload.get('semantic_status')} ({semantic.get('provider')}, "
                 f"{semantic.get('vectors_indexed', 0)} vectors{pending}) · consent: "
                 f"{'given' if consent.get('given') else 'not needed' if not consent.get('required') else 'missing'}")
    sent = payload.get("sent") or {}
    if sent.get("requests"):
        lines.append(f"sent to the embedding provider: {sent['requests']} requests, {sent.get('texts', 0)} texts, "
                     f"{sent.get('chars', 0)} characters (counts only)")
    withheld = payload.get("withheld") or {}
    if withheld.get("sessions_withheld") or withheld.get("exclusions"):
        lines.append(_withheld_line(withheld))
    project = payload.get("project")
    if project:
        size = f" · {count(payload['sessions_in_project'], 'session')}" if "sessions_in_project" in payload else ""
        lines.append(f"current project: {_project_name(project)} ({project.get('kind')}){size}")
    if payload.get("message"):
        lines.append(str(payload["message"]))
    return "\n".join(lines)


status = _guard(_status)


@_guard
def index(payload: dict) -> str:
    if payload.get("status") == "running":
        return str(payload.get("message"))
    removed = f", {payload['sessions_removed']} removed" if payload.get("sessions_removed") else ""
    line = (f"indexed {count(payload.get('sessions_updated', 0), 'changed session')} of "
            f"{payload.get('sessions_total', 0)}{removed} ({count(payload.get('messages_read', 0), 'message')}) "
            f"in {float(payload.get('seconds') or 0):.2f}s")
    embedding = payload.get("embedding") or {}
    if embedding.get("embedded"):
        seconds = float(embedding.get('embed_seconds') or 0)
        line += f"; embedded {count(embedding['embedded'], 'message')} in {seconds:.1f}s"
    elif embedding.get("semantic_status") not in (None, "ready"):
        line += f"; semantic search: {embedding['semantic_status']}"
    return line


@_guard
def projects(payload: dict) -> str:
    lines = []
    for p in payload.get("projects", []):
        mark = "*" if p.get("current") else " "
        lines.append(f"{mark} {_project_name(p)} ({p.get('kind')})  {count(p.get('sessions'), 'session')}, "
                     f"{count(p.get('messages'), 'message')}, last {p.get('last_activity') or '-'}")
    if payload.get("withheld"):
        lines.append(_withheld_line(payload["withheld"]))
    return "\n".join(lines) or "No projects yet."


def _withheld_line(withheld: dict) -> str:
    return (f"kept out of the index: {withheld.get('sessions_withheld', 0)} sessions "
            f"({withheld.get('forgotten', 0)} forgotten, {withheld.get('exclusions', 0)} exclusions; "
            "`phr exclude --list`)")


@_guard
def withheld(payload: dict) -> str:
    """``phr forget``, ``phr exclude`` and ``--list``."""
    if "exclusions" not in payload:
        return str(payload.get("message"))
    lines = [f"excluded: {e.get('name') or e.get('path')}" + (" (config.yaml)" if e.get("from") else "")
             for e in payload["exclusions"]]
    lines += [f"forgotten: {sid}" for sid in payload.get("forgotten", [])]
    lines.append(f"{payload.get('sessions_withheld', 0)} sessions kept out of the index")
    return "\n".join(lines)


@_guard
def timeline(payload: dict) -> str:
    scope = "every project" if payload.get("scope") == "all" else _project_name(payload.get("project"))
    lines = [f"{scope}: {payload.get('shown', 0)} of {count(payload.get('total', 0), 'session')}, newest first"]
    if payload.get("message"):
        lines.append(str(payload["message"]))
    for s in payload.get("sessions", []):
        where = f"  · {_project_name(s['project'])}" if s.get("project") else ""
        mark = " (this session)" if s.get("current") else ""
        lines.append(f"{s.get('last_active') or s.get('when')}  {s['link']}  {s.get('label')}  "
                     f"[{count(s.get('message_count'), 'msg')}]{where}{mark}")
    return "\n".join(lines)


def _entry_lines(entries: list[dict]) -> list[str]:
    lines = []
    for e in entries:
        who = e["kind"] if e["kind"] != "tool_call" else f"tool {e.get('tool_name') or ''}".strip()
        mark = "▶ " if e.get("anchor") else ""
        text = " ".join(str(e.get("text", "")).split())
        lines.append(f"{mark}[{e.get('message_id')}] {who} · {e.get('when')}: {text[:400]}")
    return lines


@_guard
def session(payload: dict) -> str:
    s = payload.get("session") or {}
    lines = [f"{s.get('link')}  {s.get('title') or '(untitled)'}",
             f"  project {_project_name(s.get('project'))} · cwd {s.get('cwd') or '-'} · branch "
             f"{s.get('branch') or '-'} · {s.get('started')} · {s.get('message_count')} messages"]
    parent = payload.get("parent")
    if parent:
        lines.append(f"  parent: {parent.get('session_id')} ({parent.get('relation', 'parent')})")
    for c in payload.get("children", []):
        lines.append(f"  child: {c['session_id']} ({c.get('relation')}) {c.get('title') or ''}".rstrip())
    lines += _entry_lines(payload.get("entries", []))
    if payload.get("truncated"):
        lines.append(f"… {payload.get('elided')} entries elided …")
        lines += _entry_lines(payload.get("tail", []))
    if payload.get("mode") == "window":
        lines.append(f"({payload.get('more_before')} messages before, {payload.get('more_after')} after this window)")
    return "\n".join(lines)


@_guard
def code_history(payload: dict) -> str:
    rounds = payload.get("rounds") or []
    if not rounds:
        return str(payload.get("message") or f"No recorded edits of {payload.get('path')} in this project.")
    lines = [f"{payload.get('path')}: {count(len(rounds), 'round')}, oldest first"]
    for n, r in enumerate(rounds, start=1):
        where = f" in {r['symbol']}" if r.get("symbol") else ""
        kept = {True: "  [still in the file]", False: "  [no longer in the file]"}.get(r.get("still_in_file"), "")
        lines.append(f"{n}. {r.get('link')}  {r.get('when')}  branch {r.get('branch') or '?'}{where}{kept}")
        if r.get("said"):
            lines.append(f"   asked: {r['said']}")
        lines.extend("   " + line for line in str(r.get("patch") or "").splitlines()[:40])
    return "\n".join(lines)


@_guard
def consent(payload: dict) -> str:
    if "revoked" in payload:
        return "consent revoked: nothing more is sent" if payload["revoked"] else "there was no consent to revoke"
    return str(payload.get("message") or "consent recorded")
