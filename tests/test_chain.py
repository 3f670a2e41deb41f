"""The coding scene end to end: edits made by Hermes's real file tools on a real git repo,
recorded through SessionDB, indexed incrementally, asked for with code_history.

Every edit runs through Hermes's own tool registry (``patch`` replace and V4A,
``write_file``), so the arguments and results stored are exactly what an agent
session stores, failures included.
"""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path

import pytest

from builders import History, add_worktree, git_init, tool_call
from project_history_recall.errors import RecallError
from project_history_recall.index.indexer import Indexer
from project_history_recall.index.store import Index
from project_history_recall.search.scope import compute_scope
from project_history_recall.services.code_history import chain_summary, code_history

FILE = "src/app/search.py"
ORIGINAL = '''"""Search client."""


def search(query, config):
    timeout = 5
    return fetch(query, timeout)


def fetch(query, timeout):
    return {"query": query, "timeout": timeout}
'''
REWRITE_MAIN = '''"""Search client."""


def search(query, config):
    if not query:
        return []
    timeout = config.get("timeout", 5)
    return fetch(query, timeout)


def fetch(query, timeout, retries=3):
    for _ in range(retries):
        return {"query": query, "timeout": timeout}
'''
CLIENT = '''"""Search client."""


class Client:
    def __init__(self, config):
        self.timeout = config.get("timeout", 5)

    def search(self, query):
        return {"query": query, "timeout": self.timeout}
'''
CLIENT_V2 = CLIENT.replace("return {\"query\": query, \"timeout\": self.timeout}",
                           "return {\"query\": query.strip(), \"timeout\": self.timeout}")


def commit(repo: Path, files: dict[str, str], message: str) -> None:
    for rel, text in files.items():
        target = repo / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t",
                    "commit", "-q", "-m", message], check=True)


