"""Which message a result shows (pure: no I/O).

A result is a session; the message it shows should be the one that answers (issue 14,
item 4). Among the session's candidate messages (its keyword and semantic hits) the
shown one has the best evidence::

    bm25 / max bm25  +  DENSE · minmax(cos)  +  NEW_UNITS · new units / query units
                     +  LENGTH · log1p(min(chars, CAP)) / 6  +  voice

BM25 and cosine are normalised over the query's whole candidate lists (a source that
misses a message gives 0; in keyword mode no message has a cosine, in semantic mode none has a
BM25 and the cosine weighs :data:`SEMANTIC_ALONE`). ``new units`` are the query units the
message matches that none of the :data:`LOOK_BACK` (two) messages just before it in its
session matches: a reply that echoes the line before it repeats the question's words
("Cooking desserts, especially with family...") while the line that brought them up is the
one that answers ("I love cooking too, especially desserts"). The length term is there because BM25's length
normalisation favours the shortest line that repeats a query word ("skiing?", "Hey
Kate!"), while the line that answers usually says more; the cap keeps a 30,000-character
tool output from winning on length alone.
The voice term (:func:`voice`, user and assistant lines only) adds :data:`SPEAKER` to a line
in the first person ("I", "my", "we") and takes :data:`NEXT_STEP` from one that announces
what its speaker does next ("I'll", "let me"). What a history is asked is what someone said
about themselves or the work ("my cat's name is Souffle", "we decided on Postgres"); an
agent's narration of its next step ("Let me check the file") repeats the task's words and
answers nothing. The first-person bonus alone helped conversations and cost the coding sets,
whose agent lines say "I'll..." (docs/benchmarks.md, Stop 40); with the narration penalty
both gain. The words are English: no set here measures another language's.
A result shows the best message and, as ``also``, the next best (a session's evidence is
often split over two lines: the question's topic in one, its answer in another). The
weights were chosen on the REALTALK tune split by ``python -m bench.message_study``, the
voice's with swe-small tune as a guard (``bench/REAL_SETS.md``, "Shown message: the line that
brings the words up" and "…the speaker's voice"); held-out figures are in ``docs/benchmarks.md``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from project_history_recall.search.fusion import normalize_by_max, normalize_minmax

K = TypeVar("K", bound=Hashable)

DENSE = 0.25
NEW_UNITS = 0.5
#: How many messages just before a candidate count for its new units.
LOOK_BACK = 2
LENGTH = 1.5
#: The cosine's weight in semantic mode: it takes BM25's place (weight 1), the length and the voice
#: as in the others. On the tune splits this lifts the choice above the bare best cosine, and 0.75–1.5
#: tie (``python -m bench.message_study collect --mode semantic``, then ``study``;
#: bench/REAL_SETS.md, "Shown message in keyword and semantic mode").
SEMANTIC_ALONE = 1.0
SPEAKER = 0.4
NEXT_STEP = 0.3
#: Characters beyond which a message's length stops counting.
LENGTH_CAP = 1000


_APOSTROPHE = "['\u2019]"  # a chat's apostrophe is as often the typographic one
#: the bare pronoun only as a capital "I": a lower-case "i" is as often a loop variable in pasted code
_CAPITAL_I = re.compile(r"\bI\b")
# the two below are matched against the lower-cased text: a case-insensitive alternation is slower
_FIRST_PERSON = re.compile(rf"\b(?:i{_APOSTROPHE}(?:m|ve|d)|my|me|mine|we|we{_APOSTROPHE}(?:re|ve)|our|us)\b")
_NEXT_STEP = re.compile(
    rf"\b(?:i{_APOSTROPHE}ll|i will|i{_APOSTROPHE}m going to|i need to|let me|let{_APOSTROPHE}s|i see)\b")


def in_first_person(text: str) -> bool:
    return _CAPITAL_I.search(text) is not None or _FIRST_PERSON.search(text.lower()) is not None


def announces_next_step(text: str) -> bool:
    return _NEXT_STEP.search(text.lower()) is not None


def voice(text: str) -> float:
    """The voice term of a user or assistant line (module doc)."""
    return SPEAKER * in_first_person(text) - NEXT_STEP * announces_next_step(text)


def length_prior(chars: int) -> float:
    """``log1p(min(chars, cap)) / 6``: about 0.5 for a 20-character line, 1.15 at the cap."""
    return math.log1p(min(max(chars, 0), LENGTH_CAP)) / 6.0


@dataclass(frozen=True)
class Evidence(Generic[K]):
    """The evidence of a query's candidate messages (:func:`message_evidence`), the new-units and
    voice terms left to :meth:`score`: working them out reads the message's text (and tokenizes
    the two before it again), so :func:`shown_messages` asks for them only where they could
    change the choice."""

    #: ``bm25 / max bm25 + dense · minmax(cos)`` per candidate (:func:`message_evidence`)
    partial: dict[K, float]
    chars: Mapping[K, int]

    def score(self, key: K, new_units: float, voice_term: float) -> float:
        """``new_units`` the share of the query's units the message brings up (0–1),
        ``voice_term`` its :func:`voice`."""
        return (self.partial.get(key, 0.0) + NEW_UNITS * new_units + voice_term
                + LENGTH * length_prior(self.chars.get(key, 0)))


def message_evidence(keyword: Mapping[K, float], semantic: Mapping[K, float], chars: Mapping[K, int],
                     dense: float = DENSE) -> Evidence[K]:
    """Evidence of every candidate message (see the module doc): ``keyword`` BM25 (higher is
    better), ``semantic`` cosines at weight ``dense``, ``chars`` each message's length. Keys are
    those of ``keyword`` and ``semantic``. Semantic mode, which has no BM25, passes
    :data:`SEMANTIC_ALONE`."""
    kw = normalize_by_max(keyword)
    if max(keyword.values(), default=0.0) <= 0:
        kw = dict.fromkeys(kw, 0.0)
    sem = normalize_minmax(semantic)
    partial = {key: kw.get(key, 0.0) + dense * sem.get(key, 0.0) for key in {**dict.fromkeys(kw), **dict.fromkeys(sem)}}
    return Evidence(partial, chars)


def shown_messages(keys: Sequence[K], evidence: Evidence[K], new_units_of: Callable[[K], float],
                   voice_of: Callable[[K], float], n: int = 1) -> list[K]:
    """The ``n`` keys of ``keys`` with the best evidence, best first (the first of equals first).
    ``voice_of(key)`` (the message's :func:`voice`, 0 for a tool call or a title) and
    ``new_units_of(key)`` (the share of the query's units the message brings up, 0–1: see the
    module doc) are asked best bound first, the dearer ``new_units_of`` last, and no more once a
    message's score with every unit new and the best voice falls below the ``n``-th best found:
    it cannot be among them."""
    order = {key: i for i, key in enumerate(keys)}
    bound = {key: evidence.score(key, 1.0, SPEAKER) for key in keys}
    found: list[tuple[float, int, K]] = []
    for key in sorted(keys, key=lambda k: (-bound[k], order[k])):
        if len(found) >= n and bound[key] < -found[n - 1][0]:
            break
        spoken = voice_of(key)
        if len(found) >= n and evidence.score(key, 1.0, spoken) < -found[n - 1][0]:
            continue
        found.append((-evidence.score(key, new_units_of(key), spoken), order[key], key))
        found.sort()
    return [key for _, _, key in found[:n]]
