"""Hostile and odd input to every tool and to ``/recall``, as hypothesis properties.

A world of every kind of project (nested explicit projects, a repo with a linked
worktree, a symlink from one project into another, a plain folder whose name holds
``%`` ``_`` ``\\`` spaces and Chinese, a ``repo-2`` sibling, Home sessions), with
each session's scope written down by the builder. Every call, whatever its
arguments and whoever asks, must answer valid JSON (text for the command) within
:data:`CALL_BOUND` seconds, never raise into Hermes, and never show a session or a
message from outside the scope it was asked for (``scope: all`` is the deliberate
exception: then every result must carry its own session's project).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from . import world

CALL_BOUND = 30.0  # seconds: a loaded 2-core machine; a healthy call takes well under one
SHARED = "ibex walrus retry_policy settings-prod.yaml 广告点击 déjà"

FTS_TRICKS = ['"', '""', "'", "AND", "OR", "NOT", "NEAR(a b, 2)", "ibex*", "^ibex", "ibex:", "tokens:ibex",
              "{tokens}: ibex", "(", ")", "ibex OR", "- ibex", "+ibex", "ibex AND AND", '"ibex', "ibex\"*", "*",
              "NEAR", "col:", "entries_fts", "rank", "MATCH", "bm25(entries_fts)"]
LIKE_TRICKS = ["%", "_", "\\", "%%", "_%_", "\\%", "ibex%", "%ibex_", "a\\_b", "100%"]
PATH_TRICKS = ["../", "../../etc/passwd", "/etc/passwd", "~", "~/", ".", "..", "/", "//", "C:\\Windows",
               "\\\\server\\share", "file:///etc/passwd", "./../x", "a/../../b", "%2e%2e%2f"]
SQL_TRICKS = ["'; DROP TABLE sessions; --", "1 OR 1=1", "\" OR \"\"=\"", "); ATTACH DATABASE '/tmp/x' AS x; --",
              "@session:", "@session:%", "@session:../"]
SURROGATES = ["\ud800", "\udfff", "x\ud83dy", "ibex \udc80"]
UNICODE = ["\x00", "a\x00b", "\u202e evil", "\u200b", "\ufeff", "e\u0301",
           "ﬁ", "Ａｌｐｈａ", "𝔦𝔟𝔢𝔵", "🦌" * 50, "\U0010ffff", "\u3000", "\r\n\t", "ǅ", "İ", "ß", "\x1f\x7f",
           "广告", "廣告", "我", "ﾃｽﾄ", "ー", "한국어"]
NUMBERS = ["0", "-1", "1e309", "nan", "inf", "-inf", "9" * 400, "0x10", "1_000", " 3 ", "3.7", "-0"]


@dataclass
class HostileWorld:
    root: Path
    home: Path
    folders: dict[str, Path]
    projects: dict[str, str]  # name -> id
    scope: dict[str, str]  # session id -> scope label ("home" for Home)
    identity: dict[str, dict]  # session id -> the project dict a result must carry
    markers: dict[str, str]  # session id -> a token only its messages contain
    titles: dict[str, str]
    askers: list[str]
    cwd: dict[str, str | None]
    server: Any = None
    #: Generate lone surrogates too (JSON's ``"\ud800"`` escapes decode to them). Off in CI while the
    #: known bug is open (see tests/test_reliability_hostile.py); the stress run tries both.
    surrogates: bool = False

    hidden: set[str] = field(default_factory=set)  # archived and subagent sessions: never shown by a scope

    def peers(self, asker: str) -> set[str]:
        """What a search from ``asker`` may return: the visible sessions of its project but itself
        (an archived or subagent session that asks still has its project)."""
        label = self.scope.get(asker)
        if label in (None, "home"):
            return set()
        return {s for s, lab in self.scope.items() if lab == label and s != asker and s not in self.hidden}

    def visible(self) -> set[str]:
        return set(self.scope) - self.hidden


def build_world(root: Path, server_url: str | None = None) -> HostileWorld:
    import shutil

    from hermes_cli import projects_db
    from hermes_state import SessionDB

    if root.exists():
        shutil.rmtree(root)
    work = root / "work"
    home = root / "hermes"
    alpha = world.git_init(work / "alpha")
    billing = alpha / "services" / "billing"
    billing.mkdir(parents=True)
    (alpha / "sub").mkdir()
    repo = world.git_init(work / "repo")
    (repo / "src").mkdir()
    worktree = world.add_worktree(repo, work / "repo-wt", "feature")
    sibling = work / "repo-2"
    sibling.mkdir()
    odd = work / "F 100% _odd\\ name 广告"
    odd.mkdir()
    link = alpha / "link-to-repo"
    link.symlink_to(repo / "src", target_is_directory=True)
    with projects_db.connect_closing(home / "projects.db") as conn:
        pid_alpha = projects_db.create_project(conn, name="Alpha", folders=[str(alpha)])
        pid_billing = projects_db.create_project(conn, name="Billing", folders=[str(billing)])
    folders = {"alpha": alpha, "billing": billing, "repo": repo, "worktree": worktree, "sibling": sibling,
               "odd": odd, "link": link}
    ids = {"Alpha": pid_alpha, "Billing": pid_billing}
    explicit = {"alpha": {"kind": "explicit", "id": pid_alpha, "name": "Alpha"},
                "billing": {"kind": "explicit", "id": pid_billing, "name": "Billing"}}

    def auto(path: Path) -> dict:
        return {"kind": "auto", "key": str(path), "name": path.name}

    # (session, cwd, scope label, identity, extra)
    plan: list[tuple[str, str | None, str, dict, dict]] = [
        ("a1", str(alpha), "alpha", explicit["alpha"], {}),
        ("a2", str(alpha / "sub"), "alpha", explicit["alpha"], {}),
        ("l1", str(link), "alpha", explicit["alpha"], {}),  # a symlink into the repo: Alpha's folder decides
        ("b1", str(billing), "billing", explicit["billing"], {}),
        ("b2", str(billing) + "/", "billing", explicit["billing"], {}),
        ("r1", str(repo), "repo", auto(repo), {}),
        ("r2", str(repo / "src"), "repo", auto(repo), {}),
        ("w1", str(worktree), "repo", auto(repo), {}),
        ("s1", str(sibling), "sibling", auto(sibling), {}),
        ("f1", str(odd), "odd", auto(odd), {}),
        ("h1", None, "home", {"kind": "home"}, {}),
        ("h2", str(Path.home()), "home", {"kind": "home"}, {}),
        ("h3", "/tmp", "home", {"kind": "home"}, {}),
        ("x-archived", str(alpha), "alpha", explicit["alpha"], {"archived": True}),
        ("x-sub", str(alpha), "alpha", explicit["alpha"], {"source": "subagent"}),
        ("ask-a", str(alpha), "alpha", explicit["alpha"], {"asker": True}),
        ("ask-b", str(billing / "api"), "billing", explicit["billing"], {"asker": True}),
        ("ask-r", str(repo), "repo", auto(repo), {"asker": True}),
        ("ask-f", str(odd), "odd", auto(odd), {"asker": True}),
        ("ask-s", str(sibling), "sibling", auto(sibling), {"asker": True}),
        ("ask-h", None, "home", {"kind": "home"}, {"asker": True}),
    ]
    (billing / "api").mkdir()
    db = SessionDB(db_path=home / "state.db")
    scope, identity, markers, titles, cwds, askers, hidden = {}, {}, {}, {}, {}, [], set()
    clock = 1_767_000_000.0
    try:
        for sid, cwd, label, ident, extra in plan:
            db.create_session(sid, extra.get("source", "cli"), cwd=cwd)
            marker = f"mk{abs(hash(('hostile', sid))) % 10**10:010d}q"
            title = f"Title of {sid} {marker}"
            if not extra.get("asker"):
                for i, text in enumerate((f"{SHARED} {marker} user words", f"assistant answer {marker} {SHARED}")):
                    clock += 60
                    calls = None
                    if i == 1:
                        calls = [{"id": f"c-{sid}", "type": "function", "function": {
                            "name": "terminal", "arguments": json.dumps({"command": f"grep {marker} ."})}}]
                    db.append_message(sid, "user" if i == 0 else "assistant", text, tool_calls=calls, timestamp=clock)
                clock += 60  # an edit, for the code history: the file's content carries the marker
                db.append_message(sid, "assistant", "writing the file", timestamp=clock, tool_calls=[{
                    "id": f"w-{sid}", "type": "function", "function": {"name": "write_file", "arguments": json.dumps(
                        {"path": f"{cwd or '/tmp'}/src/app.py", "content": f"# {marker}\nretry_policy = 3\n"})}}])
                db.append_message(sid, "tool", '{"bytes_written": 30, "dirs_created": true}', timestamp=clock + 1,
                                  tool_call_id=f"w-{sid}", tool_name="write_file")
                db.set_session_title(sid, title)
                titles[sid] = title
            else:
                askers.append(sid)
            if extra.get("archived"):
                db.set_session_archived(sid, True)
            if extra.get("archived") or extra.get("source") == "subagent":
                hidden.add(sid)
            scope[sid], identity[sid], markers[sid], cwds[sid] = label, ident, marker, cwd
    finally:
        db.close()
    world.write_config(home, embedding=world.remote_embedding(server_url) if server_url else None)
    if server_url:
        world.consent_all(home, server_url)
    return HostileWorld(root, home, folders, ids, scope, identity, markers, titles, askers, cwds, hidden=hidden)


# -- strategies ---------------------------------------------------------------------------------------


def texts(w: HostileWorld) -> st.SearchStrategy[str]:
    known = [*w.scope, *w.markers.values(), *w.titles.values(), *w.projects.values(), "alpha", "billing",
             *[str(p) for p in w.folders.values()], *[s[:3] for s in w.scope], "@session:a1", "@session:a",
             "session", "timeline", "projects", "status", "index", "search", "hybrid", "keyword", "semantic",
             "project", "all", "user", "assistant", "tool_call", "title", "main", "feature", "src/app.py", "app.py",
             "src/", ".py", "retry_policy"]
    huge = st.builds(lambda s, n: s * n, st.sampled_from(["a", "广告", "ibex ", '"', "OR ", "%_", "é"]),
                     st.integers(1_000, 60_000))
    if w.surrogates:
        return st.one_of(_texts(known, huge, True), st.sampled_from(SURROGATES),
                         st.lists(st.sampled_from(SURROGATES + SHARED.split()), min_size=1, max_size=4).map(" ".join))
    return _texts(known, huge, False)


def _texts(known: list[str], huge: st.SearchStrategy[str], surrogates: bool) -> st.SearchStrategy[str]:
    alphabet = st.characters(codec=None) if surrogates else st.characters(codec="utf-8")
    words = FTS_TRICKS + LIKE_TRICKS + UNICODE + known + SHARED.split()
    return pick(
        (4, st.sampled_from(FTS_TRICKS + LIKE_TRICKS + PATH_TRICKS + SQL_TRICKS + UNICODE + NUMBERS + known)),
        (4, st.lists(st.sampled_from(words), min_size=1, max_size=8).map(" ".join)),
        (2, st.text(alphabet=alphabet, min_size=1, max_size=300)),
        (1, huge),
        (1, st.sampled_from(["", " ", "\n\t "])),
    )


def values(w: HostileWorld) -> st.SearchStrategy[Any]:
    scalar = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                       st.floats(allow_nan=True, allow_infinity=True), texts(w))
    return st.one_of(scalar, st.lists(scalar, max_size=5), st.dictionaries(st.text(max_size=6), scalar, max_size=3))


TIMES = ["2026-01-01", "7d", "1h", "30m", "2025-12-31T23:59:59Z", "0d", "99999d", "1970-01-01", "9999-12-31", "",
         None]
FREE_TEXT = ("query", "branch", "session_id", "project_id")


def pick(*weighted: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of the strategies, with these weights (``st.one_of`` flattens nested choices and
    would weigh every leaf alike)."""
    slots = [strategy for weight, strategy in weighted for _ in range(weight)]
    return st.integers(min_value=0, max_value=len(slots) - 1).flatmap(lambda i: slots[i])


