"""Hostile and odd input (issue 6 §4): property-based tests over every tool's arguments and the
``/recall`` command, through Hermes's real registry and command table, plus the tokenizer and
the query builder against a real FTS5 table. The stress run repeats these with many more
examples and runs the coverage-guided fuzzer (``bench/stress/fuzz_tokenizer.py``).
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.stress import hostile  # noqa: E402 - needs the repo root on sys.path
from bench.stress.fake import embedding_server  # noqa: E402

from builders import register_plugin  # noqa: E402
from project_history_recall import tokenizer  # noqa: E402
from project_history_recall.faces.hermes.tools import SCHEMAS  # noqa: E402

EXAMPLES = 30
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def w(tmp_path_factory):
    with embedding_server() as server, pytest.MonkeyPatch.context() as mp:
        built = hostile.build_world(tmp_path_factory.mktemp("hostile") / "world", server.base_url)
        mp.setenv("HERMES_HOME", str(built.home))
        mp.delenv("HERMES_SESSION_ID", raising=False)
        register_plugin()
        yield built


def test_every_plugin_tool_is_covered(w):
    registered = set(hostile.plugin_tools())
    assert set(SCHEMAS) <= registered, registered
    assert {"project_history_search", "project_history", "project_history_index",
            "project_session_move"} <= registered


@pytest.mark.parametrize("tool", sorted(SCHEMAS))
def test_hostile_arguments_answer_json_in_time_and_in_scope(w, tool):
    stats = hostile.Stats()
    schema = hostile.plugin_tools()[tool].schema
    SETTINGS(given(args=hostile.tool_args(w, schema), asker=hostile.askers(w))(
        hostile.tool_property(w, tool, stats)))()
    assert stats.calls >= EXAMPLES


def test_hostile_recall_command_answers_text_in_time_and_in_scope(w):
    stats = hostile.Stats()

    @SETTINGS
    @given(raw=hostile.command_args(w), asker=st.sampled_from(w.askers))
    def prop(raw, asker):
        hostile.check_command(w, raw, asker, stats)

    prop()
    assert stats.calls >= EXAMPLES


@pytest.mark.parametrize(("asker", "expected"), [
    ("ask-a", {"a1", "a2", "l1"}), ("ask-b", {"b1", "b2"}), ("ask-r", {"r1", "r2", "w1"}), ("ask-f", {"f1"}),
    ("ask-s", {"s1"}), ("ask-h", set()), ("no-such-session", set()), ("../../etc/passwd", set()), ("%", set()),
])
def test_path_tricks_and_odd_folders_keep_their_scope(w, asker, expected):
    """The symlink into the repo stays Alpha's, the nested Billing is not Alpha's, ``repo-2`` is not
    ``repo``'s, the folder named with ``% _ \\`` and Chinese is its own, unknown askers see nothing."""
    stats = hostile.Stats()
    for query in ("ibex walrus", "%", "_", "\\", "广告", '"ibex" OR *'):
        reply = hostile.call_tool(w, "project_history_search", {"query": query, "mode": "keyword", "limit": 10},
                                  asker, stats)
        got = {r["session_id"] for r in reply["results"]}
        assert got <= expected
        if query == "ibex walrus":
            assert got == expected


FTS = sqlite3.connect(":memory:")
FTS.execute(f"CREATE VIRTUAL TABLE t USING fts5(tokens, tokenize=\"{tokenizer.FTS_TOKENIZE}\")")


@settings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(text=st.text(st.characters(codec="utf-8"), max_size=400) | st.sampled_from(hostile.FTS_TRICKS + hostile.UNICODE))
def test_tokenizer_and_query_plan_never_break_fts5(text):
    tokens = tokenizer.index_tokens(text)
    assert all(t and not any(c.isspace() for c in t) for t in tokens)
    plan = tokenizer.plan_query(text)
    if not plan.units:
        return
    FTS.execute("DELETE FROM t")
    FTS.execute("INSERT INTO t(rowid, tokens) VALUES (1, ?)", (tokenizer.index_text(text),))
    found = FTS.execute("SELECT rowid FROM t WHERE t MATCH ?", (plan.match_any(),)).fetchall()
    assert found == [(1,)], f"{text!r} does not find itself"


# Lone surrogates (a JSON '\\ud800' escape decodes to one) are scrubbed at the tool and command
# boundary and in the tokenizer: none may reach SQLite, OpenCC or an HTTP request.


@pytest.mark.parametrize(("tool", "args", "asker"), [
    ("project_history_search", {"query": "ibex \ud800", "mode": "hybrid"}, "ask-a"),
    ("project_history_search", {"query": "广告\udc80", "mode": "keyword"}, "ask-a"),
    ("project_history", {"operation": "session", "session_id": "\ud800"}, "ask-a"),
    ("project_history", {"operation": "timeline"}, "\udfff"),
])
def test_lone_surrogates_in_arguments_answer_cleanly(w, tool, args, asker):
    hostile.call_tool(w, tool, args, asker, hostile.Stats())


def test_lone_surrogates_in_the_command_answer_cleanly(w):
    hostile.check_command(w, "search 广告 \ud800", "ask-a", hostile.Stats())


def test_tokenizer_accepts_lone_surrogates():
    tokenizer.plan_query("广告\ud800")
    tokenizer.index_tokens("廣告\udc80")


def test_replies_stay_json_even_for_a_megabyte_query(w):
    stats = hostile.Stats()
    reply = hostile.call_tool(w, "project_history_search", {"query": "ibex " * 200_000, "mode": "hybrid"}, "ask-a",
                              stats)
    assert reply["success"] is True
    assert json.dumps(reply)


def test_the_fuzzer_without_atheris_runs_its_whole_budget(tmp_path):
    """The fallback engine (CI has no atheris) once stopped at its first input: decoding a byte
    that is not UTF-8 raised before any check ran, and the stress run reported 1 input."""
    import subprocess

    out = tmp_path / "fuzz.json"
    proc = subprocess.run([sys.executable, "-m", "bench.stress.fuzz_tokenizer", "--seconds", "1", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    stats = json.loads(out.read_text())
    assert stats["inputs"] > 100 and stats["crashes"] == 0 and stats["fts_syntax_errors"] == 0, stats
