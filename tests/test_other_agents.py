"""Claude Code's and Codex CLI's histories (issue 16 items 1 and 3), from real-shaped
transcript files: found per project like Hermes sessions, their edits in the chain, read
incrementally and never written."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from agent_transcripts import Claude, Codex
from builders import History, add_worktree, git_init
from project_history_recall.faces.cli import main
from project_history_recall.sources import transcripts

ALPHA_UUID = "0b6a1c52-1111-4a5e-9c1e-aaaaaaaaaaaa"
TREE_UUID = "0b6a1c52-2222-4a5e-9c1e-bbbbbbbbbbbb"
BETA_UUID = "0b6a1c52-3333-4a5e-9c1e-cccccccccccc"
CODEX_UUID = "7f3e9d10-4444-4b6f-8d2a-dddddddddddd"


def phr(*args: str) -> dict:
    result = CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def folder_digest(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file():
            stat = path.stat()
            h.update(f"{path}:{stat.st_mtime_ns}:{stat.st_size}".encode())
            h.update(path.read_bytes())
    return h.hexdigest()


@pytest.fixture
def world(tmp_path, monkeypatch):
    """Two repos (alpha with a linked worktree, beta), a Hermes home, Claude Code sessions in
    alpha (one from the worktree, one errored Edit, a subagent, a line still being written) and
    in beta, and a Codex rollout that starts in beta and moves to alpha."""
    claude_dir, codex_dir = tmp_path / "claude", tmp_path / "codex"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude_dir))
    monkeypatch.setenv("CODEX_HOME", str(codex_dir))
    alpha, beta = git_init(tmp_path / "alpha"), git_init(tmp_path / "beta")
    tree = add_worktree(alpha, tmp_path / "alpha-feature", "feature")
    h = History(tmp_path / "hermes")
    h.session("h-alpha", alpha, "the wombat cache in hermes", "noted")

    a = Claude(claude_dir, ALPHA_UUID, alpha)
    a.summary("Wombat parser fixes")
    a.user("please fix the wombat parser in parse.py")
    a.say("I will edit the wombat parser", thinking="private musing about numbats")
    a.tool("t1", "Write", {"file_path": str(alpha / "parse.py"), "content": "def parse():\n    return 1\n"})
    a.tool("t2", "Edit", {"file_path": str(alpha / "parse.py"), "old_string": "return 1", "new_string": "return 2",
                          "replace_all": False})
    a.tool("t3", "Edit", {"file_path": str(alpha / "parse.py"), "old_string": "no such text",
                          "new_string": "return 99"}, "<tool_use_error>String to replace not found</tool_use_error>",
           error=True)
    a.tool("t4", "MultiEdit", {"file_path": str(alpha / "parse.py"), "edits": [
        {"old_string": "def parse():", "new_string": "def parse(text):"},
        {"old_string": "return 2", "new_string": "return len(text)"}]})
    a.line({"type": "file-history-snapshot", "messageId": "m", "snapshot": {}})
    a.line({"type": "mystery-kind", "x": 1})
    a.line({"type": "user", "message": "not a dict", "sessionId": ALPHA_UUID})
    a.path.open("a").write("{this is not json\n")
    a.line({"type": "user", "sessionId": ALPHA_UUID, "cwd": str(alpha), "timestamp": "2026-03-01T10:00:00Z",
            "message": {"role": "user", "content": "half written wombat line"}}, newline=False)
    # cut the last line in half, as a live writer leaves it
    text = a.path.read_text()
    a.path.write_text(text[: text.rindex("{") + 30])

    side = Claude(claude_dir, "x", alpha, sidechain_of=ALPHA_UUID, agent="agent-5f2c")
    side.user("subagent: search for wombat callers")
    side.say("found wombat callers in cli.py")

    t = Claude(claude_dir, TREE_UUID, tree, branch="feature")
    t.user("wombat tweak on the feature worktree")
    t.say("done")

    b = Claude(claude_dir, BETA_UUID, beta)
    b.user("the wombat secret in beta")
    b.say("rotated")

    c = Codex(codex_dir, CODEX_UUID, beta, branch="dev")
    c.meta()
    c.user("rename the wombat helper in beta")
    c.say("renaming wombat")
    c.patch("c1", "*** Begin Patch\n*** Update File: helper.py\n@@\n-def old():\n+def wombat():\n*** End Patch\n")
    # Older Codex ran the patch through its shell tool.
    c.line("response_item", {"type": "function_call", "name": "shell", "call_id": "c0", "arguments": json.dumps(
        {"command": ["apply_patch", "*** Begin Patch\n*** Update File: other.py\n@@\n-a = 1\n+a = 2\n*** End Patch\n"],
         "workdir": str(beta)})})
    c.line("response_item", {"type": "function_call_output", "call_id": "c0", "output": json.dumps(
        {"output": "Success. Updated the following files:\nM other.py\n", "metadata": {"exit_code": 0}})})
    c.turn(alpha)
    c.user("now the wombat docs in alpha")
    c.patch("c2", "*** Begin Patch\n*** Add File: docs/wombat.md\n+# Wombat\n*** End Patch\n")
    c.patch("c3", "*** Begin Patch\n*** Update File: nothing.py\n@@\n-x\n+y\n*** End Patch\n", exit_code=1)
    h.close()
    return {"home": str(h.root), "alpha": alpha, "beta": beta, "tree": tree, "claude": a, "side": side,
            "tree_session": t, "beta_claude": b, "codex": c, "claude_dir": claude_dir, "codex_dir": codex_dir}


def search(world: dict, where: Path, query: str = "wombat") -> dict:
    return phr("--home", world["home"], "search", query, "--cwd", str(where), "--mode", "keyword", "--limit", "20")


def test_phr_search_finds_claude_code_and_codex_sessions_of_the_asking_project_only(world):
    codex_id = world["codex"].session_id
    alpha = search(world, world["alpha"])
    found = {r["session_id"]: r["source"] for r in alpha["results"]}
    assert found == {"h-alpha": "hermes", world["claude"].session_id: "claude-code",
                     world["tree_session"].session_id: "claude-code", f"codex-seg2@{CODEX_UUID}": "codex"}
    assert all(r["link"] == f"@session:{r['session_id']}" for r in alpha["results"])
    beta = search(world, world["beta"])
    assert {r["session_id"]: r["source"] for r in beta["results"]} == {
        world["beta_claude"].session_id: "claude-code", codex_id: "codex"}
    # Thinking, reasoning and Codex's injected context are never indexed; nor a half-written line.
    for query in ("numbats", "hidden", "environment_context", "half written"):
        assert search(world, world["alpha"], query)["results"] == []
        assert search(world, world["beta"], query)["results"] == []


def test_links_resolve_by_unique_prefix_and_show_their_source(world):
    phr("--home", world["home"], "index")
    opened = phr("--home", world["home"], "session", "@session:claude-0b6a1c52-1111")
    assert opened["session"]["session_id"] == world["claude"].session_id
    assert opened["session"]["source"] == "claude-code"
    assert opened["session"]["title"] == "Wombat parser fixes"
    assert opened["session"]["branch"] == "main"
    codex = phr("--home", world["home"], "session", "codex-7f3e")
    assert codex["session"]["session_id"] == world["codex"].session_id
    later = phr("--home", world["home"], "session", "codex-seg2")
    assert later["session"]["session_id"] == f"codex-seg2@{CODEX_UUID}"


def test_code_history_shows_claude_code_rounds_oldest_first_without_the_errored_edit(world):
    history = phr("--home", world["home"], "code-history", "parse.py", "--cwd", str(world["alpha"]))
    rounds = history["rounds"]
    assert [r["form"] for r in rounds] == ["write", "replace", "replace", "replace"]
    assert all(r["session_id"] == world["claude"].session_id for r in rounds)
    patches = "\n".join(r["patch"] for r in rounds)
    assert "+return 2" in patches and "+def parse(text):" in patches and "return len(text)" in patches
    assert "return 99" not in patches
    assert rounds[0]["said"].startswith("please fix the wombat parser")


def test_codex_apply_patch_edits_are_attributed_by_the_cwd_in_force(world):
    docs = phr("--home", world["home"], "code-history", "docs/wombat.md", "--cwd", str(world["alpha"]))
    assert [(r["form"], r["session_id"]) for r in docs["rounds"]] == [("add", f"codex-seg2@{CODEX_UUID}")]
    helper = phr("--home", world["home"], "code-history", "helper.py", "--cwd", str(world["beta"]))
    assert [(r["form"], r["session_id"]) for r in helper["rounds"]] == [("v4a", world["codex"].session_id)]
    assert "+def wombat():" in helper["rounds"][0]["patch"]
    shell = phr("--home", world["home"], "code-history", "other.py", "--cwd", str(world["beta"]))
    assert [(r["form"], r["session_id"]) for r in shell["rounds"]] == [("v4a", world["codex"].session_id)]
    assert phr("--home", world["home"], "code-history", "helper.py", "--cwd", str(world["alpha"]))["rounds"] == []
    failed = phr("--home", world["home"], "code-history", "nothing.py", "--cwd", str(world["alpha"]))
    assert failed["rounds"] == []


def test_a_subagent_transcript_is_a_hidden_child_of_its_session(world):
    phr("--home", world["home"], "index")
    opened = phr("--home", world["home"], "session", world["side"].session_id)
    assert opened["session"]["source"] == "claude-code"
    import sqlite3

    conn = sqlite3.connect(Path(world["home"]) / "plugins" / "project-history-recall" / "index.db")
    row = conn.execute("SELECT parent_session_id, hidden FROM sessions WHERE id = ?",
                       (world["side"].session_id,)).fetchone()
    conn.close()
    assert row == (world["claude"].session_id, 1)
    assert world["side"].session_id not in {r["session_id"] for r in search(world, world["alpha"])["results"]}


def test_status_reports_each_source_with_what_was_skipped(world):
    phr("--home", world["home"], "index")
    status = phr("--home", world["home"], "status", "--cwd", str(world["alpha"]))
    sources = status["sources"]
    assert set(sources) == {"hermes", "claude-code", "codex"}
    claude = sources["claude-code"]
    assert claude["exists"] is True and claude["files"] == 4
    assert claude["skipped"] == {"unknown_type": 1, "malformed": 2, "partial": 1}
    assert sources["codex"]["files"] == 1 and sources["codex"]["skipped"] == {}


def test_the_truncated_line_is_read_once_it_is_whole_and_appends_cost_one_line(world):
    a: Claude = world["claude"]
    assert search(world, world["alpha"], "kookaburra")["results"] == []
    text = a.path.read_text()
    a.path.write_text(text[: text.rindex("\n") + 1])  # the writer finishes its line
    a.line({"type": "user", "sessionId": ALPHA_UUID, "cwd": str(a.cwd), "timestamp": "2026-03-01T10:00:00Z",
            "message": {"role": "user", "content": "the kookaburra line, now whole"}})
    before = transcripts.lines_parsed.get("claude-code", 0)
    assert [r["session_id"] for r in search(world, world["alpha"], "kookaburra")["results"]] == [a.session_id]
    assert transcripts.lines_parsed["claude-code"] - before == 1


def test_appending_one_line_to_a_10_mb_transcript_reads_that_line_only(world):
    a: Claude = world["claude"]
    filler = "lorem ipsum dolor " * 60
    while a.path.stat().st_size < 10 * 1024 * 1024:
        with a.path.open("a") as handle:
            for i in range(2000):
                handle.write(json.dumps({"type": "assistant", "sessionId": ALPHA_UUID, "cwd": str(a.cwd),
                                         "timestamp": "2026-03-01T11:00:00Z",
                                         "message": {"role": "assistant", "content": [
                                             {"type": "text", "text": f"{filler} {i}"}]}}) + "\n")
    phr("--home", world["home"], "index")
    before = transcripts.lines_parsed.get("claude-code", 0)
    a.user("an appended platypus question")
    assert [r["session_id"] for r in search(world, world["alpha"], "platypus")["results"]] == [a.session_id]
    assert transcripts.lines_parsed["claude-code"] - before == 1
    # Nothing changed: nothing is parsed.
    search(world, world["alpha"], "platypus")
    assert transcripts.lines_parsed["claude-code"] - before == 1


def test_a_rewritten_transcript_is_read_again_from_its_start(world):
    b: Claude = world["beta_claude"]
    assert search(world, world["beta"], "rotated")["results"]
    b.path.unlink()
    b2 = Claude(world["claude_dir"], BETA_UUID, world["beta"])
    b2.user("only an echidna now")
    assert search(world, world["beta"], "rotated")["results"] == []
    assert [r["session_id"] for r in search(world, world["beta"], "echidna")["results"]] == [b.session_id]


def test_nothing_in_the_agents_folders_is_ever_written(world):
    before = folder_digest(world["claude_dir"]), folder_digest(world["codex_dir"])
    phr("--home", world["home"], "index", "--force")
    search(world, world["alpha"])
    phr("--home", world["home"], "forget", world["tree_session"].session_id)
    phr("--home", world["home"], "status")
    assert (folder_digest(world["claude_dir"]), folder_digest(world["codex_dir"])) == before


def test_forget_and_exclude_withhold_other_agents_sessions(world):
    tree_id = world["tree_session"].session_id
    phr("--home", world["home"], "forget", tree_id)
    found = {r["session_id"] for r in search(world, world["alpha"])["results"]}
    assert tree_id not in found and world["claude"].session_id in found
    import sqlite3

    db = Path(world["home"]) / "plugins" / "project-history-recall" / "index.db"
    conn = sqlite3.connect(db)
    try:  # nothing of it is kept in the parse either
        assert conn.execute("SELECT COUNT(*) FROM file_messages WHERE session_id = ?", (tree_id,)).fetchone() == (0,)
    finally:
        conn.close()
    phr("--home", world["home"], "exclude", "--path", str(world["beta"]))
    assert search(world, world["beta"])["results"] == []
    phr("--home", world["home"], "forget", tree_id, "--undo")
    assert tree_id in {r["session_id"] for r in search(world, world["alpha"])["results"]}


def test_private_spans_in_a_transcript_are_never_indexed(world):
    a: Claude = world["claude"]
    text = a.path.read_text()
    a.path.write_text(text[: text.rindex("\n") + 1])
    a.user("the deploy token is <private>hunter2-wombat</private> keep it")
    assert search(world, world["alpha"], "hunter2")["results"] == []
    assert search(world, world["alpha"], "deploy token")["results"]


def test_moving_another_agents_session_gives_a_clear_error(world):
    from project_history_recall.errors import RecallError
    from project_history_recall.recall import Recall

    phr("--home", world["home"], "index")
    with pytest.raises(RecallError) as refused:
        Recall(Path(world["home"])).move_session(world["claude"].session_id, "")
    assert refused.value.code == "move_unsupported_source"


def test_config_sources_turns_agents_off(world):
    config = Path(world["home"]) / "config.yaml"
    config.write_text(yaml.safe_dump({"plugins": {"entries": {"project-history-recall": {"sources": ["hermes"]}}}}))
    assert {r["source"] for r in search(world, world["alpha"])["results"]} == {"hermes"}
    assert set(phr("--home", world["home"], "status")["sources"]) == {"hermes"}


def test_only_other_agents_without_hermes(world, tmp_path):
    """No Hermes database at all: the other agents' histories still answer."""
    home = tmp_path / "bare-hermes"
    home.mkdir()
    result = phr("--home", str(home), "search", "wombat", "--cwd", str(world["beta"]), "--mode", "keyword")
    assert {r["source"] for r in result["results"]} == {"claude-code", "codex"}
    assert os.listdir(world["codex_dir"]) == ["sessions"]