def _safe(w: HostileWorld, name: str, spec: dict) -> st.SearchStrategy[Any]:
    """A value the tool accepts, hostile where the argument is free text (a query, a branch, an id)."""
    kind = spec.get("type")
    enum = spec.get("enum") or spec.get("items", {}).get("enum")
    if name in ("session_id", "project_id", "branch"):
        return st.one_of(texts(w), st.sampled_from([*w.scope, *w.projects.values(), "alpha", "billing", "main",
                                                    "feature", "@session:a1", "a", "ask-", "x-", ""]))
    if name in FREE_TEXT or (kind == "string" and not enum and name not in ("after", "before")):
        return texts(w)
    if enum and kind == "string":
        return st.one_of(st.sampled_from(enum), st.sampled_from([e.upper() for e in enum] + [f" {e} " for e in enum]))
    if kind == "array":
        return st.one_of(st.lists(st.sampled_from(enum), max_size=4) if enum else st.lists(texts(w), max_size=3),
                         st.sampled_from([",".join(enum or []), "user, title", ""]))
    if kind == "integer":
        return st.one_of(st.integers(min_value=-5, max_value=200), st.integers(), st.sampled_from(["3", " 7 ", "2.9"]))
    if kind == "boolean":
        return st.one_of(st.booleans(), st.sampled_from(["true", "false", "yes", "1", 0, 1]))
    if name in ("after", "before"):
        return st.sampled_from(TIMES)
    return values(w)


