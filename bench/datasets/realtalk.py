"""REALTALK → evaluation sets (real multi-session English conversations, session- and message-level gold).

Source: github.com/danny911kr/REALTALK (Lee et al., "REALTALK: A 21-Day Real-World Dataset for
Long-Term Conversation", arXiv 2502.13270). Real messaging-app chats between paid human
participants over 21 days: 10 conversations, 18-25 sessions each, 8,944 messages, 728 memory-probing
questions with evidence message ids. Licence: the repository states none (no LICENSE file, no
licence in the README), so the converted sets are only written locally to ``bench/out/real/``
and never committed; only this converter is.

ONLY ``data/Chat_*.json`` is read. The repository also carries a split copy of LoCoMo under
``data/locomo/`` — LoCoMo is reserved as the project's external check, so this converter refuses
any path containing ``locomo``.

Mapping:
* project = one conversation (``Chat_N_A_B``), folder ``/home/dev/realtalk/chat-N``;
* session = one ``session_k`` (a day of chat); its messages in order, the first speaker as
  ``user`` and the second as ``assistant`` (text = ``clean_text``, plus ``[image: caption]`` when
  the message had a photo); ``timestamp`` from each message's ``date_time``, ``started_at`` from
  ``session_k_date_time``; cwd = the project folder;
* one empty "asking" session per project, dated one day after its last session: every query is
  asked from it (``current_session``);
* query = the dataset's question text, unchanged; gold_sessions = the sessions holding its
  evidence messages (``evidence`` dia_ids, e.g. ``D3:12``, looked up by id since the ids' ``D``
  number is not the session number), gold_messages = those messages; category from the dataset:
  1 → ``multi-hop``, 2 → ``temporal``, 3 → ``inference``; questions whose evidence resolves to no
  message are dropped (counted in the report);
* withheld sessions (negative controls): in every conversation the sessions with
  ``stable_hash(project, session) % 7 == 0`` are left out of the set. A question whose evidence
  lies only in withheld sessions becomes a negative (``gold_sessions: []``, category
  ``withheld``); one with evidence partly withheld keeps the rest as gold.
  Also 6 questions per project taken from the next conversation of the same split (cyclic, in
  conversation order) that shares neither speaker with this one, and asked here, category
  ``other-project``, gold empty. (The same people chat in several conversations at once about the
  same days: a question about a speaker of this conversation is often answered here too, so it is
  no control. And a held-out conversation's question asked in a tune project would be held-out
  data used in tuning.) Held-out projects also get 6 questions from the next tune conversation
  whose speakers are in no held-out conversation, category ``nowhere``: people and a topic no
  project of the held-out home talks about (the tune split has no such kind: only held-out
  questions could supply it);
* split (fixed): the 10 conversations sorted by ``stable_hash(name)``; the first 5 are the tune
  split (``realtalk-tune.json``), the other 5 held out (``realtalk-heldout.json``).

Command (deterministic; reads the fetched snapshot, a bare git dir, or a checkout)::

    python -m bench.datasets.realtalk [--source /work/.mirror/danny911kr+REALTALK/repo] [--out bench/out/real]
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

from .realcommon import MIRRORS, Snapshot, converter_arguments, foreign_control, session_id, stable_hash, write_set

DEFAULT_SOURCE = MIRRORS / "danny911kr+REALTALK" / "repo"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "inference"}
WITHHOLD_MOD = 7
OTHER_PROJECT_QUERIES = 6
DAY = 86400.0


def _when(text: str) -> float:
    return datetime.strptime(text.strip(), "%d.%m.%Y, %H:%M:%S").replace(tzinfo=UTC).timestamp()


def _dia(text: str) -> str:
    return re.sub(r"[^\w:]", "", str(text)).strip()


def convert_chat(name: str, chat: dict, index: int) -> dict:
    """One conversation → its project, sessions (kept and withheld) and positive/withheld queries."""
    folder = f"/home/dev/realtalk/chat-{index}"
    project = {"name": f"realtalk-{name}", "folders": [folder], "primary_path": folder}
    speakers = chat.get("name") or {}
    first = speakers.get("speaker_1")
    keys = sorted((k for k in chat if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1]))
    sessions, where, withheld, last = [], {}, set(), 0.0
    for key in keys:
        turns = chat[key]
        if not turns:
            continue
        started = _when(chat.get(f"{key}_date_time") or turns[0]["date_time"])
        sid = session_id(started, "realtalk", name, key)
        messages = []
        for i, turn in enumerate(turns):
            text = turn["clean_text"].strip()
            if turn.get("blip_caption"):
                text = f"{text}\n[image: {turn['blip_caption']}]".strip()
            role = "user" if turn["speaker"] == (first or turns[0]["speaker"]) else "assistant"
            messages.append({"role": role, "content": text or "[image]", "timestamp": _when(turn["date_time"])})
            where.setdefault(_dia(turn["dia_id"]), (sid, i))
            last = max(last, messages[-1]["timestamp"])
        session = {"id": sid, "source": "cli", "cwd": folder, "started_at": started, "messages": messages}
        if stable_hash(project["name"], key) % WITHHOLD_MOD == 0:
            withheld.add(sid)
        sessions.append(session)
    asking_at = last + DAY
    asking = {"id": session_id(asking_at, "realtalk", name, "asking"), "source": "cli", "cwd": folder,
              "started_at": asking_at, "messages": []}
    queries, dropped = [], 0
    for n, qa in enumerate(chat.get("qa") or []):
        evidence = [where[_dia(e)] for e in qa.get("evidence") or [] if _dia(e) in where]
        if not evidence or not str(qa.get("question") or "").strip():
            dropped += 1
            continue
        kept = [(sid, i) for sid, i in evidence if sid not in withheld]
        gold_sessions = list(dict.fromkeys(sid for sid, _ in kept))
        query = {"id": f"realtalk-{index}-q{n}", "query": qa["question"].strip(), "current_session": asking["id"],
                 "gold_sessions": gold_sessions, "lang": "en",
                 "category": CATEGORIES.get(qa.get("category"), f"cat{qa.get('category')}") if kept else "withheld"}
        if kept:
            query["gold_messages"] = [list(p) for p in dict.fromkeys(kept)]
        queries.append(query)
    kept_sessions = [s for s in sessions if s["id"] not in withheld] + [asking]
    return {"project": project, "sessions": kept_sessions, "queries": queries, "asking": asking["id"],
            "dropped": dropped, "withheld": len(withheld), "name": name, "index": index,
            "speakers": {str(who).split()[0].lower() for who in speakers.values() if str(who).strip()}}


def add_foreign_controls(askers: list[dict], sources: list[dict], category: str) -> None:
    """Negatives for each conversation of ``askers``: questions of the next conversation of
    ``sources`` (cyclic, in conversation order) with other people, asked from its asking session."""
    for chat in askers:
        later = sorted((c for c in sources if c is not chat), key=lambda c: (c["index"] < chat["index"], c["index"]))
        other = next((c for c in later if not c["speakers"] & chat["speakers"]), None)
        if other is None:
            raise SystemExit(f"{chat['name']}: no conversation without its speakers {sorted(chat['speakers'])}: "
                             f"cannot pick its {category} controls")
        pool = sorted((q for q in other["queries"] if q["gold_sessions"]),
                      key=lambda q: stable_hash("other", chat["name"], q["id"]))[:OTHER_PROJECT_QUERIES]
        chat["queries"] += [foreign_control(q, chat["name"], chat["asking"], category) for q in pool]


def convert(source: Path, out: Path) -> dict:
    snap = Snapshot(source)
    files = [p for p in snap.list("data") if re.fullmatch(r"data/Chat_\d+_[^/]+\.json", p)]
    if not files or any("locomo" in p.lower() for p in files):
        raise SystemExit("no REALTALK chats found (or a LoCoMo path slipped in)")
    chats = []
    for path in sorted(files, key=lambda p: int(re.search(r"Chat_(\d+)_", p).group(1))):
        index = int(re.search(r"Chat_(\d+)_", path).group(1))
        name = Path(path).stem
        chats.append(convert_chat(name, json.loads(snap.read(path)), index))
    order = sorted(chats, key=lambda c: stable_hash("realtalk-split", c["name"]))
    half = len(order) // 2
    splits = (("tune", order[:half]), ("heldout", order[half:]))
    tune, heldout = (sorted(part, key=lambda c: c["index"]) for _, part in splits)
    for part in (tune, heldout):
        add_foreign_controls(part, part, "other-project")
    heldout_speakers = set().union(*(h["speakers"] for h in heldout))
    strangers = [c for c in tune if not c["speakers"] & heldout_speakers]
    add_foreign_controls(heldout, strangers, "nowhere")
    report = {"source": str(source), "commit": snap.head(),
              "dropped_questions": sum(c["dropped"] for c in chats),
              "withheld_sessions": sum(c["withheld"] for c in chats)}
    for split, part in splits:
        report[split] = write_set(out / f"realtalk-{split}.json", f"realtalk-{split}",
                                  [c["project"] for c in part], [s for c in part for s in c["sessions"]],
                                  [q for c in part for q in c["queries"]])
        report[split]["chats"] = [c["name"] for c in part]
    return report


def main(argv: list[str] | None = None) -> int:
    args = converter_arguments(__doc__, DEFAULT_SOURCE).parse_args(argv)
    print(json.dumps(convert(args.source, args.out), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
