"""Confidence, "no confident match" and the reply turn, through the real tool registry."""

from __future__ import annotations

import pytest

from builders import History, dispatch, git_init, session_ids
from project_history_recall.search.confidence import LOW, MODELS, Assessment, Signals, assess, nothing_confident

pytestmark = pytest.mark.usefixtures("registered_plugin")


def test_the_score_rises_with_the_evidence_and_levels_follow_the_thresholds() -> None:
    model = MODELS["keyword"]
    weak = Signals(coverage=0.2, keyword_per_unit=0.3, keyword_share=0.3, margin=0.0, missing=0.8, query_units=5)
    strong = Signals(coverage=1.0, keyword_per_unit=6.0, keyword_share=1.0, margin=0.8, missing=0.0, query_units=5)
    assert assess(model, weak).score < assess(model, strong).score
    assert assess(model, weak).level == LOW and assess(model, strong).level == "high"
    assert nothing_confident([assess(model, weak)]) and not nothing_confident([assess(model, weak),
                                                                              assess(model, strong)])
    assert not nothing_confident([])
    assert all(0.0 < m.low <= m.high <= 1.0 for m in MODELS.values())
    assert Assessment(0.5, LOW).level == LOW


def test_a_chinese_question_is_read_against_its_own_threshold() -> None:
    # a score between the two thresholds: low for an English question, medium for a Chinese one
    model = MODELS["hybrid"]
    assert model.low_cjk is not None and model.low_cjk < model.low
    english = Signals(cjk_share=0.0)
    chinese = Signals(cjk_share=0.9)
    between = (model.low_cjk + model.low) / 2
    assert model.level(between, english) == LOW
    assert model.level(between, chinese) == "medium"
    assert model.level(model.low_cjk / 2, chinese) == LOW
    assert model.level(between) == LOW  # no signals: the general threshold
    mixed = Signals(cjk_share=0.4)  # an English question quoting a Chinese word or two
    assert model.level(between, mixed) == LOW


@pytest.fixture()
def h(tmp_path):
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    h.session("deploy", repo, "how do we roll back the heron deploy when the canary fails?",
              "run heron rollback --to previous, then page the on-call in #heron-ops",
              "thanks", title="Heron deploy")
    h.session("lunch", repo, "the plan for friday is tacos", "sounds good, I will order them")
    for n, what in enumerate(("the release plan", "the plan for the offsite", "what we decided about the logo",
                              "the plan to move the office", "we decided to skip the retro")):
        h.session(f"chat-{n}", repo, f"let us talk about {what}", "sure, later today")
    h.session("timeouts", repo, "heron is slow today", "the heron client timeout retry budget is 3 attempts with "
              "exponential backoff", "ok")
    h.session("now", repo)
    yield h
    h.close()


def search(query: str, **args):
    return dispatch("project_history_search", {"query": query, "mode": "keyword", "limit": 10, **args},
                    session_id="now")


def refreshed(history: History, embed: bool = False):
    """``history``'s Recall with its index built (and its vectors, with ``embed``)."""
    recall = history.recall()
    recall.refresh()
    if embed:
        recall.embed()
    return recall


def explained(recall, asker_id: str, query: str, mode: str = "keyword"):
    """The library's ranking of ``query`` asked from ``asker_id``, with its signals."""
    from project_history_recall.search.scope import Filters
    from project_history_recall.search.service import Question, explain

    with recall.fresh_reader() as conn:
        resolver = recall.workspace.resolver()
        asker = recall.workspace.asker(conn, resolver, asker_id, None)
        return explain(conn, resolver, asker, Question(query, mode, 10, Filters(), False), recall.semantic)


def test_a_clear_keyword_match_is_confident(h):
    reply = search("heron client timeout retry budget")
    assert session_ids(reply)[0] == "timeouts"
    assert reply["results"][0]["confidence"] == "high"
    assert 0.0 <= reply["results"][0]["confidence_score"] <= 1.0
    assert "message" not in reply


