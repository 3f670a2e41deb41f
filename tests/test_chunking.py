"""Chunks cover the message, respect the size and overlap, and hash stably."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from project_history_recall.chunking import Chunk, chunk_text, content_hash, estimate_tokens

PIECES = [
    "the",
    "retry",
    "policy",
    "exponential_backoff",
    "RetryPolicy",
    "src/project_history_recall/chunking.py",
    "我们",
    "今天",
    "修复了登录页面的超时问题",
    "。",
    "，",
    ".",
    "!",
    "?",
    "(",
    ")",
    "=",
    "{",
    "}",
    "42",
    "x" * 150,  # a long run that must be split
]
SEPARATORS = [" ", " ", " ", "", "\n", "\n\n", "  ", "\t"]
part = st.tuples(st.sampled_from(PIECES), st.sampled_from(SEPARATORS))
message = st.one_of(
    st.lists(part, max_size=30),
    st.lists(part, min_size=100, max_size=600),
).map(lambda parts: "".join(p + s for p, s in parts))
sizes = st.tuples(st.integers(16, 200), st.integers(0, 100)).map(lambda t: (t[0], min(t[1], t[0] // 2)))


def _check_invariants(text: str, chunks: list[Chunk], size: int, overlap: int) -> None:
    assert [c.index for c in chunks] == list(range(len(chunks)))
    for c in chunks:
        assert text[c.start : c.end] == c.text
        assert c.text == c.text.strip() and c.text
        assert c.content_hash == content_hash(c.text)
        assert estimate_tokens(c.text) <= size
    for a, b in itertools.pairwise(chunks):
        assert a.start < b.start and a.end < b.end
        assert b.start <= a.end + len(text[a.end : b.start]) and not text[a.end : b.start].strip()
        if b.start < a.end:
            assert estimate_tokens(text[b.start : a.end]) <= overlap
    # every visible character is in some chunk
    covered = [False] * len(text)
    for c in chunks:
        for i in range(c.start, c.end):
            covered[i] = True
    assert all(covered[i] or text[i].isspace() for i in range(len(text)))


@settings(max_examples=200, deadline=None)
@given(text=message, size_overlap=sizes)
def test_chunks_cover_and_respect_sizes(text: str, size_overlap: tuple[int, int]) -> None:
    size, overlap = size_overlap
    chunks = chunk_text(text, size, overlap)
    if not text.strip():
        assert chunks == []
        return
    assert chunks
    _check_invariants(text, chunks, size, overlap)
    # all but the last chunk are "about" chunk_size: at least 3/4 of it, less one unit
    for c in chunks[:-1]:
        assert c.tokens >= 0.75 * size - 8


@settings(max_examples=150, deadline=None)
@given(a=message, b=message, size_overlap=sizes)
def test_appending_text_keeps_earlier_chunks(a: str, b: str, size_overlap: tuple[int, int]) -> None:
    """A message that grows (streamed, edited at the end) re-embeds only its tail."""
    size, overlap = size_overlap
    before = chunk_text(a, size, overlap)
    after = chunk_text(a + b, size, overlap)
    stable = before[:-2]
    assert after[: len(stable)] == stable


@settings(max_examples=100, deadline=None)
@given(text=message)
def test_deterministic(text: str) -> None:
    assert chunk_text(text) == chunk_text(text)


def test_blank_and_short() -> None:
    assert chunk_text("") == []
    assert chunk_text(" \n\t ") == []
    (only,) = chunk_text("  fix the retry policy  ")
    assert only.index == 0 and only.text == "fix the retry policy" and (only.start, only.end) == (2, 22)


def test_prefers_paragraph_then_line_then_sentence_boundaries() -> None:
    para = " ".join(["word"] * 50)  # 50 × 1.2 = 60 tokens
    text = f"{para}\n\n{para}\n\n{para}"
    chunks = chunk_text(text, 130, 0)
    assert [c.text for c in chunks] == [f"{para}\n\n{para}", para]
    sentences = "This is a sentence. " * 30
    for c in chunk_text(sentences, 64, 0)[:-1]:
        assert c.text.endswith(".")


def test_cjk_counts_one_token_per_character() -> None:
    assert estimate_tokens("修复了登录页面的超时问题") == 12
    chunks = chunk_text("我" * 1000, 100, 10)
    assert all(len(c.text) <= 100 for c in chunks)
    assert sum(len(c.text) for c in chunks) >= 1000


def test_estimate_is_in_the_documented_ballpark() -> None:
    assert estimate_tokens("the quick brown fox jumps") == round(5 * 0.8 + 0.1 * 21)
    assert estimate_tokens("a, b.") == round(2 * 0.9 + 2)
    assert estimate_tokens("   ") == 0


def test_hash_ignores_whitespace_and_normalisation_only() -> None:
    assert content_hash("fix  the\r\nretry ") == content_hash("fix the retry")
    assert content_hash("caf\u00e9") == content_hash("cafe\u0301")  # NFC
    assert content_hash("fix the retry") != content_hash("fix the retries")
    assert len(content_hash("x")) == 64


def test_max_chunks() -> None:
    text = " ".join(["word"] * 2000)
    assert len(chunk_text(text, 100, 10, max_chunks=3)) == 3


@pytest.mark.parametrize(("size", "overlap"), [(8, 0), (100, 51), (100, -1)])
def test_bad_arguments(size: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        chunk_text("text", size, overlap)


def test_defaults_are_512_and_64() -> None:
    text = " ".join(f"w{i}" for i in range(3000))
    chunks = chunk_text(text)
    assert all(c.tokens <= 512 for c in chunks)
    assert all(c.tokens >= 380 for c in chunks[:-1])