def tool_args(w: HostileWorld, schema: dict) -> st.SearchStrategy[Any]:
    """Arguments for one tool: mostly accepted values with hostile free text; then the same with
    one argument replaced by anything (wrong type, junk); then anything at all, unknown keys, and
    now and then not a dict."""
    params = schema.get("parameters", {})
    props = params.get("properties", {})
    required = set(params.get("required", ()))
    safe = {name: _safe(w, name, spec) for name, spec in props.items()}
    valid = st.fixed_dictionaries({k: v for k, v in safe.items() if k in required},
                                  optional={k: v for k, v in safe.items() if k not in required})
    names = sorted(props) or ["x"]
    one_bad = st.builds(lambda base, key, value: {**base, key: value}, valid, st.sampled_from(names), values(w))
    extra = st.dictionaries(st.text(max_size=12), values(w), max_size=2)
    loose = st.builds(lambda fixed, more: {**more, **fixed},
                      st.fixed_dictionaries({}, optional={k: st.one_of(v, values(w)) for k, v in safe.items()}), extra)
    return pick((6, valid), (3, one_bad), (2, loose), (1, st.one_of(st.none(), st.lists(values(w), max_size=3),
                                                                      texts(w))))


def askers(w: HostileWorld) -> st.SearchStrategy[str | None]:
    return st.one_of(st.sampled_from(w.askers), st.sampled_from(w.askers), st.sampled_from(sorted(w.scope)),
                     st.none(), texts(w))