def test_a_topic_the_project_never_discussed_says_no_confident_match(h):
    reply = search("what did we decide about the kafka consumer lag dashboard plan")
    assert reply["results"], "the low-confidence results are still listed"
    assert reply["message"] == "no confident match in this project"
    assert {r["confidence"] for r in reply["results"]} == {"low"}


def test_the_shown_message_is_the_answering_one_and_a_question_carries_its_reply(h):
    reply = search("what do we do when the canary fails")
    top = reply["results"][0]
    assert top["session_id"] == "deploy"
    assert "canary" in top["snippet"]
    assert top["reply"]["kind"] == "assistant"
    assert "--to previous" in top["reply"]["snippet"]
    assert top["reply"]["message_id"] == top["message_id"] + 1
    plain = search("exponential backoff attempts")["results"][0]
    assert plain["session_id"] == "timeouts" and "reply" not in plain  # not a question: no reply


def test_people_read_the_confidence_the_reply_and_also(h):
    from project_history_recall.faces import humanize

    text = humanize.search(search("what do we do when the canary fails"))
    assert "high confidence" in text or "medium confidence" in text
    assert "↳ reply (assistant): run" in text
    payload = search("heron is slow, what is the client timeout", mode="hybrid")
    also = payload["results"][0]["also"]
    assert f"+ also ({also['kind']}): {also['snippet']}" in humanize.search(payload)
    vague = humanize.search(search("what did we decide about the kafka consumer lag dashboard plan"))
    assert "no confident match in this project" in vague and "low confidence" in vague


@pytest.mark.model
def test_hybrid_is_confident_on_a_clear_match_and_not_on_an_unknown_topic(h):
    clear = search("heron client timeout retry budget", mode="hybrid")
    assert session_ids(clear)[0] == "timeouts" and clear["results"][0]["confidence"] == "high"
    assert "message" not in clear
    vague = search("what did we decide about the kafka consumer lag dashboard plan", mode="hybrid")
    assert vague["results"] and vague["message"] == "no confident match in this project"


def test_a_unit_found_only_in_a_later_message_of_a_session_is_not_missing(tmp_path):
    """Coverage stops tokenizing a session's entries once it has found every unit, so the
    ``missing`` signal must not be read from what happened to be tokenized."""
    history = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    history.session("split", repo, "the zephyrine cache was cold", "and the quorvex flag stayed on")
    history.session("now", repo)
    recall = refreshed(history)
    try:
        ranked = explained(recall, "now", "zephyrine quorvex")
    finally:
        history.close()
    assert ranked is not None and [r.session_id for r in ranked.results] == ["split"]
    assert ranked.signals[0].coverage == 1.0
    assert ranked.signals[0].missing == 0.0


@pytest.mark.model
def test_agree_marks_the_session_both_sources_put_first(h):
    """``agree`` is 1 for keyword's best session when it also holds the best semantic message,
    and for no other result."""
    recall = h.recall()
    recall.refresh()
    recall.embed()
    ranked = explained(recall, "now", "heron client timeout retry budget", "hybrid")
    assert ranked is not None and ranked.results[0].session_id == "timeouts"
    assert [s.agree for s in ranked.signals] == [1.0] + [0.0] * (len(ranked.signals) - 1)


def _fit_module():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench import fit_confidence

    return fit_confidence


def test_the_fit_counts_a_result_said_in_the_questions_time_as_never_low() -> None:
    """``bench.fit_confidence.flagged_rates`` flags as the product does: a result inside the
    question's time window is vouched for (``temporal.vouch``), so its query is not "no
    confident match" however low its score."""
    fc = _fit_module()
    model = {"features": ("coverage",), "mean": [0.0], "std": [1.0], "weights": [1.0], "bias": 0.0}
    weak = {"coverage": -3.0}
    queries = [("set", {"negative": False, "category": "temporal"}, [(True, weak, True)]),
               ("set", {"negative": False, "category": "temporal"}, [(True, weak, False)]),
               ("set", {"negative": True, "category": "withheld"}, [(False, weak, False)])]
    rates = fc.flagged_rates(model, 0.5, queries)
    assert rates["true_first"] == 2 and rates["true_first_flagged"] == 0.5
    assert rates["negatives_flagged"] == 1.0