def test_chinese_hybrid_consent_and_redaction_apply_to_transcripts(world):
    """The CJK tokenizer finds a Claude Code session by a Chinese phrase; nothing of it leaves for a
    remote embedding server before consent, and after consent its secrets are redacted."""
    from fakes.embedding_server import FakeEmbeddingServer
    from project_history_recall.recall import Recall

    a: Claude = world["claude"]
    text = a.path.read_text()
    a.path.write_text(text[: text.rindex("\n") + 1])
    secret = "sk-" + "Q7x" * 16
    a.user(f"修复缓存失效的问题，密钥是 {secret}")
    home = Path(world["home"])
    with FakeEmbeddingServer(dim=8) as server:
        (home / "config.yaml").write_text(
            "plugins:\n  entries:\n    project-history-recall:\n      embedding:\n"
            f"        provider: openai\n        base_url: {server.base_url}\n        model: m\n"
            "        dimensions: 8\n        batch_size: 8\n        enabled: true\n")
        recall = Recall(home)
        found = recall.search("缓存失效", cwd=str(world["alpha"]), mode="hybrid")
        assert [r["session_id"] for r in found["results"]][:1] == [a.session_id]
        assert found["semantic_status"] == "consent_required"
        assert server.embedding_requests == []
        recall.consent(cwd=str(world["alpha"]))
        recall.embed()
        sent = [t for request in server.embedding_requests for t in request.inputs]
        assert any("修复缓存失效" in t for t in sent)
        assert not any(secret in t for t in sent)
        # Consent was for alpha: beta's Claude Code and Codex sessions never left.
        assert not any("rotated" in t or "rename the wombat helper" in t for t in sent)


def test_an_oversized_line_is_skipped_and_counted_and_the_next_one_read(world, monkeypatch):
    monkeypatch.setattr(transcripts, "MAX_LINE_BYTES", 4096)
    b: Claude = world["beta_claude"]
    b.user("a pasted log " + "x" * 10_000 + " bandicoot")
    b.user("after the log, a bilby")
    assert search(world, world["beta"], "bandicoot")["results"] == []
    assert [r["session_id"] for r in search(world, world["beta"], "bilby")["results"]] == [b.session_id]
    skipped = phr("--home", world["home"], "status")["sources"]["claude-code"]["skipped"]
    assert skipped["huge"] == 1


def test_hermes_projects_folders_attribute_other_agents_sessions(world):
    """With a Hermes project holding both repos, a Claude Code session in beta is in alpha's project."""
    h = History(Path(world["home"]))
    h.project("Both", world["alpha"], world["beta"])
    h.close()
    result = search(world, world["alpha"])
    assert result["project"]["kind"] == "explicit"
    assert world["beta_claude"].session_id in {r["session_id"] for r in result["results"]}
