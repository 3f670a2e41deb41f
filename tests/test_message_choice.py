"""Which message a hybrid result shows: the line that says something, not a bare echo of the query's word."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import History, git_init
from project_history_recall.search.message_choice import (
    LENGTH_CAP,
    announces_next_step,
    in_first_person,
    length_prior,
    message_evidence,
    shown_messages,
    voice,
)


def test_evidence_adds_new_units_voice_and_length_to_keyword_and_cosine() -> None:
    ev = message_evidence({"m1": 8.0, "m2": 10.0}, {"m1": 0.9, "m3": 0.5, "m2": 0.1}, {"m1": 20, "m2": 20, "m3": 20})
    new_units, voices = {"m1": 1.0, "m2": 0.5}, {"m2": -0.3, "m3": 0.4}
    prior = 1.5 * length_prior(20)
    assert ev.score("m2", 0.5, -0.3) == pytest.approx(1.0 + 0.5 * 0.5 - 0.3 + prior)
    assert ev.score("m1", 1.0, 0.0) == pytest.approx(0.8 + 0.25 * 1.0 + 0.5 * 1.0 + prior)
    assert ev.score("m3", 0.0, 0.4) == pytest.approx(0.25 * 0.5 + 0.4 + prior)
    # bringing up the query's units and the meaning beat a bare BM25 lead
    assert shown_messages(["m1", "m2", "m3"], ev, lambda key: new_units.get(key, 0.0),
                          lambda key: voices.get(key, 0.0), 3) == ["m1", "m2", "m3"]
    assert message_evidence({"m": 0.0}, {}, {}).score("m", 0.0, 0.0) == 0.0


@pytest.mark.parametrize(("text", "first_person", "next_step"), [
    ("I think the cache is stale", True, False),
    ("i’m back from the trip", True, False),
    ("we've kept the old schema", True, False),
    ("Let me check the retry limit", True, True),
    ("I’ll fix it", True, True),
    ("Let's run the tests", False, True),
    ("for i in range(3): print(i)", False, False),
    ("determine the USB device in Illinois", False, False),
])
def test_voice_reads_the_first_person_and_an_announced_next_step(text, first_person, next_step) -> None:
    assert (in_first_person(text), announces_next_step(text)) == (first_person, next_step)
    assert voice(text) == pytest.approx(0.4 * first_person - 0.3 * next_step)


keys = st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=8, unique=True)
scores = st.dictionaries(st.sampled_from("abcdefgh"), st.floats(0, 50, allow_nan=False), max_size=8)


@settings(max_examples=300)
@given(keys=keys, kw=scores, sem=scores, new=scores, chars=st.dictionaries(st.sampled_from("abcdefgh"),
                                                                          st.integers(0, 3000), max_size=8),
       voices=st.dictionaries(st.sampled_from("abcdefgh"), st.sampled_from((-0.3, 0.0, 0.1, 0.4)), max_size=8),
       n=st.integers(1, 3))
def test_the_lazy_choice_equals_scoring_every_message(keys, kw, sem, new, chars, voices, n) -> None:
    ev = message_evidence(kw, sem, chars)
    share = {key: min(1.0, value / 50) for key, value in new.items()}

    full = {key: ev.score(key, share.get(key, 0.0), voices.get(key, 0.0)) for key in keys}
    best_first = sorted(keys, key=lambda key: (-full[key], keys.index(key)))  # the first of equals first
    assert shown_messages(keys, ev, lambda key: share.get(key, 0.0), lambda key: voices.get(key, 0.0),
                          n) == best_first[:n]


def test_a_message_far_behind_is_not_read_again() -> None:
    ev = message_evidence({"lead": 10.0, "echo": 9.0, "voiced": 8.0, "far": 0.2},
                          {}, {"lead": 500, "echo": 500, "voiced": 500, "far": 500})
    shares, voices = {"lead": 1.0}, {"voiced": 0.4}
    tokenized: list[str] = []
    read: list[str] = []

    def new_units_of(key: str) -> float:
        tokenized.append(key)
        return shares.get(key, 0.0)

    def voice_of(key: str) -> float:
        read.append(key)
        return voices.get(key, 0.0)

    keys = ["lead", "echo", "voiced", "far"]
    assert shown_messages(keys, ev, new_units_of, voice_of) == ["lead"]
    # echo's voice leaves it below lead (1.5) even with every unit new: it is not tokenized;
    # far's bound is below lead: it is not even read
    assert (read, tokenized) == (["lead", "echo", "voiced"], ["lead", "voiced"])
    tokenized.clear()
    read.clear()
    assert shown_messages(keys, ev, new_units_of, voice_of, 2) == ["lead", "voiced"]
    assert (read, tokenized) == (["lead", "echo", "voiced"], ["lead", "echo", "voiced"])


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
    for mode in ("hybrid", "keyword"):
        result = h.recall().search("what does Latte do", session_id="ask", mode=mode)["results"][0]
        assert result["session_id"] == "chat"
        # the two lines that say something about Latte are shown (the one that brought the name up
        # first), the bare echo between them is neither
        assert (result["message_id"], result["also"]["message_id"]) == (ids[0], ids[2]), mode
    h.close()


@pytest.mark.model
def test_also_is_neither_the_shown_message_nor_its_reply(tmp_path) -> None:
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    ids = h.session("chat", repo, "Did you name the new puppy Latte or Mocha in the end?",
                    "Latte, after the colour of the puppy's coat", "the puppy Latte loves the park by the river")
    for n, topic in enumerate(("the csv exporter dropped rows", "tea or coffee this morning")):
        h.session(f"other{n}", repo, topic, f"noted, {topic}")
    h.session("ask", repo)
    result = h.recall().search("what did they name the puppy", session_id="ask", mode="hybrid")["results"][0]
    assert (result["message_id"], result["reply"]["message_id"]) == (ids[0], ids[1])
    assert result["also"]["message_id"] == ids[2]
    h.close()


def _shown_line(tmp_path, lines: tuple[str, ...], query: str, mode: str) -> int:
    """Which of one session's ``lines`` the first result for ``query`` shows."""
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    ids = h.session("work", repo, *lines)
    for n, topic in enumerate(("the csv exporter dropped rows", "the invoice pdf layout broke",
                               "tea or coffee this morning", "the train was late again")):
        h.session(f"other{n}", repo, topic, f"noted, {topic}")
    h.session("ask", repo)
    result = h.recall().search(query, session_id="ask", mode=mode)["results"][0]
    h.close()
    assert result["session_id"] == "work"
    return ids.index(result["message_id"])