def test_the_fit_calibration_keeps_the_order_and_reads_as_a_probability() -> None:
    """``bench.fit_confidence.calibrated``: the contrast fit's weights are rescaled so the
    score is the probability that a first result is right, without reordering any result."""
    fc = _fit_module()
    calibrated, fit, probability = fc.calibrated, fc.fit, fc.probability
    rows = [({"x": x / 10}, x >= 6 or x == 3) for x in range(10)]
    contrast = fit([r for r in rows if r[0]["x"] < 0.2 or r[1]], ["x"])
    model = calibrated(contrast, rows)
    before = [probability(contrast, sig) for sig, _ in rows]
    after = [probability(model, sig) for sig, _ in rows]
    assert sorted(range(10), key=before.__getitem__) == sorted(range(10), key=after.__getitem__)
    assert abs(sum(after) / len(after) - sum(label for _, label in rows) / len(rows)) < 0.05
    assert sum(before) / len(before) > sum(after) / len(after) + 0.1  # the contrast fit alone overstates


def test_the_fit_collects_every_querys_results_with_their_signals() -> None:
    """``bench.fit_confidence.collect`` asks each query of a set through the library's own
    ranking, in every mode, on a home built and embedded from the set: each returned result
    is recorded with its signals and whether its session is gold (the fit's only input)."""
    from pathlib import Path

    fc = _fit_module()
    tiny = Path(__file__).resolve().parents[1] / "bench" / "datasets" / "tiny.json"
    record = fc.collect(tiny)
    assert len(record["queries"]) == 10
    tables = {m["table"] for q in record["queries"] for m in q["modes"].values()}
    assert tables == {"hybrid", "keyword", "semantic"}
    positives = [q for q in record["queries"] if not q["negative"]]
    assert any(results[0][1] for q in positives for results in [q["modes"]["hybrid"]["results"]] if results)
    first = positives[0]["modes"]["hybrid"]["results"][0]
    assert set(first[2]) >= {"coverage", "session_cosine", "agree"}


def test_words_only_another_project_uses_count_as_elsewhere_and_lower_the_confidence(tmp_path):
    """A question asked in the wrong project names what only that project's sessions say:
    ``elsewhere`` measures it (and stays 0 for words that no session uses, and for the same
    question asked in the project that has them); the other project's sessions are never
    results. With every other signal equal, more of it means less confidence, in both tables."""
    from project_history_recall.search.keyword import elsewhere
    from project_history_recall.tokenizer import plan_query

    history = History(tmp_path / "hermes")
    ours, theirs = git_init(tmp_path / "ours"), git_init(tmp_path / "theirs")
    for n in range(3):
        history.session(f"theirs-{n}", theirs, "the grpc gateway drops the tracing header",
                        "patched the zanzibar middleware in zanzibar/middleware.py to keep it")
    history.session("ours-1", ours, "the cache warmer is slow after the gateway restart", "it warms lazily now")
    history.session("ours-now", ours)
    history.session("theirs-now", theirs)
    recall = refreshed(history)
    try:
        wrong = explained(recall, "ours-now", "gateway drops the tracing header in zanzibar")
        nowhere = explained(recall, "ours-now", "gateway quorvexian plimbledorf")
        right = explained(recall, "theirs-now", "gateway drops the tracing header in zanzibar")
        with recall.fresh_reader() as conn:
            path = elsewhere(conn, plan_query("zanzibar/middleware.py"), ["ours-1", "ours-now"], set())
    finally:
        history.close()
    assert path.code > 0.0 and path.words == 0.0  # a path is code-like, counted apart from words
    assert wrong is not None and [r.session_id for r in wrong.results] == ["ours-1"]
    assert wrong.signals[0].elsewhere_words > 0.0
    assert nowhere is not None and nowhere.signals[0].elsewhere_words == nowhere.signals[0].elsewhere_code == 0.0
    assert right is not None and right.results[0].session_id.startswith("theirs-")
    assert right.signals[0].elsewhere_words == right.signals[0].elsewhere_code == 0.0
    for table in ("hybrid", "keyword"):
        plain = Signals(coverage=0.6, keyword_per_unit=2.0, keyword_share=1.0, margin=0.3, missing=0.2,
                        query_units=5, session_cosine=0.4, top_cosine=0.45)
        for field in ("elsewhere_words", "elsewhere_code"):
            outside = Signals(**{**plain.__dict__, field: 0.5})
            assert assess(MODELS[table], outside).score < assess(MODELS[table], plain).score