# -- checks -------------------------------------------------------------------------------------------


@dataclass
class Stats:
    calls: int = 0
    by_tool: dict[str, int] = field(default_factory=dict)
    codes: dict[str, int] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)
    not_utf8: int = 0

    def record(self, tool: str, seconds: float, code: str) -> None:
        self.calls += 1
        self.by_tool[tool] = self.by_tool.get(tool, 0) + 1
        key = f"{tool}:{code}"
        self.codes[key] = self.codes.get(key, 0) + 1
        self.seconds.append(seconds)

    def summary(self) -> dict:
        ordered = sorted(self.seconds)
        pick = (lambda q: round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 4)) if ordered else (
            lambda q: 0.0)
        return {"calls": self.calls, "by_tool": self.by_tool, "codes": self.codes, "p50_s": pick(0.5),
                "p99_s": pick(0.99), "max_s": round(ordered[-1], 4) if ordered else 0.0,
                "replies_not_utf8_encodable": self.not_utf8}


def plugin_tools() -> dict[str, Any]:
    """The plugin's tools as Hermes's registry holds them (whatever has been registered by now)."""
    from tools.registry import registry

    entries = getattr(registry, "_tools", {})
    return {name: e for name, e in entries.items() if getattr(e, "toolset", None) == "project"}