@pytest.mark.model
@pytest.mark.parametrize("mode", ["hybrid", "keyword"])
def test_a_result_shows_the_line_that_brought_the_words_up_not_the_reply_that_echoes_them(tmp_path, mode) -> None:
    lines = ("What did you do at the weekend?", "I love to cook desserts, my brother and I made a chocolate lava cake",
             "You cook desserts with your brother? Cooking desserts with family is such a sweet thing, and "
             "chocolate desserts are hard to resist", "Macarons, for my mom's birthday")
    assert _shown_line(tmp_path, lines, "which desserts did they cook", mode) == 1


@pytest.mark.model
@pytest.mark.parametrize("mode", ["hybrid", "keyword", "semantic"])
def test_a_result_shows_what_was_agreed_not_the_agent_announcing_its_next_step(tmp_path, mode) -> None:
    lines = ("Let me check the retry limit of the upstream client.", "ok", "go on", "hm",
             "The retry limit of the upstream client stays at five, as we agreed.")
    assert _shown_line(tmp_path, lines, "retry limit of the upstream client", mode) == 4


@pytest.mark.model
@pytest.mark.parametrize("mode", ["hybrid", "keyword", "semantic"])
def test_a_result_shows_the_line_in_the_first_person(tmp_path, mode) -> None:
    lines = ("The retry limit of the upstream client is five.", "ok", "go on", "hm",
             "We set the retry limit of the upstream client to five.")
    assert _shown_line(tmp_path, lines, "retry limit of the upstream client", mode) == 4