@pytest.mark.model
def test_a_hybrid_question_whose_words_only_another_project_uses_is_elsewhere_without_keyword_hits(tmp_path):
    """When keyword finds nothing in scope, the semantic results still carry ``elsewhere``: every
    word of the question may be another project's."""
    history = History(tmp_path / "hermes")
    ours, theirs = git_init(tmp_path / "ours"), git_init(tmp_path / "theirs")
    history.session("theirs-1", theirs, "the zanzibar middleware drops the tracing header", "patched it")
    history.session("ours-1", ours, "the cache warmer is slow", "it warms lazily now")
    history.session("ours-now", ours)
    recall = refreshed(history, embed=True)
    try:
        ranked = explained(recall, "ours-now", "zanzibar middleware tracing", "hybrid")
    finally:
        history.close()
    assert ranked is not None and not ranked.keyword and ranked.results
    assert {r.session_id for r in ranked.results} <= {"ours-1", "ours-now"}
    assert ranked.signals[0].elsewhere_words > 0.0


def test_a_common_word_that_a_small_scope_also_uses_is_not_elsewhere(tmp_path, monkeypatch):
    """A unit with more matches than ``elsewhere`` reads may have its first matches all outside a
    small scope that uses it too: it counts for nothing, never as another project's word."""
    from project_history_recall.search import keyword
    from project_history_recall.tokenizer import plan_query

    monkeypatch.setattr(keyword, "ELSEWHERE_MATCHES", 3)
    history = History(tmp_path / "hermes")
    ours, theirs = git_init(tmp_path / "ours"), git_init(tmp_path / "theirs")
    for n in range(5):  # older than ours: their entries come first
        history.session(f"theirs-{n}", theirs, "we deploy on fridays" + (" from zanzibar" if n == 0 else ""), "ok")
    history.session("ours-1", ours, "we deploy with the canary", "ok")
    history.session("ours-now", ours)
    recall = refreshed(history)
    try:
        ranked = explained(recall, "ours-now", "deploy")
        assert ranked is not None
        scope = [r.session_id for r in ranked.results]
        with recall.fresh_reader() as conn:
            assert keyword.elsewhere(conn, plan_query("deploy"), scope, set()) == keyword.Elsewhere()
            assert keyword.elsewhere(conn, plan_query("zanzibar"), scope, set()).words > 0.0
    finally:
        history.close()


def test_a_chinese_question_carries_its_script_into_the_signals(h):
    recall = refreshed(h)
    chinese = explained(recall, "now", "我们上次怎么回滚 heron 部署的")
    english = explained(recall, "now", "how do we roll back the heron deploy")
    assert chinese.results and english.results
    assert all(s.cjk_share > 0.8 for s in chinese.signals)
    assert all(s.cjk_share == 0.0 for s in english.signals)