class Agent:
    """Plays the agent loop: the user's words, the assistant's tool call, Hermes's tool
    really running (relative paths resolved against ``TERMINAL_CWD``, as for a session
    started in that folder), and the tool result — all stored through SessionDB."""

    def __init__(self, history: History, monkeypatch: pytest.MonkeyPatch) -> None:
        import tools.file_tools  # noqa: F401  (registers patch / write_file)
        from tools.registry import registry

        self.h = history
        self.mp = monkeypatch
        self.registry = registry
        self.ids = itertools.count(1)

    def ask(self, sid: str, words: str) -> int:
        return self.h.say(sid, ("user", words))

    def edit(self, sid: str, cwd: Path, tool: str, args: dict) -> tuple[int, dict]:
        call_id = f"call_{next(self.ids)}"
        message_id = self.h.say(sid, ("assistant", "", {"tool_calls": [tool_call(call_id, tool, args)]}))
        self.mp.setenv("TERMINAL_CWD", str(cwd))
        raw = self.registry.dispatch(tool, args, task_id=sid)
        assert isinstance(raw, str)
        self.h.say(sid, ("tool", raw, {"tool_call_id": call_id, "tool_name": tool}))
        return message_id, json.loads(raw)

    def reply(self, sid: str, text: str) -> int:
        return self.h.say(sid, ("assistant", text))


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("chain")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HERMES_HOME", str(tmp / "hermes-tools"))
        repo = git_init(tmp / "repo")
        commit(repo, {FILE: ORIGINAL, "README.md": "demo\n"}, "search client")
        wt = add_worktree(repo, tmp / "repo-feature", "feature-x")
        other = git_init(tmp / "other")
        commit(other, {FILE: ORIGINAL}, "same layout, other project")
        h = History(tmp / "hermes")
        agent = Agent(h, mp)
        ids: dict[str, int] = {}

        # 1. main: a replace edit inside search().
        h.session("s1", repo, branch="main")
        ids["s1-ask"] = agent.ask("s1", "make the timeout configurable")
        ids["s1"], res = agent.edit("s1", repo, "patch", {
            "mode": "replace", "path": FILE, "old_string": "    timeout = 5\n",
            "new_string": '    timeout = config.get("timeout", 5)\n'})
        assert res["success"] is True

        # 2. main: a V4A patch over two files, then the assistant shows the diff it applied.
        h.session("s2", repo, branch="main")
        agent.ask("s2", "add retries to fetch, and a retry helper module")
        ids["s2"], res = agent.edit("s2", repo, "patch", {"mode": "patch", "patch": (
            "*** Begin Patch\n"
            f"*** Update File: {FILE}\n"
            "@@ def fetch(query, timeout): @@\n"
            "-def fetch(query, timeout):\n"
            '-    return {"query": query, "timeout": timeout}\n'
            "+def fetch(query, timeout, retries=3):\n"
            "+    for _ in range(retries):\n"
            '+        return {"query": query, "timeout": timeout}\n'
            "*** Add File: src/app/retry.py\n"
            "+def backoff(attempt):\n"
            "+    return 2 ** attempt\n"
            "*** End Patch")})
        assert res["success"] is True, res
        assert "retries=3" in (repo / FILE).read_text()
        agent.reply("s2", "Done:\n```diff\n"
                    f"diff --git a/{FILE} b/{FILE}\n--- a/{FILE}\n+++ b/{FILE}\n"
                    "@@ -9,2 +9,3 @@\n"
                    "-def fetch(query, timeout):\n"
                    '-    return {"query": query, "timeout": timeout}\n'
                    "+def fetch(query, timeout, retries=3):\n"
                    "+    for _ in range(retries):\n"
                    '+        return {"query": query, "timeout": timeout}\n'
                    "```\nAnd the README could say more:\n```diff\n"
                    "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n"
                    "@@ -1 +1,2 @@\n demo\n+Retries: 3 by default.\n```")

        # 3. the linked worktree, branch not recorded by Hermes (probed): a whole-file rewrite.
        h.session("s3", wt)
        agent.ask("s3", "rewrite search.py around a Client class")
        ids["s3"], res = agent.edit("s3", wt, "write_file", {"path": FILE, "content": CLIENT})
        assert "error" not in res and (wt / FILE).read_text() == CLIENT

        # 4. main: a failed patch (dropped), a failed write (dropped), then a good rewrite.
        h.session("s4", repo, branch="main")
        agent.ask("s4", "handle empty queries")
        ids["s4-failed"], res = agent.edit("s4", repo, "patch", {
            "mode": "replace", "path": FILE, "old_string": "if query is None:", "new_string": "if not query:"})
        assert res["success"] is False
        _, res = agent.edit("s4", repo, "write_file", {"path": f"{FILE}/nested.py", "content": "x = 1\n"})
        assert res.get("error")
        _, res = agent.edit("s4", repo, "patch", {"mode": "patch", "patch": (
            f"*** Begin Patch\n*** Update File: {FILE}\n@@ def search @@\n-    timeout = 99\n+    timeout = 1\n"
            "*** End Patch")})
        assert res["success"] is False
        ids["s4"], res = agent.edit("s4", repo, "write_file", {"path": FILE, "content": REWRITE_MAIN})
        assert "error" not in res

        # 5. branch unknown (its folder is gone, Hermes recorded the repo but no branch).
        h.session("s5", repo / "gone-subdir", repo_root=str(repo))
        agent.ask("s5", "lower the default timeout to 3")
        ids["s5"], res = agent.edit("s5", repo, "patch", {
            "mode": "replace", "path": str(repo / FILE), "old_string": 'config.get("timeout", 5)',
            "new_string": 'config.get("timeout", 3)'})
        assert res["success"] is True

        # 6. the worktree again: a replace, then a whole-file write whose base the chain knows.
        h.session("s6", wt)
        agent.ask("s6", "strip the query before searching")
        ids["s6"], res = agent.edit("s6", wt, "write_file", {"path": FILE, "content": CLIENT_V2})
        assert "error" not in res

        # Another project with the same file layout: never part of this chain.
        h.session("o1", other, branch="main")
        agent.ask("o1", "make the timeout configurable here too")
        agent.edit("o1", other, "patch", {"mode": "replace", "path": FILE, "old_string": "    timeout = 5\n",
                                          "new_string": "    timeout = 7\n"})
        h.session("ask", repo, branch="main")
        h.session("ask-other", other, branch="main")
        recall = h.recall()
        recall.refresh()
        yield {"h": h, "repo": repo, "wt": wt, "other": other, "recall": recall, "ids": ids}
        h.close()


def history(world, path=FILE, **kwargs):
    return world["recall"].code_history(path, session_id="ask", **kwargs)


def sessions_of(result):
    assert result["success"], result
    return [r["session_id"] for r in result["rounds"]]


