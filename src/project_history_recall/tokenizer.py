"""One tokenizer for writing the index and for reading it (pure: no I/O).

SQLite's ``unicode61`` sees ``我今天在改广告SDK`` as one token and ``trigram``
needs three characters, so neither finds the two-character word ``广告``. We
tokenize in Python and hand FTS5 a space-separated stream it only has to split
on spaces:

* Chinese/Japanese runs become overlapping bigrams (``广告点击`` → ``广告 告点
  点击``); a one-character run stays a unigram.
* Words are lowercased. A code identifier (``settings-prod.yaml``,
  ``retry_policy``, ``RetryPolicy``) is emitted whole *and* as its parts, whole
  first, so the parts stay consecutive and a query can ask for them as a phrase.
* Traditional characters are folded to simplified (OpenCC) on both sides.

The FTS5 table is declared with :data:`FTS_TOKENIZE` so that the characters
that join identifier parts stay inside a token.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache

TOKENIZER_VERSION = 1

#: Declaration for the FTS5 table: our stream is already tokenized; porter
#: folds English inflections (``timeouts`` → ``timeout``) identically on both sides.
FTS_TOKENIZE = "porter unicode61 remove_diacritics 2 tokenchars '-_./:'"

_HAN_RANGES = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
#: The CJK script as character-class ranges (kana, then Han and compatibility ideographs): the
#: index reads it as bigrams, and the chunker counts a token a character.
CJK_RANGES = "\u3040-\u30ff" + _HAN_RANGES
_HAN = re.compile(f"[{_HAN_RANGES}]")
# A run of CJK characters, or a word that may be a compound identifier (parts
# made of letters/digits joined by - _ . / :). Letters exclude CJK so that a
# CJK/ASCII boundary always splits.
_WORD = r"[^\W_" + CJK_RANGES + r"]"
_CJK_CHARACTER = re.compile(f"[{CJK_RANGES}]")
_SCAN = re.compile(
    rf"(?P<cjk>[{CJK_RANGES}]+)|(?P<word>_*{_WORD}+(?:[_\-./:]+{_WORD}+)*_*)",
)
#: Characters that join word parts into one identifier or path (``snake_case``, ``a/b.py``).
JOINERS = "_-./:"
#: What ``_SCAN`` finds in ASCII text, found without it: every character that can be neither in
#: a word nor join its parts becomes a space, so each field of ``split()`` holds one word, whose
#: core (what :func:`_word_tokens` keeps) is the field less the joining characters at its ends.
#: A field of joiners alone has no core and no tokens.
_ASCII_BREAKS = str.maketrans({chr(c): " " for c in range(128) if not (chr(c).isalnum() or chr(c) in JOINERS)})
#: A run of characters between ASCII breaks and whitespace (for text that is not all ASCII, where
#: ``str.translate`` with a table is twice as slow as this).
_FIELD = re.compile("[^" + re.escape("".join(map(chr, _ASCII_BREAKS))) + r"\s]+")
_ATOM = re.compile(rf"{_WORD}+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[^\W\d_]+")
MAX_TOKEN_CHARS = 64

_ENGLISH_STOPWORDS = frozenset(
    "a about above after again all also am an and any are as at be been before being below between both "
    "but by can could did do does doing done down during each few for from further had has have having he "
    "her here hers how i if in into is it its itself just last let me more most my no nor not now of off "
    "on once only or other our ours out over own please same she should so some such than that the their "
    "theirs them then there these they this those through to too under until up us very was we were what "
    "when where which while who whom why will with would you your yours yourself week weeks ago time "
    "times thing things way something anything tell remember recall earlier previous previously before "
    "did we decide"
    .split()
)
_CHINESE_STOP_BIGRAMS = frozenset(
    "我们 你们 他们 什么 怎么 怎样 如何 为什 为何 之前 以前 上次 上周 上个 那次 时候 一下 这个 那个 哪个 "
    "哪里 是不 不是 有没 没有 是否 一个 的是 了吗 吗的 当时 后来 最后 时间 我的 你的 的时 候的 的那 那些 "
    "这些 还是 就是 可以 能不 做了 做的 讨论 说过 决定 提到 说的 问题 处理 过的 过什 么时"
    .split()
)


@lru_cache(maxsize=1)
def _t2s():
    try:
        import opencc

        return opencc.OpenCC("t2s").convert
    except Exception:  # OpenCC missing or broken: keep characters as they are.
        return lambda text: text


_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub(text: str) -> str:
    """Lone surrogates (a JSON ``\\ud800`` escape decodes to one) cannot be encoded as UTF-8:
    SQLite, OpenCC and HTTP clients would all raise. They become U+FFFD."""
    return _SURROGATE.sub("\ufffd", text) if not text.isascii() else text


def normalize(text: str) -> str:
    """NFKC (full-width → ASCII), Traditional → Simplified; case is kept."""
    if text.isascii():
        return text
    text = unicodedata.normalize("NFKC", scrub(text))
    if _HAN.search(text):
        text = _t2s()(text)
    return text


@lru_cache(maxsize=65536)
def _cjk_grams(run: str) -> tuple[str, ...]:
    if len(run) == 1:
        return (run,)
    return tuple(run[i : i + 2] for i in range(len(run) - 1))


def _word_parts(word: str) -> list[str]:
    parts: list[str] = []
    for atom in _ATOM.findall(word):
        pieces = _CAMEL.findall(atom) if not atom.islower() else [atom]
        parts.extend(p.lower() for p in pieces if p)
    return parts


@lru_cache(maxsize=262144)
def _word_text(word: str) -> str:
    """Whole word (lowercased) followed by its parts when it has more than one, joined by
    spaces ("" when the word has no core). Cached: a history repeats its vocabulary, and this
    is the indexer's hot loop. The joining characters at the ends are not part of the word (a
    ``_SCAN`` word can only have ``_`` there)."""
    core = word.strip(JOINERS)
    if not core:
        return ""
    whole = core.lower()[:MAX_TOKEN_CHARS]
    parts = [p[:MAX_TOKEN_CHARS] for p in _word_parts(core)]
    if len(parts) <= 1 and parts == [whole]:
        return whole
    return " ".join((whole, *parts)) if parts else whole


def _word_tokens(word: str) -> list[str]:
    return _word_text(word).split()


def _scan(text: str) -> Iterator[tuple[str, str]]:
    for match in _SCAN.finditer(text):
        if match.group("cjk"):
            yield "cjk", match.group("cjk")
        else:
            yield "word", match.group("word")


def index_text(text: str) -> str:
    """What is written to the FTS5 table for ``text``: its tokens, separated by spaces (in places
    by several: FTS5 reads the same tokens, and joining each word's cached tokens is a fifth
    faster than joining the tokens)."""
    if not text:
        return ""
    if text.isascii():  # the loop over words in C: a long tool call holds thousands
        return " ".join(map(_word_text, text.translate(_ASCII_BREAKS).split()))
    # No token spans an ASCII break, so each field between them is tokenized alone, and cached
    # as words are (a third of the time of an M build's tokenizing was here, for a fifth of its
    # text): an ASCII field (code, a path, English beside Chinese) as a word, the others scanned.
    return " ".join(map(_field_text, _FIELD.findall(text)))


@lru_cache(maxsize=262144)
def _field_text(field: str) -> str:
    if field.isascii():
        return _word_text(field)
    return " ".join([" ".join(_cjk_grams(cjk)) if cjk else _word_text(word)
                     for cjk, word in _SCAN.findall(normalize(field))])


def index_tokens(text: str) -> list[str]:
    """The token stream written to the index for ``text`` (no token holds a space)."""
    return index_text(text).split()


def _quote(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


@dataclass(frozen=True)
class Unit:
    """One thing the query asks for: an FTS5 expression and the tokens that satisfy it.

    ``alternatives`` are token sequences; the unit is present in a text when any
    of them occurs there as consecutive tokens.
    """

    label: str
    alternatives: tuple[tuple[str, ...], ...]

    @property
    def fts(self) -> str:
        exprs = [_quote(" ".join(alt)) for alt in self.alternatives]
        return exprs[0] if len(exprs) == 1 else "(" + " OR ".join(exprs) + ")"


@dataclass(frozen=True)
class QueryPlan:
    """What a query asks the keyword index for.

    ``units`` are OR-ed for recall and ranked by BM25; ``substrings`` are
    single CJK characters, which no bigram can match, looked up with LIKE.
    """

    units: tuple[Unit, ...] = field(default_factory=tuple)
    substrings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def empty(self) -> bool:
        return not self.units and not self.substrings

    def match_any(self) -> str:
        return " OR ".join(u.fts for u in self.units)

    def match_all(self) -> str:
        return " AND ".join(u.fts for u in self.units)


#: Units a query keeps (its first ones): each costs the keyword search a lookup, and a long
#: Chinese question is all bigrams (a chat line of 60 characters has about 60 of them). 32 cut
#: most of MADial-Bench's Chinese questions (median 58 units) in half; 64 keeps them
#: (docs/benchmarks.md, "Stop 44").
MAX_QUERY_UNITS = 64
#: A question with more CJK units than this does not look for its lone CJK characters. In a few
#: words, or in an English sentence, a lone character may be what it asks about ("锁"); in a Chinese
#: sentence it is a particle between two commas ("我", "嗯") that most Chinese messages have, and no
#: index holds single characters, so looking for it reads every entry in scope: at M, 40 ms of a long
#: question's search for the same answers (MADial-Bench zh, docs/benchmarks.md, "Stop 45").
LONE_CHARACTER_UNITS = 8


def in_cjk_script(text: str) -> bool:
    """Whether ``text`` (a unit's label) has a Chinese or Japanese character."""
    return _CJK_CHARACTER.search(text) is not None


def plan_query(query: str) -> QueryPlan:
    """Turn a user's words into units: identifiers whole or as a phrase of their parts,
    CJK runs as their bigrams (plus the whole run as a phrase), words as themselves.
    Stop words are dropped unless nothing else is left."""
    units: list[Unit] = []
    substrings: list[str] = []
    stopped: list[Unit] = []
    seen: set[tuple[tuple[str, ...], ...]] = set()

    def add(unit: Unit, stop: bool) -> None:
        if unit.alternatives in seen:
            return
        seen.add(unit.alternatives)
        (stopped if stop else units).append(unit)

    for kind, run in _scan(normalize(query or "")[:2048]):
        if kind == "cjk":
            if len(run) == 1:
                substrings.append(run)
                continue
            grams = _cjk_grams(run)
            readable = [g for g in grams if _fts_reads(g)]
            for gram in readable:
                add(Unit(gram, ((gram,),)), gram in _CHINESE_STOP_BIGRAMS)
            if len(grams) > 1:
                content = [g for g in readable if g not in _CHINESE_STOP_BIGRAMS]
                if len(content) > 1:
                    add(Unit(run, (tuple(grams),)), False)
            continue
        tokens = _word_tokens(run)
        if not tokens:
            continue
        whole, parts = tokens[0], tuple(tokens[1:])
        alternatives = ((whole,), parts) if parts else ((whole,),)
        add(Unit(whole, alternatives), not parts and whole in _ENGLISH_STOPWORDS)
    if not units:
        units = stopped
    if sum(in_cjk_script(u.label) for u in units) > LONE_CHARACTER_UNITS:
        substrings = []
    return QueryPlan(tuple(units[:MAX_QUERY_UNITS]), tuple(dict.fromkeys(substrings))[:8])


def _fts_reads(gram: str) -> bool:
    """Whether FTS5's ``unicode61`` reads a term from ``gram``: it needs a letter or a digit. A
    katakana middle dot (``・``) is a separator to it and a lone sound mark (``゚``) a diacritic it
    removes, so a unit of only those would be a phrase of nothing, which matches nothing."""
    return any(unicodedata.category(char)[0] in "LN" for char in gram)


def contains_sequence(tokens: list[str], sequence: tuple[str, ...]) -> bool:
    n = len(sequence)
    if n == 1:
        return sequence[0] in tokens
    return any(tokens[i : i + n] == list(sequence) for i in range(len(tokens) - n + 1))


def matched_units(plan: QueryPlan, tokens: list[str]) -> list[Unit]:
    """The plan's units present in a token stream (for snippets and coverage)."""
    token_set = set(tokens)
    found = []
    for unit in plan.units:
        for alt in unit.alternatives:
            if token_set.issuperset(alt) and (len(alt) == 1 or contains_sequence(tokens, alt)):
                found.append(unit)
                break
    return found


#: ASCII whitespace that str.split() honours but the scan below does not look for: a text
#: holding any of it takes the full tokenization. Looked for one character at a time (``in``):
#: a character-class regex scans about 50 times slower, and search asks this of every candidate.
_RARE_SPACES = "\x0b\x0c\x1c\x1d\x1e\x1f"
#: Occurrences of a unit's first token a text may hold before it is tokenized whole instead.
_MAX_PROBES = 32
#: Characters that are neither ASCII, nor in a word, nor CJK (``→ ✓ — ’ …``): ``_SCAN`` skips them
#: as it skips a space, so a space in their place leaves the token stream as it is.
_SYMBOLS = re.compile(rf"[^\x00-\x7f\w{CJK_RANGES}]")


def units_in_text(units: tuple[Unit, ...], text: str) -> list[Unit]:
    """``matched_units(QueryPlan(units), index_tokens(text))``, without tokenizing the whole of a
    long text.

    Search asks this of every candidate entry, and a tool call can hold 32,000 characters of
    heredoc. In ASCII text a token is a lowercased substring of the text at the same place, and
    no token spans whitespace, so a unit can only be present where its first token occurs as a
    substring: only the words from there on are tokenized (the word holding the occurrence, from
    its whitespace on, and as many tokens after it as the unit has). Exact; other text (non-ASCII,
    where case folding and NFKC move characters) is tokenized whole, unless all it holds besides
    ASCII, once normalized, are symbols (an arrow or a check mark in a tool's output): those are
    spaces to the tokenizer, and the ASCII text with spaces in their place is looked at instead."""
    if not text.isascii():
        # (Han is not a symbol: its text is tokenized whole without converting it twice.)
        spaced = _SYMBOLS.sub(" ", normalize(text)) if not _HAN.search(text) else text
        if not spaced.isascii():
            return matched_units(QueryPlan(units), index_tokens(text))
        text = spaced
    if any(space in text for space in _RARE_SPACES):
        return matched_units(QueryPlan(units), index_tokens(text))
    lowered = text.lower()
    whole: list[str] | None = None
    found = []
    for unit in units:
        for alt in unit.alternatives:
            if alt[0] not in lowered or not all(token in lowered for token in alt[1:]):
                continue
            present = _sequence_at_occurrences(text, lowered, alt)
            if present is None:
                whole = whole if whole is not None else index_tokens(text)
                present = contains_sequence(whole, alt)
            if present:
                found.append(unit)
                break
    return found


def _sequence_at_occurrences(text: str, lowered: str, sequence: tuple[str, ...]) -> bool | None:
    """Whether ``sequence`` occurs in the token stream of ``text`` (ASCII), looking only where its
    first token occurs as a substring; None when it occurs too often to be worth it."""
    first, rest = sequence[0], len(sequence) - 1
    for probes, at in enumerate(_token_places(text, lowered, first), start=1):
        if probes > _MAX_PROBES:
            return None
        start = max(lowered.rfind(" ", 0, at), lowered.rfind("\n", 0, at), lowered.rfind("\t", 0, at),
                    lowered.rfind("\r", 0, at)) + 1
        tokens: list[str] = []
        needed = -1
        for match in _SCAN.finditer(text, start):
            if needed < 0 and match.start() > at:
                needed = len(tokens) + rest
            if needed >= 0 and len(tokens) >= needed:
                break
            tokens.extend(_word_tokens(match.group("word")))
        if contains_sequence(tokens, sequence):
            return True
    return False


def _token_places(text: str, lowered: str, token: str) -> Iterator[int]:
    """Where ``token`` occurs in ``lowered`` with :func:`_token_bounds` (``text`` is ASCII), in order."""
    if len(token) == 1 and token.isalnum():
        return (match.start() for match in _lone_character(token).finditer(text))
    return _bounded_finds(text, lowered, token)


def _bounded_finds(text: str, lowered: str, token: str) -> Iterator[int]:
    truncated = len(token) >= MAX_TOKEN_CHARS
    at = lowered.find(token)
    while at != -1:
        if _token_bounds(text, at, at + len(token), truncated):
            yield at
        at = lowered.find(token, at + 1)


@lru_cache(maxsize=64)
def _lone_character(char: str) -> re.Pattern[str]:
    """:func:`_token_bounds` for a one-character token as a pattern: its capital anywhere, itself
    outside a run of lowercase letters (of digits, for a digit). A query's ``s`` (``it's``) or
    ``t`` (``don't``) occurs thousands of times in a long output, almost always inside a word:
    the regex engine skips those in one scan, where a loop over each occurrence was most of some
    searches. The checks come after the character so that the scan looks for it like ``str.find``."""
    if char.isdigit():
        return re.compile(rf"{char}(?<![0-9]{char})(?![0-9])")
    return re.compile(rf"{char.upper()}|{char}(?<![a-z]{char})(?![a-z])")


def _token_bounds(text: str, start: int, end: int, truncated: bool) -> bool:
    """Whether ``text[start:end]`` (ASCII) may be a token: a token never starts or ends inside a
    run of lowercase letters or of digits (words, their atoms and their camel-case pieces all take
    such runs whole), unless it was cut to :data:`MAX_TOKEN_CHARS`."""
    if start > 0 and _inside(text[start - 1 : start + 1]):
        return False
    return truncated or end >= len(text) or not _inside(text[end - 1 : end + 1])


def _inside(pair: str) -> bool:
    """Whether two adjacent characters are in one run of lowercase letters or of digits."""
    return (pair.islower() and pair.isalpha()) or pair.isdigit()


def idf(total_docs: int, doc_freq: int) -> float:
    return math.log(1.0 + (total_docs - doc_freq + 0.5) / (doc_freq + 0.5))