def _is_all(args: Any) -> bool:
    return isinstance(args, dict) and isinstance(args.get("scope"), str) and args["scope"].strip().lower() == "all"


def _scan(w: HostileWorld, text: str, allowed: set[str], what: str, ids: bool = True) -> None:
    for sid in w.scope:
        if sid in allowed:
            continue
        if w.markers[sid] in text:
            at = text.index(w.markers[sid])
            raise AssertionError(f"{what}: shows a message of {sid} (scope {w.scope[sid]}) from outside its scope: "
                                 f"...{text[max(0, at - 300):at + 50]}...")
        if ids and (f"@session:{sid}\"" in text or f'"session_id": "{sid}"' in text):
            raise AssertionError(f"{what}: names session {sid} (scope {w.scope[sid]}) from outside its scope")


def _strings(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value, value.strip()}
    if isinstance(value, dict):
        return {s for v in [*value.keys(), *value.values()] for s in _strings(v)}
    if isinstance(value, list):
        return {s for v in value for s in _strings(v)}
    return set()


def check_reply(w: HostileWorld, tool: str, args: Any, asker: str | None, reply: dict) -> None:
    assert isinstance(reply, dict), f"{tool}: not a JSON object: {reply!r}"[:300]
    if "success" not in reply:
        raise AssertionError(f"{tool}: no 'success' (an exception reached Hermes?): {reply}"[:500])
    if reply["success"] is False:
        assert isinstance(reply.get("code"), str) and reply["code"], f"{tool}: error without a code: {reply}"
        assert reply["code"] != "internal", f"{tool}: internal error: {reply.get('error')}"
        assert isinstance(reply.get("error"), str) and reply["error"], f"{tool}: error without a message"
    shown = {k: v for k, v in reply.items() if k != "query"}
    text = json.dumps(shown, ensure_ascii=False)
    given = _strings(args) | ({asker} if isinstance(asker, str) else set())
    given |= {word for value in list(given) for word in value.split()}
    for given_value in sorted(given, key=len, reverse=True):
        if len(given_value) >= 4:  # the caller's own words echoed back (an error names its bad argument)
            for form in (given_value, json.dumps(given_value, ensure_ascii=False)[1:-1], repr(given_value)[1:-1],
                         json.dumps(repr(given_value)[1:-1], ensure_ascii=False)[1:-1]):
                text = text.replace(form, "")
    mine = {asker} if asker in w.scope else set()
    if tool == "project_history_search":
        results = reply.get("results") or []
        if _is_all(args):
            for r in results:
                expected = w.identity.get(r["session_id"])
                assert r["session_id"] in w.visible(), f"scope all returned hidden session {r['session_id']}"
                assert r.get("project") == expected, f"scope all: {r['session_id']} labelled {r.get('project')}, " \
                                                     f"expected {expected}"
        else:
            allowed = w.peers(asker) if asker in w.scope else set()
            got = {r["session_id"] for r in results}
            assert got <= allowed, f"search by {asker!r} returned {sorted(got - allowed)} outside its scope"
            _scan(w, text, allowed | mine, f"search by {asker!r}")
    elif tool == "project_history":
        operation = args.get("operation") if isinstance(args, dict) else None
        operation = operation.strip().lower() if isinstance(operation, str) else None
        if operation == "timeline":
            if _is_all(args):
                for s in reply.get("sessions") or []:
                    assert s["session_id"] not in w.hidden, f"timeline all shows hidden {s['session_id']}"
            else:
                allowed = w.peers(asker) | mine if asker in w.scope else set()
                got = {s["session_id"] for s in reply.get("sessions") or []}
                assert got <= allowed, f"timeline by {asker!r} lists {sorted(got - allowed)} outside its scope"
                _scan(w, text, allowed, f"timeline by {asker!r}")
        elif operation in ("projects", "status"):
            _scan(w, text, mine, f"{operation} by {asker!r}", ids=False)
    elif tool == "project_history_index":
        _scan(w, text, set(), "index", ids=False)
    elif tool in ("project_session_move",):
        pass  # checked by the caller (the move itself) — its reply names no other session
    else:  # a tool this module does not know yet (the edit chain): it must still stay in scope
        if not _is_all(args):
            allowed = w.peers(asker) if asker in w.scope else set()
            _scan(w, text, allowed | mine, f"{tool} by {asker!r}", ids=False)