def test_rounds_in_order_with_the_right_sessions_and_words(world):
    result = history(world)
    assert result["path"] == FILE
    assert sessions_of(result) == ["s1", "s2", "s3", "s4", "s5", "s6"]
    said = [r["said"] for r in result["rounds"]]
    assert said[0] == "make the timeout configurable"
    assert said[1] == "add retries to fetch, and a retry helper module"
    assert said[4] == "lower the default timeout to 3"
    first = result["rounds"][0]
    assert first["link"] == "@session:s1" and first["message_id"] == world["ids"]["s1"]
    assert first["symbol"] == "search" and first["form"] == "replace"
    assert '+    timeout = config.get("timeout", 5)' in first["patch"]
    assert first["patch"].startswith(f"--- a/{FILE}\n+++ b/{FILE}\n@@ -")  # Hermes's own diff, relabelled
    assert result["rounds"][1]["symbol"] == "fetch" and result["rounds"][1]["form"] == "v4a"
    assert [r["when"] for r in result["rounds"]] == sorted(r["when"] for r in result["rounds"])


def test_failed_edits_are_dropped(world):
    result = history(world)
    s4 = [r for r in result["rounds"] if r["session_id"] == "s4"]
    assert len(s4) == 1 and s4[0]["form"] == "write"
    assert s4[0]["message_id"] == world["ids"]["s4"]
    assert not any("nested.py" in r["patch"] or "timeout = 99" in r["patch"] for r in result["rounds"])
    conn = world["recall"].index.connect_readonly()
    try:
        assert conn.execute("SELECT COUNT(*) FROM edits WHERE message_id = ?",
                            (world["ids"]["s4-failed"],)).fetchone()[0] == 0
    finally:
        conn.close()


def test_branch_scope_keeps_unknown_branches(world):
    assert sessions_of(history(world, branch="main")) == ["s1", "s2", "s4", "s5"]
    assert sessions_of(history(world, branch="feature-x")) == ["s3", "s5", "s6"]
    rounds = history(world)["rounds"]
    assert [r["branch"] for r in rounds] == ["main", "main", "feature-x", "main", None, "feature-x"]


def test_worktree_paths_are_relative_to_their_checkout(world):
    conn = world["recall"].index.connect_readonly()
    try:
        rows = conn.execute("SELECT session_id, path, abs_path FROM edits WHERE session_id IN ('s3', 's6')").fetchall()
    finally:
        conn.close()
    assert {r["path"] for r in rows} == {FILE}
    assert all(Path(r["abs_path"]) == world["wt"] / FILE for r in rows)


def test_still_in_file_follows_the_disk(world):
    # Latest round overall is the worktree's write; on main it is s5's replace.
    assert history(world)["rounds"][-1]["still_in_file"] is True
    main = history(world, branch="main")
    assert main["rounds"][-1]["session_id"] == "s5" and main["rounds"][-1]["still_in_file"] is True
    assert all("still_in_file" not in r for r in main["rounds"][:-1])
    target = world["repo"] / FILE
    kept = target.read_text()
    try:
        target.write_text(kept.replace('config.get("timeout", 3)', 'config.get("timeout", 30)'))
        assert history(world, branch="main")["rounds"][-1]["still_in_file"] is False
        target.unlink()
        assert history(world, branch="main")["rounds"][-1]["still_in_file"] is None
    finally:
        target.write_text(kept)


