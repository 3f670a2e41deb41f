"""Which message a hybrid result shows: the line that says something, not a bare echo of the query's word."""

from __future__ import annotations

import pytest

from builders import History, git_init
from project_history_recall.search.message_choice import LENGTH_CAP, length_prior, message_evidence


def test_evidence_adds_coverage_and_length_to_keyword_and_cosine() -> None:
    ev = message_evidence({"m1": 8.0, "m2": 10.0}, {"m1": 0.9, "m3": 0.5, "m2": 0.1},
                          {"m1": 1.0, "m2": 0.5}, {"m1": 20, "m2": 20, "m3": 20})
    prior = 1.5 * length_prior(20)
    assert ev["m2"] == pytest.approx(1.0 + 0.25 * 0.5 + prior)
    assert ev["m1"] == pytest.approx(0.8 + 0.25 * 1.0 + 0.25 * 1.0 + prior)
    assert ev["m3"] == pytest.approx(0.25 * 0.5 + prior)
    assert max(ev, key=ev.__getitem__) == "m1"  # covering the query and the meaning beat a bare BM25 lead
    assert message_evidence({"m": 0.0}, {}, {}, {}) == {"m": 0.0}


def test_length_counts_up_to_the_cap_only() -> None:
    assert length_prior(200) > length_prior(20) > length_prior(0) == 0.0
    assert length_prior(30_000) == length_prior(LENGTH_CAP)


@pytest.mark.model
def test_a_result_shows_the_line_that_says_something_not_the_echo(tmp_path) -> None:
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    ids = h.session("chat", repo, "I adopted a puppy yesterday, we called her Latte", "Latte is a cute name",
                    "Latte is slowly getting along with the other pets, but my old cat wants nothing to do "
                    "with Latte and hides on the wardrobe all day", "give them a few weeks")
    for n, topic in enumerate(("the csv exporter dropped rows", "the invoice pdf layout broke",
                               "tea or coffee this morning", "the train was late again",
                               "booked the dentist for friday", "the garden needs watering")):
        h.session(f"other{n}", repo, topic, f"noted, {topic}")
    h.session("ask", repo)
    result = h.recall().search("what does Latte do", session_id="ask", mode="hybrid")["results"][0]
    assert result["session_id"] == "chat"
    assert result["message_id"] == ids[2]
    h.close()
