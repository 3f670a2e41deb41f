"""The MADial-Bench converter maps events to sessions and chats to queries as its docstring says
(a small snapshot in MADial's own file layout, written here)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.datasets.madial import DIALOGUE_FILE, MEMORY_FILE, WITHHOLD_MOD, convert
from bench.datasets.realcommon import stable_hash
from bench.evalset import EvalSet


def _withheld(key: str) -> bool:
    return stable_hash("madial", key) % WITHHOLD_MOD == 0


def _snapshot(root: Path) -> tuple[str, str]:
    """Twenty events per user and a chat recalling each; returns a kept and a withheld event id."""
    memory, dialogue = [], []
    for n in range(1, 41):
        user = 1 if n <= 20 else 2
        name = "Bart" if user == 1 else "Lisa"
        event = f"{name}在动物园看到了第{n}只大熊猫，感到非常开心。"
        memory.append({str(n): {"time": f"2023-05-{n % 28 + 1:02d}", "scene": "喜好类", "emotion": "开心",
                                "event": event, "user-id": user, "id": str(n)}})
        dialogue.append({"dialogue": ["<BOD>\n", f'<{name}>:"我今天又想起了大熊猫{n}！"\n',
                                      '<Assistant>:"真的吗？你喜欢什么动物？"\n', f'<{name}>: "我最喜欢熊猫。"\n',
                                      '<Assistant>:"你还记得上次在动物园看到大熊猫吗？"\n', "<EOD>\n"],
                         "test-turn": [4], "relevant-id": [n, n % 40 + 1], "user-id": user, "id": n})
    (root / MEMORY_FILE).parent.mkdir(parents=True)
    (root / MEMORY_FILE).write_text("\n".join(json.dumps(m, ensure_ascii=False) for m in memory), encoding="utf-8")
    (root / DIALOGUE_FILE).write_text("\n".join(json.dumps(d, ensure_ascii=False) for d in dialogue), encoding="utf-8")
    kept = next(str(n) for n in range(1, 21) if not _withheld(str(n)))
    withheld = next(str(n) for n in range(1, 41) if _withheld(str(n)))
    return kept, withheld


def test_madial_events_become_sessions_and_chats_become_queries(tmp_path: Path) -> None:
    kept, withheld = _snapshot(tmp_path / "src")
    report = convert(tmp_path / "src", tmp_path / "out")
    tune = EvalSet.load(tmp_path / "out" / "madial-zh-tune.json")
    heldout = EvalSet.load(tmp_path / "out" / "madial-zh-heldout.json")
    assert report["events"] == 40 and report["dropped_chats"] == 0
    assert [p["name"] for p in tune.projects] == ["madial-bart", "madial-lisa"]
    assert tune.sessions == heldout.sessions  # one corpus, the chats split between the two files
    events = [s for s in tune.sessions if s["messages"]]
    assert len(events) == 40 - report["withheld_events"]
    assert all(len(s["messages"]) == 1 and s["messages"][0]["role"] == "user" for s in events)

    queries = {q.id: q for q in tune.queries + heldout.queries}
    asked = queries[f"madial-zh-{kept}"]
    assert asked.query == f"我今天又想起了大熊猫{kept}！ 我最喜欢熊猫。"  # the user's lines only, before the test turn
    (gold,) = asked.gold_sessions
    (gold_session,) = [s for s in events if s["id"] == gold]
    assert gold_session["messages"][0]["content"] == f"Bart在动物园看到了第{kept}只大熊猫，感到非常开心。"
    assert gold_session["started_at"] % 86400 == 12 * 3600  # said at noon UTC of the event's day
    assert (asked.lang, asked.category) == ("zh", "preference")
    bart_asking = asked.current_session
    assert not next(s for s in tune.sessions if s["id"] == bart_asking)["messages"]

    recalls_withheld = queries[f"madial-zh-{withheld}"]
    assert not recalls_withheld.gold_sessions and recalls_withheld.category == "withheld"
    foreign = [q for q in queries.values() if q.category == "other-project"]
    assert foreign and all(not q.gold_sessions and q.lang == "zh" for q in foreign)
    for q in foreign:  # a chat of one child asked from the other's asking session
        source = queries[q.id.split("-asked-in-")[0]]
        assert q.current_session != source.current_session and q.query == source.query
    assert len(queries) == 40 + len(foreign)
    assert {q.id for q in tune.queries}.isdisjoint(q.id for q in heldout.queries)