def test_a_write_after_a_known_version_gets_a_real_diff(world):
    rounds = {r["session_id"]: r for r in history(world)["rounds"]}
    # s3's base was never recorded; s6's base is s3's content (same branch).
    assert "(previous content unknown)" in rounds["s3"]["patch"]
    assert "(previous recorded version)" in rounds["s6"]["patch"]
    changed = [line for line in rounds["s6"]["patch"].splitlines()
               if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert changed == ['-        return {"query": query, "timeout": self.timeout}',
                       '+        return {"query": query.strip(), "timeout": self.timeout}']
    assert rounds["s6"]["symbol"] == "Client.search"


def test_quoted_diffs_add_only_what_no_tool_recorded(world):
    assert len([r for r in history(world)["rounds"] if r["session_id"] == "s2"]) == 1  # shown diff deduplicated
    readme = history(world, "README.md")
    assert sessions_of(readme) == ["s2"] and readme["rounds"][0]["form"] == "diff"
    assert "+Retries: 3 by default." in readme["rounds"][0]["patch"]


def test_other_projects_never_leak(world):
    assert "o1" not in sessions_of(history(world))
    other = world["recall"].code_history(FILE, session_id="ask-other")
    assert sessions_of(other) == ["o1"]
    assert sessions_of(world["recall"].code_history(FILE, session_id="ask-other", branch="feature-x")) == []


def test_path_fragments_symbols_and_queries(world):
    assert history(world, "search.py")["path"] == FILE
    assert history(world, "app/search.py")["path"] == FILE
    assert history(world, str(world["repo"] / FILE))["path"] == FILE
    assert sessions_of(history(world, "retry.py")) == ["s2"]
    folder = history(world, "src/app")
    assert folder["rounds"] == [] and folder["candidates"] == ["src/app/retry.py", FILE]
    assert history(world, "nothing.py")["rounds"] == []
    # s4 rewrote the whole file (previous version unknown), and that file defines fetch.
    assert sessions_of(history(world, symbol="fetch")) == ["s2", "s4"]
    assert "s1" in sessions_of(history(world, symbol="search"))
    assert sessions_of(history(world, query="retries")) == ["s2", "s4"]
    assert sessions_of(history(world, limit=2)) == ["s5", "s6"]


def test_budget_trims_patches(world):
    result = history(world, budget_chars=300)
    assert all(len(r["patch"]) <= 340 for r in result["rounds"])
    assert any(r.get("truncated") for r in result["rounds"])


def test_chain_summary_for_search_hits(world):
    conn = world["recall"].index.connect_readonly()
    try:
        workspace = world["recall"].workspace
        resolver = workspace.resolver()
        scope = compute_scope(conn, resolver, workspace.asker(conn, resolver, "ask", None).identity, "ask")
        summary = chain_summary(conn, "s1", world["ids"]["s1"], scope_session_ids=scope.session_ids)
        assert summary is not None
        assert summary["file"] == FILE and summary["rounds"] == 6 and summary["this_round"] == 1
        assert summary["last_change"]["link"] == "@session:s6"
        assert chain_summary(conn, "s1", world["ids"]["s1-ask"], scope_session_ids=scope.session_ids) == summary
        assert chain_summary(conn, "s1", None) is None
        assert chain_summary(conn, "ask", 1) is None
        unscoped = chain_summary(conn, "s1", world["ids"]["s1"])  # falls back to the same repo root
        assert unscoped is not None and unscoped["rounds"] == 6
    finally:
        conn.close()


def test_library_function_takes_any_scope(world):
    conn = world["recall"].index.connect_readonly()
    try:
        result = code_history(conn, ["s3", "s6"], "search.py")
        assert sessions_of(result) == ["s3", "s6"]
        assert code_history(conn, [], "search.py")["rounds"] == []
    finally:
        conn.close()


# -- incremental ----------------------------------------------------------------


@pytest.fixture
def small(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "hermes-tools"))
    repo = git_init(tmp_path / "repo")
    commit(repo, {FILE: ORIGINAL}, "search client")
    h = History(tmp_path / "hermes")
    agent = Agent(h, monkeypatch)
    h.session("a", repo, branch="main")
    agent.ask("a", "make the timeout configurable")
    agent.edit("a", repo, "patch", {"mode": "replace", "path": FILE, "old_string": "timeout = 5",
                                    "new_string": "timeout = config.timeout"})
    h.session("ask", repo, branch="main")
    yield h, agent, repo
    h.close()


def test_chain_follows_new_messages_rewinds_and_deletions(small):
    h, agent, repo = small
    recall = h.recall()
    assert sessions_of(recall.code_history(FILE, session_id="ask")) == ["a"]
    h.session("b", repo, branch="main")
    asked = agent.ask("b", "rename fetch")
    agent.edit("b", repo, "patch", {"mode": "replace", "path": FILE, "old_string": "def fetch(",
                                    "new_string": "def fetch_one("})
    assert sessions_of(recall.code_history(FILE, session_id="ask")) == ["a", "b"]
    h.db.rewind_to_message("b", asked)
    assert sessions_of(recall.code_history(FILE, session_id="ask")) == ["a"]
    h.db.delete_session("a")
    assert sessions_of(recall.code_history(FILE, session_id="ask")) == []


def test_force_rebuild_gives_the_same_chain(small):
    h, _, _ = small
    recall = h.recall()
    before = recall.code_history(FILE, session_id="ask")
    recall.refresh(force=True)
    assert recall.code_history(FILE, session_id="ask") == before


def _edit_rows(recall):
    conn = recall.index.connect_readonly()
    try:
        return conn.execute("SELECT session_id, message_id, seq, timestamp, path, abs_path, form, old_text, "
                            "new_text, raw, said, said_message_id FROM edits "
                            "ORDER BY session_id, message_id, seq").fetchall()
    finally:
        conn.close()


