"""The retrieval-evaluation harness on bench/datasets/tiny.json: output shape, known hits, scope, regression."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import eval_retrieval  # noqa: E402 - needs the repo root on sys.path
from bench.evalset import EvalSet, EvalSetError, build_home, hermes_history_only  # noqa: E402

from agent_transcripts import Claude  # noqa: E402
from project_history_recall.hermes_home import HermesHome  # noqa: E402
from project_history_recall.recall import Recall  # noqa: E402
from project_history_recall.settings import PLUGIN_NAME  # noqa: E402
from project_history_recall.sources import claude_code  # noqa: E402

TINY = ROOT / "bench" / "datasets" / "tiny.json"
KEYS = {"hit@1", "hit@5", "hit@10", "mrr", "p50_ms", "p95_ms", "n", "by_lang", "by_category"}


@pytest.fixture(scope="module")
def evaluated():
    return eval_retrieval.evaluate([TINY], ["keyword", "hermes"], quiet=True)


def _outcome(runs, mode: str, qid: str):
    return next(o for o in runs["tiny"].outcomes[mode] if o.query.id == qid)


def test_output_shape(evaluated):
    results, _ = evaluated
    assert set(results) == {"tiny"}
    for mode in ("keyword", "hermes"):
        figures = results["tiny"][mode]
        assert set(figures) >= KEYS
        assert figures["n"] == 8  # the two negative controls are left out of the hit metrics
        assert {"en", "zh"} <= set(figures["by_lang"])
        assert {"keyword", "identifier", "paraphrase"} <= set(figures["by_category"])
        for group in (*figures["by_lang"].values(), *figures["by_category"].values()):
            assert {"hit@1", "hit@5", "hit@10", "mrr", "n"} <= set(group)
        assert 0.0 <= figures["hit@1"] <= figures["hit@5"] <= figures["hit@10"] <= 1.0
        assert figures["messages"]["n"] == 3
    json.dumps(results)  # plain JSON all the way down


def test_known_queries_hit(evaluated):
    _, runs = evaluated
    assert _outcome(runs, "keyword", "t2").rank() == 1  # retry_policy -> the webhook session
    assert _outcome(runs, "keyword", "t7").rank() == 1  # Chinese bigrams
    # Same words from the kvstore project find the kvstore session, not Billing's.
    assert _outcome(runs, "keyword", "t8").sessions[0] == "20260106_110000_k20001"
    assert _outcome(runs, "keyword", "t2").message_rank(runs["tiny"].built.message_ids) == 1


def test_scope_and_negative_controls(evaluated):
    results, runs = evaluated
    ours = results["tiny"]["keyword"]
    assert ours["other_project_queries"] == 0
    assert ours["negatives"] == {"n": 2, "empty_in_project": 2, "with_other_project": 0, "flagged": 0,
                                 "by_category": {"negative": "0/2"}, "first_right": 8, "first_right_flagged": 0}
    # nothing found is "No matching messages", not a flagged answer; a reply only adds hits
    assert all(ours["messages_shown"][k] >= ours["messages_with_reply"][k] >= ours["messages"][k]
               for k in ("hit@1", "hit@5"))
    # Archived and subagent sessions are not found.
    for o in runs["tiny"].outcomes["keyword"]:
        assert "20260110_100000_b10003" not in o.sessions and "20260113_090000_b1sub1" not in o.sessions
    # Hermes's built-in search is not project-scoped: the bloom-filter question from Billing finds kvstore.
    assert results["tiny"]["hermes"]["negatives"]["with_other_project"] >= 1


def test_baseline_scoped_filters_hermes():
    results, _ = eval_retrieval.evaluate([TINY], ["hermes"], baseline_scoped=True, quiet=True)
    assert results["tiny"]["hermes"]["other_project_queries"] == 0


def test_regression_check(tmp_path):
    current = {"s": {"keyword": {"hit@5": 0.885}, "hybrid": {"hit@5": 0.87}}}
    baseline = {"s": {"keyword": {"hit@5": 0.9}, "hybrid": {"hit@5": 0.9}, "semantic": {"hit@5": 0.5}}}
    failed, text = eval_retrieval.regression(current, baseline)
    assert failed and "REGRESSION" in text and "not run" in text
    assert not eval_retrieval.regression({"s": {"keyword": {"hit@5": 0.885}}}, {"s": {"keyword": {"hit@5": 0.9}}})[0]


def test_command_line_writes_json_and_fails_on_regression(tmp_path, capsys):
    out = tmp_path / "out.json"
    assert eval_retrieval.main([str(TINY), "--modes", "keyword", "--json", str(out)]) == 0
    results = json.loads(out.read_text(encoding="utf-8"))
    assert "=== tiny" in capsys.readouterr().out
    baseline = tmp_path / "baseline.json"
    results["tiny"]["keyword"]["hit@5"] += 0.05
    baseline.write_text(json.dumps(results), encoding="utf-8")
    assert eval_retrieval.main([str(TINY), "--modes", "keyword", "--regression", str(baseline)]) == 1


def test_bad_sets_are_refused(tmp_path):
    data = json.loads(TINY.read_text(encoding="utf-8"))
    data["queries"][0]["gold_sessions"] = ["no-such-session"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(EvalSetError):
        EvalSet.load(bad)


def test_the_message_study_collects_each_positive_querys_candidate_messages(tmp_path: Path) -> None:
    """``bench.message_study collect`` ranks every query with gold through the library and
    writes, per result session, its candidate messages with their keyword and cosine evidence."""
    from bench import message_study

    out = tmp_path / "tiny-messages.json"
    written = message_study.collect(TINY, out)
    record = json.loads(out.read_text(encoding="utf-8"))
    assert written == len(record["queries"]) == 8
    messages = [m for q in record["queries"] for s in q["sessions"] for m in s["messages"]]
    assert messages and {"gold", "kw", "cos", "units"} <= set(messages[0])
    assert any(m["gold"] for m in messages)


def test_the_message_study_collects_semantic_modes_own_candidates(tmp_path: Path, capsys) -> None:
    """``collect --mode semantic`` records semantic mode's ranking: its candidates carry a cosine
    and no BM25, and ``study`` reads the file as a semantic one (the weight of
    ``message_choice.SEMANTIC_ALONE`` is reproducible from it)."""
    from bench import message_study

    out = tmp_path / "tiny-semantic.json"
    assert message_study.main(["collect", "--mode", "semantic", str(TINY), str(out)]) == 0
    record = json.loads(out.read_text(encoding="utf-8"))
    messages = [m for q in record["queries"] for s in q["sessions"] for m in s["messages"]]
    assert record["mode"] == "semantic" and messages
    assert all(m["kw"] == 0.0 and m["cos"] is not None for m in messages)
    capsys.readouterr()
    assert message_study.main(["study", str(out), str(out)]) == 0
    assert "the library's (message_choice.SEMANTIC_ALONE = 1.0)" in capsys.readouterr().out
    hybrid = tmp_path / "tiny-hybrid.json"
    message_study.collect(TINY, hybrid)
    with pytest.raises(SystemExit, match="different modes"):
        message_study.main(["study", str(out), str(hybrid)])


def test_a_benchmark_home_reads_hermes_alone_not_this_machines_other_agents(tmp_path, monkeypatch):
    """A Claude Code transcript in the machine's own ``~/.claude`` stays out of a benchmark's index."""
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    Claude(tmp_path / "user" / ".claude", "0b6a1c52-6666-4a5e-9c1e-ffffffffffff", tmp_path).user("the okapi question")
    assert claude_code.default_root().is_dir()
    built = build_home(EvalSet.load(TINY), tmp_path / "hermes")
    recall = Recall(built.root)
    report = recall.refresh()
    assert report.sessions_total == len(EvalSet.load(TINY).sessions)
    conn = sqlite3.connect(recall.index.path)
    sources = {row[0] for row in conn.execute("SELECT DISTINCT source FROM sessions")}
    conn.close()
    assert sources and claude_code.NAME not in sources


def test_reading_hermes_alone_keeps_what_a_benchmark_home_already_configured(tmp_path):
    """``hermes_history_only`` adds its ``sources`` beside a home's own settings (a provider,
    Hermes's own keys) instead of writing over them."""
    home = tmp_path / "hermes"
    home.mkdir()
    config = {"model": {"default": "scripted"},
              "plugins": {"entries": {PLUGIN_NAME: {"embedding": {"model": "e5-small"}}}}}
    HermesHome(home).config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
    hermes_history_only(home)
    settings = HermesHome(home).settings()
    assert settings.sources == ("hermes",)
    assert settings.embedding.model == "e5-small"
    assert HermesHome(home).load_config()["model"] == {"default": "scripted"}


@pytest.mark.parametrize("plugins", ["plugins:\n", "plugins:\n  entries:\n", "plugins: []\n"])
def test_reading_hermes_alone_takes_a_home_whose_plugins_section_is_empty(tmp_path, plugins):
    """A hand-written ``plugins:`` with nothing (or a list) under it is not a mapping to add to."""
    home = tmp_path / "hermes"
    home.mkdir()
    HermesHome(home).config_path.write_text("model: scripted\n" + plugins, encoding="utf-8")
    hermes_history_only(home)
    assert HermesHome(home).settings().sources == ("hermes",)
    assert HermesHome(home).load_config()["model"] == "scripted"
