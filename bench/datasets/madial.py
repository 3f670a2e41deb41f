"""MADial-Bench (Chinese) → evaluation sets: a child's remembered events and the chats that recall them.

Source: github.com/hejunqing/MADial-Bench (He et al., "MADial-Bench: Towards Real-world Evaluation of
Memory-Augmented Dialogue Generation", NAACL 2025), MIT licence ("Copyright (c) 2025 Nicole"),
files ``data/ch/MADial-Bench-zh-memory.json`` (171 dated events of two users, Bart and Lisa: "Bart在海边
放风筝，感到非常开心。") and ``data/ch/MADial-Bench-zh-dialogue.json`` (160 Chinese chats of a user with
an assistant, in each of which the assistant's ``test-turn`` recalls an event; ``relevant-id`` lists the
related events, the recalled one first). It is the Chinese set issue 14 asked for: public data nobody
here wrote, with gold that can be read off. What it is not: an agent's history. The benchmark's authors
wrote it (with model help) to test a companion bot's memory, an event is one sentence, and a chat asks
for its memory by topic, never by a word of a question ("你还记得…吗" is the assistant's line, not the
user's). The held-out set is small (73 KB) and MIT-licensed, so it is committed as
``bench/datasets/madial-zh-heldout.json`` (with its ``.LICENSE``) for CI's recall gate; the tune
set stays in ``bench/out/real/``.

Mapping:
* project = one user (``user-id``; the name from the chats' speaker tags), folder ``/home/dev/madial/<name>``;
* session = one event: a single user message, the event's text verbatim, said at noon UTC of its
  ``time``; cwd = the project folder; one empty "asking" session per project, one day after its last event;
* query = the user's lines of a chat before its first ``test-turn`` (the assistant's are left out: they
  are the bot's small talk), joined by spaces, asked from the project's asking session; gold_sessions =
  the first ``relevant-id`` (the event the test turn recalls; the others are related events, e.g. other
  parties for a party); no gold_messages (a session is one message); lang ``zh``; category = the gold
  event's ``scene`` (活动类 activity, 喜好类 preference, 情绪类 emotion, 物品类 object, 其他类 other);
* withheld (negative controls): events with ``stable_hash("madial", id) % 7 == 0`` are left out; a
  chat recalling one becomes a negative (category ``withheld``: the same child, related events, but
  not the one recalled); plus 6 positive chats per project from the other user, of the same split,
  asked from this project (``other-project``);
* split (fixed): by chat, ``stable_hash("madial-split", chat id) % 2`` → tune (0) / held-out (1); both
  files carry every kept event (the same corpus), each its own half of the chats.

Command (deterministic; reads the fetched snapshot, a bare git dir, or a checkout)::

    python -m bench.datasets.madial [--source /work/.mirror/hejunqing+MADial-Bench/repo] [--out bench/out/real]
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

from .realcommon import MIRRORS, Snapshot, converter_arguments, foreign_control, session_id, stable_hash, write_set

DEFAULT_SOURCE = MIRRORS / "hejunqing+MADial-Bench" / "repo"
MEMORY_FILE = "data/ch/MADial-Bench-zh-memory.json"
DIALOGUE_FILE = "data/ch/MADial-Bench-zh-dialogue.json"
SCENES = {"活动类": "activity", "喜好类": "preference", "情绪类": "emotion", "物品类": "object", "其他类": "other"}
WITHHOLD_MOD = 7
OTHER_PROJECT_QUERIES = 6
DAY = 86400.0
ASSISTANT = "Assistant"
_LINE = re.compile(r"^\s*<(?P<who>[^<>]+)>\s*[:：]\s*(?P<text>.*?)\s*$", re.S)


def _json_lines(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]


def _said_at(day: str) -> float:
    return datetime.strptime(day.strip(), "%Y-%m-%d").replace(hour=12, tzinfo=UTC).timestamp()


def chat_lines(dialogue: list[str]) -> list[tuple[str, str]]:
    """``(speaker, text)`` of each turn, in the dialogue's own indexing (``<BOD>`` / ``<EOD>``
    kept as empty turns, so that ``test-turn`` indexes this list); quotes around a line dropped."""
    lines = []
    for raw in dialogue:
        match = _LINE.match(raw)
        if match is None:
            lines.append(("", ""))
            continue
        text = match["text"].strip().strip('"“”').strip()
        lines.append((match["who"].strip(), text))
    return lines


def convert(source: Path, out: Path) -> dict:
    snap = Snapshot(source)
    events = {str(key): value for entry in _json_lines(snap.read(MEMORY_FILE)) for key, value in entry.items()}
    chats = _json_lines(snap.read(DIALOGUE_FILE))
    turns = [chat_lines(chat["dialogue"]) for chat in chats]
    names: dict[int, str] = {}
    for chat, lines in zip(chats, turns, strict=True):
        who = next((w for w, _ in lines if w and w != ASSISTANT), None)
        if who:
            names.setdefault(int(chat["user-id"]), who)
    projects: dict[int, dict] = {}
    asking: dict[int, dict] = {}
    sessions: list[dict] = []
    session_of: dict[str, str] = {}
    withheld: set[str] = set()
    for user in sorted(names):
        folder = f"/home/dev/madial/{names[user].lower()}"
        projects[user] = {"name": f"madial-{names[user].lower()}", "folders": [folder], "primary_path": folder}
        mine = sorted((key for key, e in events.items() if int(e["user-id"]) == user), key=int)
        last = 0.0
        for key in mine:
            said = _said_at(events[key]["time"])
            last = max(last, said)
            if stable_hash("madial", key) % WITHHOLD_MOD == 0:
                withheld.add(key)
                continue
            sid = session_id(said, "madial", key)
            session_of[key] = sid
            message = {"role": "user", "content": events[key]["event"].strip(), "timestamp": said}
            sessions.append({"id": sid, "source": "cli", "cwd": folder, "started_at": said, "messages": [message]})
        asked = last + DAY
        asking[user] = {"id": session_id(asked, "madial", user, "asking"), "source": "cli", "cwd": folder,
                        "started_at": asked, "messages": []}
    splits: dict[str, dict[int, list[dict]]] = {"tune": {u: [] for u in names}, "heldout": {u: [] for u in names}}
    dropped = 0
    for n, (chat, lines) in enumerate(zip(chats, turns, strict=True)):
        user, relevant = int(chat["user-id"]), chat.get("relevant-id") or []
        first_test = min(chat.get("test-turn") or [len(lines)])
        text = " ".join(t for w, t in lines[:first_test] if w and w != ASSISTANT and t)
        gold = str(relevant[0]) if relevant else None
        if user not in names or not text or gold not in events:
            dropped += 1
            continue
        kept = gold not in withheld
        query = {"id": f"madial-zh-{chat.get('id', n)}", "query": text, "current_session": asking[user]["id"],
                 "gold_sessions": [session_of[gold]] if kept else [], "lang": "zh",
                 "category": SCENES.get(events[gold]["scene"], "other") if kept else "withheld"}
        split = "tune" if stable_hash("madial-split", query["id"]) % 2 == 0 else "heldout"
        splits[split][user].append(query)
    for by_user in splits.values():
        for user in names:
            others = [q for other, qs in by_user.items() if other != user for q in qs if q["gold_sessions"]]
            pool = sorted(others, key=lambda q: stable_hash("other", user, q["id"]))[:OTHER_PROJECT_QUERIES]
            by_user[user] += [foreign_control(q, projects[user]["name"], asking[user]["id"], "other-project")
                              for q in pool]
    report = {"source": str(source), "commit": snap.head(), "events": len(events), "withheld_events": len(withheld),
              "dropped_chats": dropped}
    for split, by_user in splits.items():
        report[split] = write_set(out / f"madial-zh-{split}.json", f"madial-zh-{split}",
                                  [projects[u] for u in sorted(names)], sessions + [asking[u] for u in sorted(names)],
                                  [q for u in sorted(names) for q in by_user[u]])
    return report


def main(argv: list[str] | None = None) -> int:
    args = converter_arguments(__doc__, DEFAULT_SOURCE).parse_args(argv)
    print(json.dumps(convert(args.source, args.out), indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