def test_the_chain_from_the_keyword_batches_is_the_chain_read_again_and_each_session_is_read_once(
        world, monkeypatch):
    """A build hands each keyword batch's messages to the edit phase; ``--force`` extracts the
    edits after the keyword phase, reading the sessions again: the same rows either way. And
    the build reads each session's messages once."""
    from project_history_recall.sources.hermes import HermesReader

    fresh = world["h"].recall()
    fresh.index.move_aside("rebuilt-by-test")
    reads: dict[str, int] = {}
    real = HermesReader.messages

    def counted(self, session_id):
        reads[session_id] = reads.get(session_id, 0) + 1
        return real(self, session_id)

    monkeypatch.setattr(HermesReader, "messages", counted)
    report = fresh.refresh()
    assert report.sessions_updated == 9 and report.phases["edits"]["sessions"] == 9
    assert reads and set(reads.values()) == {1}
    built = _edit_rows(fresh)
    assert {row["session_id"] for row in built} >= {"s1", "s2", "s3", "s4", "s5", "s6", "o1"}
    reads.clear()
    fresh.refresh(force=True)
    assert reads.get("s1") == 2  # read for the keyword phase, then again for the edit phase
    assert _edit_rows(fresh) == built


def test_a_phase_that_fails_on_a_batch_does_not_stop_the_keyword_phase(small, monkeypatch, caplog):
    """The batches after the one the edit phase failed on are still indexed for keyword search
    (the failure is logged); the edit phase after the keyword phase raises the failure, and the
    next refresh completes it."""
    from project_history_recall.index import indexer
    from project_history_recall.index.edit_phase import EditPhase

    h, _, repo = small
    h.session("later", repo, "the aardvark question", branch="main")
    recall = h.recall()

    def broken(self, *args, **kwargs):
        raise RuntimeError("the edit phase was interrupted")

    with monkeypatch.context() as patched:
        patched.setattr(indexer, "BATCH_SESSIONS", 1)
        patched.setattr(EditPhase, "_write", broken)
        with pytest.raises(RuntimeError):
            recall.refresh()
    assert "index phase edits failed on a batch" in caplog.text
    assert "the edit phase was interrupted" in caplog.text
    conn = recall.index.connect_readonly()
    try:
        keyword = [r[0] for r in conn.execute("SELECT DISTINCT session_id FROM entries WHERE text LIKE '%aardvark%'")]
        assert keyword == ["later"] and conn.execute("SELECT COUNT(*) FROM edits").fetchone()[0] == 0
    finally:
        conn.close()
    report = recall.refresh()
    assert report.sessions_updated == 0 and report.phases["edits"]["sessions"] >= 1
    assert sessions_of(recall.code_history(FILE, session_id="ask")) == ["a"]


def test_an_index_from_before_the_chain_is_backfilled(small):
    h, _, _ = small
    recall = h.recall()
    Indexer(recall.index, recall.workspace.source).refresh()  # a plugin from before the chain: no extension
    conn = recall.index.connect()
    try:
        assert conn.execute("SELECT COUNT(*) FROM edits").fetchone()[0] == 0
        # As if written by a plugin one schema older: undo V3, then reopen to migrate again.
        conn.execute("DROP TABLE edits")
        conn.execute("PRAGMA user_version = 2")
    finally:
        conn.close()
    Index(recall.index.data_dir).connect().close()
    assert sessions_of(h.recall().code_history(FILE, session_id="ask")) == ["a"]


def test_home_sessions_get_no_history(small):
    h, _, _ = small
    h.session("home", None)
    result = h.recall().code_history(FILE, session_id="home")
    assert result["rounds"] == [] and result["project"] == {"kind": "home"}


def test_a_check_that_finds_the_index_as_it_left_it_runs_no_phase_but_another_writers_gap_is_filled(
        small, monkeypatch):
    """The check after a commit to state.db that changes no session runs no phase (what a phase
    does is decided by the index, and nobody changed it since this process's last complete
    refresh); when another writer committed a keyword phase without its edit phase, this
    process's next check runs the edit phase although its own keyword phase writes nothing."""
    import sqlite3

    from project_history_recall.index.edit_phase import EditPhase

    h, agent, repo = small
    mine, other = h.recall(), h.recall()

    def side_commit():
        with sqlite3.connect(h.root / "state.db") as side:
            side.execute("CREATE TABLE IF NOT EXISTS side_note (x)")
            side.execute("INSERT INTO side_note VALUES (1)")

    assert "edits" in mine.refresh().phases  # the build, which wrote: its phases ran to the end
    for _ in range(2):
        side_commit()
        report = mine.refresh()
        assert report.compared and not report.changed and report.phases == {}

    h.session("b", repo, branch="main")
    agent.ask("b", "rename fetch")
    agent.edit("b", repo, "patch", {"mode": "replace", "path": FILE, "old_string": "def fetch(",
                                    "new_string": "def fetch_one("})

    def broken(self, *args, **kwargs):
        raise RuntimeError("the other writer's edit phase was interrupted")

    with monkeypatch.context() as patched:
        patched.setattr(EditPhase, "_write", broken)
        with pytest.raises(RuntimeError):
            other.refresh()
    report = mine.refresh()
    assert report.sessions_updated == 0 and report.phases["edits"]["sessions"] >= 1
    assert sessions_of(mine.code_history(FILE, session_id="ask")) == ["a", "b"]


