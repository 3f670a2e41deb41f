"""Time phrases in a question ("yesterday", "last week", "on 09.01.2024") prefer the sessions
said then; relative phrases count back from the asking session's time."""

from __future__ import annotations

from datetime import datetime

import pytest

from builders import History, git_init, session_ids
from project_history_recall.when import query_window

ASKED = datetime(2024, 1, 20, 18, 0).timestamp()
DAY = 86400.0


def day(y: int, m: int, d: int) -> float:
    return datetime(y, m, d).timestamp()


@pytest.mark.parametrize(("text", "after", "before"), [
    ("What kind of pasta did Kate make on 29 Dec 2023?", day(2023, 12, 29), day(2023, 12, 31)),
    ("Which book did Paola start to read on 09.01.2024?", day(2024, 1, 9), day(2024, 1, 11)),
    ("What baseball game did Akib watch on December 28 2023?", day(2023, 12, 28), day(2023, 12, 30)),
    ("the 17th of January, 2024", day(2024, 1, 17), day(2024, 1, 19)),
    ("2024-01-05 deploy", day(2024, 1, 5), day(2024, 1, 7)),
    ("a hike in January 2024", day(2024, 1, 1), day(2024, 2, 2)),
    ("the match he watched in 2017", day(2017, 1, 1), day(2018, 1, 2)),
    ("what happened recently before 5th of January 2024", None, day(2024, 1, 6)),
    ("anything after December 23rd, 2023", day(2023, 12, 23), None),
    ("what did we decide yesterday", ASKED - 2 * DAY, ASKED + DAY),
    ("the bug from last week", ASKED - 14 * DAY, ASKED + DAY),
    ("we fixed it 3 days ago", ASKED - 4 * DAY, ASKED - 2 * DAY + DAY),
])
def test_query_windows(text, after, before) -> None:
    window = query_window(text, lambda: ASKED)
    assert window is not None
    assert (window.after, window.before) == (after, before)


def test_no_window_without_a_time_phrase_and_relative_ones_need_the_asking_time() -> None:
    assert query_window("When was the last time Elise saw her ex?", lambda: ASKED) is None
    assert query_window("the retry policy", lambda: ASKED) is None
    assert query_window("what did we decide yesterday", lambda: None) is None


@pytest.mark.parametrize("text", ["upgrade to version 2.10.2024 of the parser", "pip install tzdata==1.2.2024",
                                  "the v3.12.2023 changelog", "build 1.2.2024.5 failed", "tag 10.2.10.2024"])
def test_a_version_number_is_not_a_date(text) -> None:
    assert query_window(text, lambda: ASKED) is None


def test_a_date_after_a_version_number_is_still_read() -> None:
    window = query_window("version 2.10.2024 shipped on 09.01.2024.", lambda: ASKED)
    assert window is not None
    assert (window.after, window.before) == (day(2024, 1, 9), day(2024, 1, 11))


def _history(tmp_path) -> tuple[History, float]:
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    start = h.clock
    h.session("old", repo, "the retry policy of the uploader: retry policy review",
              "decided the retry policy keeps five retries with backoff")
    h.clock = start + 10 * DAY
    h.session("recent", repo, "looked at the uploader again", "decided to drop the retry count to three")
    h.clock = start + 11 * DAY
    h.session("ask", repo, "hello")
    return h, start


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_yesterday_prefers_the_session_said_yesterday(tmp_path, mode) -> None:
    h, _ = _history(tmp_path)
    recall = h.recall()
    assert session_ids(recall.search("what did we decide about the retry policy", session_id="ask",
                                     mode=mode, limit=5))[0] == "old"
    assert session_ids(recall.search("what did we decide about the retry policy yesterday", session_id="ask",
                                     mode=mode, limit=5))[:2] == ["recent", "old"]
    h.close()


def test_a_date_in_the_question_prefers_that_day(tmp_path) -> None:
    h, start = _history(tmp_path)
    query = "what did we decide about the retry count"
    assert session_ids(h.recall().search(query, session_id="ask", mode="keyword", limit=5))[0] == "recent"
    said = datetime.fromtimestamp(start)
    dated = f"{query} on {said.day} {said.strftime('%B')} {said.year}"
    assert session_ids(h.recall().search(dated, session_id="ask", mode="keyword", limit=5))[0] == "old"
    h.close()


def test_a_result_said_inside_the_window_is_never_low() -> None:
    from project_history_recall.search.confidence import Assessment
    from project_history_recall.search.keyword import Hit, SessionResult
    from project_history_recall.search.temporal import vouch

    def result(sid: str, said: float) -> SessionResult:
        hit = Hit(1, sid, 1, "user", "text", said, 0)
        return SessionResult(sid, hit, 1.0, [hit])

    window = query_window("what did we decide yesterday", lambda: ASKED)
    results = [result("inside", ASKED - DAY), result("outside", ASKED - 30 * DAY)]
    low = [Assessment(0.1, "low"), Assessment(0.1, "low")]
    assert [a.level for a in vouch(low, results, window)] == ["medium", "low"]
    assert vouch(low, results, None) == low


def test_the_asking_time_is_read_only_for_a_relative_phrase() -> None:
    asked: list[None] = []

    def asked_at() -> float:
        asked.append(None)
        return ASKED

    assert query_window("the retry policy", asked_at) is None
    assert query_window("what did we cook on 29 Dec 2023", asked_at) is not None
    assert asked == []
    assert query_window("what did we decide last week", asked_at) is not None
    assert asked == [None]