@contextmanager
def env(name: str, value: str | None):
    old = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def call_tool(w: HostileWorld, tool: str, args: Any, asker: str | None, stats: Stats) -> dict:
    entry = plugin_tools()[tool]
    started = time.monotonic()
    try:
        raw = entry.handler(args, session_id=asker, task_id="t-hostile")
    except BaseException as exc:  # the property: nothing reaches Hermes's dispatcher
        raise AssertionError(f"{tool} raised {type(exc).__name__}: {exc}") from exc
    seconds = time.monotonic() - started
    assert seconds < CALL_BOUND, f"{tool} took {seconds:.1f}s"
    assert isinstance(raw, str), f"{tool} answered {type(raw).__name__}, not a JSON string"
    reply = json.loads(raw)
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        stats.not_utf8 += 1
    stats.record(tool, seconds, reply.get("code", "ok") if isinstance(reply, dict) else "?")
    try:
        check_reply(w, tool, args, asker, reply)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n  args={ascii(args)[:600]}\n  asker={asker!r}") from None
    return reply


def restore_move(w: HostileWorld, asker: str | None, reply: dict) -> None:
    """A move that happened is checked (it went to a real project folder or Home) and undone."""
    if not reply.get("success") or asker not in w.scope:
        return
    from hermes_state import SessionDB

    targets = {str(w.folders["alpha"]), str(w.folders["billing"]), os.path.expanduser("~")}
    assert reply["cwd"] in targets, f"moved {asker} to {reply['cwd']}, not a project folder or Home"
    db = SessionDB(db_path=w.home / "state.db")
    try:  # exactly as built (Hermes's own API never clears git fields, so this is a raw write)
        db._execute_write(lambda conn: conn.execute(
            "UPDATE sessions SET cwd = ?, git_branch = NULL, git_repo_root = NULL WHERE id = ?",
            (w.cwd[asker], asker)))
    finally:
        db.close()


def command_text(raw: str) -> str:
    from hermes_cli.plugins import get_plugin_command_handler, resolve_plugin_command_result

    handler = get_plugin_command_handler("recall")
    assert handler is not None, "/recall is not registered"
    return resolve_plugin_command_result(handler(raw))