def test_cli_style_question_from_a_folder(small):
    h, _, repo = small
    result = h.recall().code_history("search.py", session_id=None, cwd=str(repo / "src"))
    assert sessions_of(result) == ["a"]


def test_bad_arguments_are_refused(small):
    h, _, _ = small
    recall = h.recall()
    for bad in ({"path": ""}, {"path": 3}, {"path": FILE, "limit": "many"}, {"path": FILE, "branch": 7}):
        with pytest.raises(RecallError) as caught:
            recall.code_history(bad.pop("path"), session_id="ask", **bad)
        assert caught.value.code == "bad_argument"


def test_the_edit_chain_is_its_own_phase_after_the_keyword_commit(small, monkeypatch):
    """The keyword index is committed before the edit phase starts: a failing edit phase
    leaves keyword search whole, and the next refresh resumes the chain where it stopped."""
    from project_history_recall.index.edit_phase import EditPhase

    h, _, _ = small
    recall = h.recall()

    def broken(self, *args, **kwargs):
        raise RuntimeError("the edit phase was interrupted")

    monkeypatch.setattr(EditPhase, "_write", broken)
    with pytest.raises(RuntimeError):
        recall.refresh()
    conn = recall.index.connect_readonly()
    try:
        keyword = [r[0] for r in conn.execute(
            "SELECT DISTINCT session_id FROM entries WHERE text LIKE '%configurable%'")]
        assert keyword == ["a"] and conn.execute("SELECT COUNT(*) FROM edits").fetchone()[0] == 0
    finally:
        conn.close()
    monkeypatch.undo()
    report = recall.refresh()
    assert report.phases["edits"]["sessions"] >= 1 and report.sessions_updated == 0
    assert sessions_of(recall.code_history(FILE, session_id="ask")) == ["a"]
    assert recall.refresh(force=True).phases["edits"]["sessions"] == 2
    assert sessions_of(recall.code_history(FILE, session_id="ask")) == ["a"]


def test_the_check_after_a_turn_leaves_the_edit_chain_to_its_batches(small, monkeypatch):
    """A process that ran every phase to the end, then sees one session change (a Hermes
    turn), extracts that session's edits from the keyword phase's batch and does not have the
    edit phase look over the whole index again."""
    from project_history_recall.index.edit_phase import EditPhase

    h, agent, repo = small
    recall = h.recall()
    recall.refresh()
    agent.ask("a", "also rename fetch")
    agent.edit("a", repo, "patch", {"mode": "replace", "path": FILE, "old_string": "def fetch(",
                                    "new_string": "def fetch_one("})

    def whole_run(self, *args, **kwargs):
        raise AssertionError("the edit phase looked over the whole index after one turn")

    monkeypatch.setattr(EditPhase, "run", whole_run)
    report = recall.refresh()
    assert report.sessions_updated == 1 and report.phases["edits"]["sessions"] == 1
    assert len(recall.code_history(FILE, session_id="ask")["rounds"]) == 2


def test_a_session_removed_in_a_long_lived_process_leaves_no_edit_rows(small):
    """The sweep of the edit chain runs when sessions leave the index, not after every write:
    a deleted session's edits are gone from the index file, not only hidden."""
    import sqlite3

    h, _, _ = small
    recall = h.recall()
    recall.refresh()
    h.db.delete_session("a")
    recall.refresh()
    conn = sqlite3.connect(recall.workspace.index.path)
    try:
        assert conn.execute("SELECT COUNT(*) FROM edits WHERE session_id = 'a'").fetchone()[0] == 0
        assert conn.execute("SELECT COUNT(*) FROM edit_state WHERE session_id = 'a'").fetchone()[0] == 0
    finally:
        conn.close()
