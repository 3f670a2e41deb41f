"""Keyword ranking in tiers on a large history: the rarest words rank first, common ones
only when the rarer find nothing in this project (search.RANKING_BUDGET). The budget is
lowered here so that a small history behaves like a large one."""

from __future__ import annotations

import sqlite3

import pytest

from builders import History, dispatch, git_init, session_ids
from project_history_recall.search import keyword as search_module

pytestmark = pytest.mark.usefixtures("registered_plugin")


@pytest.fixture()
def h(tmp_path):
    h = History(tmp_path / "hermes")
    repo, other = git_init(tmp_path / "repo"), git_init(tmp_path / "other")
    for i in range(8):
        h.session(f"noise-{i:02d}", repo, f"the deploy failed again, attempt {i}")
    h.session("target", repo, "the deploy of the kestrel service")
    h.session("elsewhere", other, "kestrel and the gizmo deploy")
    h.session("now", repo)
    yield h
    h.close()


def search(query: str) -> dict:
    return dispatch("project_history_search", {"query": query, "mode": "keyword", "limit": 10}, session_id="now")


def test_a_small_history_ranks_by_every_word(h):
    ids = session_ids(search("kestrel deploy"))
    assert ids[0] == "target" and len(ids) == 9 and "elsewhere" not in ids


def test_the_rare_word_answers_when_it_is_found_in_this_project(h, monkeypatch):
    monkeypatch.setattr(search_module, "RANKING_BUDGET", 5)  # "deploy" (10 entries) is now common
    assert session_ids(search("kestrel deploy")) == ["target"]


def test_common_words_answer_when_the_rare_ones_are_only_in_another_project(h, monkeypatch):
    monkeypatch.setattr(search_module, "RANKING_BUDGET", 5)
    ids = session_ids(search("gizmo deploy"))
    assert len(ids) == 9 and set(ids) == {f"noise-{i:02d}" for i in range(8)} | {"target"}


def test_a_word_in_no_tier_of_this_project_finds_nothing(h, monkeypatch):
    monkeypatch.setattr(search_module, "RANKING_BUDGET", 5)
    assert session_ids(search("gizmo kestrel")) == ["target"]
    assert session_ids(search("gizmo zebra")) == []


def _ranked(response: dict) -> list[tuple]:
    return [(r["session_id"], r["message_id"], r["snippet"], r["confidence_score"]) for r in response["results"]]


def test_an_index_of_the_previous_schema_is_migrated_and_ranks_the_same(h):
    """Schema V10's (id, session_id) index carries the BM25 query's scope check; an index
    written before it gains it on the next search and answers exactly as a new one."""
    before = _ranked(search("kestrel deploy"))
    conn = sqlite3.connect(h.root / "plugins" / "project-history-recall" / "index.db")
    conn.execute("DROP INDEX entries_id_session")
    conn.execute("PRAGMA user_version = 9")
    conn.close()
    assert _ranked(search("kestrel deploy")) == before


def test_an_index_missing_its_scope_index_is_healed_not_ranked_by_like(h):
    """At the current schema a missing (id, session_id) index is damage, as a missing table is:
    the index is moved aside and rebuilt, and ranks as before (not by the LIKE fallback)."""
    before = _ranked(search("kestrel deploy"))
    data_dir = h.root / "plugins" / "project-history-recall"
    conn = sqlite3.connect(data_dir / "index.db")
    conn.execute("DROP INDEX entries_id_session")
    conn.close()
    assert _ranked(search("kestrel deploy")) == before
    assert list(data_dir.glob("index.db.index_corrupt-*"))