def check_command(w: HostileWorld, raw: str, asker: str, stats: Stats) -> str:
    """``/recall <raw>`` asked from ``asker``'s folder and session."""
    cwd = w.cwd.get(asker) or str(w.root)
    before = os.getcwd()
    os.chdir(cwd)
    started = time.monotonic()
    try:
        with env("HERMES_SESSION_ID", asker):
            try:
                text = command_text(raw)
            except BaseException as exc:
                raise AssertionError(f"/recall {raw!r} raised {type(exc).__name__}: {exc}") from exc
    finally:
        os.chdir(before)
    seconds = time.monotonic() - started
    assert seconds < CALL_BOUND, f"/recall took {seconds:.1f}s"
    assert isinstance(text, str), f"/recall answered {type(text).__name__}"
    assert not text.startswith("/recall failed"), f"/recall {raw!r}: {text[:300]}"
    stats.record("/recall", seconds, "error" if text.startswith("error:") else "ok")
    words = raw.split()
    sub = words[0].lower() if words else "status"
    if sub == "sessions" and any(x.lower() in ("all", "--all") for x in words[1:]):
        return text
    allowed = w.peers(asker) | {asker}
    shown = text.replace(raw, "")
    for word in sorted(set(raw.split()) | set(raw.replace('"', " ").replace("'", " ").split()), key=len, reverse=True):
        if len(word) >= 4:  # the user's own words echoed back ("unknown subcommand 'x'")
            shown = shown.replace(word, "")
    for sid in w.scope:
        if sid in allowed:
            continue
        if sub in ("search", "sessions") and f"@session:{sid} " in shown:
            raise AssertionError(f"/recall {raw!r} by {asker}: shows {sid} from outside its scope")
        if w.markers[sid] in shown:
            raise AssertionError(f"/recall {raw!r} by {asker}: shows a message of {sid} from outside its scope")
    return text


def command_args(w: HostileWorld) -> st.SearchStrategy[str]:
    sub = st.sampled_from(["", "status", "index", "index --force", "search", "projects", "sessions", "sessions all",
                           "help", "SEARCH", "bogus", "search --", "-h"])
    return st.one_of(
        st.builds(lambda a, b: f"{a} {b}".strip(), sub, texts(w)),
        texts(w),
        st.builds(lambda b: f"search {b}", texts(w)),
    )


def tool_property(w: HostileWorld, tool: str, stats: Stats) -> Callable[[Any, Any], None]:
    def prop(args: Any, asker: Any) -> None:
        reply = call_tool(w, tool, args, asker, stats)
        if tool == "project_session_move":
            restore_move(w, asker, reply)

    return prop


def run_properties(w: HostileWorld, examples: int, seed: int | None = None,
                   on_example: Callable[[], None] | None = None) -> dict[str, Any]:
    """Every plugin tool and ``/recall`` against ``examples`` generated calls each (the stress run's
    entry point; the tests use the same checks with their own ``@given``)."""
    from hypothesis import Phase

    stats = Stats()
    failures: dict[str, str] = {}
    phases = list(Phase) if not w.surrogates else [p for p in Phase if p is not Phase.shrink]
    common = settings(max_examples=examples, deadline=None, database=None, derandomize=seed is None,
                      suppress_health_check=list(HealthCheck), print_blob=False, phases=phases)
    for tool, entry in sorted(plugin_tools().items()):
        prop = common(given(args=tool_args(w, getattr(entry, "schema", {}) or {}), asker=askers(w))(
            tool_property(w, tool, stats)))
        try:
            prop()
        except Exception as exc:
            failures[tool] = f"{type(exc).__name__}: {exc}"[:2000]

    @common
    @given(raw=command_args(w), asker=st.sampled_from(w.askers))
    def command(raw: str, asker: str) -> None:
        check_command(w, raw, asker, stats)

    try:
        command()
    except Exception as exc:
        failures["/recall"] = f"{type(exc).__name__}: {exc}"[:2000]
    return {"examples_per_target": examples, "targets": sorted([*plugin_tools(), "/recall"]),
            "failures": failures, **stats.summary()}
