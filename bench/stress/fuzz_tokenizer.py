"""Coverage-guided fuzzing of the tokenizer and the query builder (atheris).

``python -m bench.stress.fuzz_tokenizer --seconds 60 --out bench/out/fuzz-tokenizer.json``

Each input is decoded into text (with or without lone surrogates) and goes through
``tokenizer.index_tokens`` / ``index_text`` (what the indexer writes) and
``plan_query`` (what a search asks), and the plan's ``match_any()`` runs through a
real FTS5 table declared exactly like the index's. A *crash* is any exception from
the tokenizer or the query builder, or an FTS5 error on a plan's MATCH expression
(the plan must never be able to produce FTS5 syntax the engine rejects). Two more
properties are counted, not crashed on: a token that would not survive the
space-joined stream (empty, or with whitespace), and a text that does not find
itself (its own query plan does not match its own indexed stream).

Crashes are caught and recorded (signature, count, first input saved under the
output's ``-crashes`` folder) so the whole budget runs; the figures are written to
``--out`` every second and at the end. Without atheris (not a CI dependency:
``pip install atheris``) the same checks run over a seeded random generator.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import sys
import time
import traceback
from pathlib import Path
from typing import Any

try:
    import atheris
except ImportError:  # pragma: no cover - the fallback engine
    atheris = None

if atheris is not None:
    with atheris.instrument_imports(include=["project_history_recall"]):
        from project_history_recall import tokenizer
else:
    from project_history_recall import tokenizer

STATS: dict[str, Any] = {"engine": "atheris" if atheris else "random", "inputs": 0, "crashes": 0,
                         "crash_signatures": {}, "fts_syntax_errors": 0, "bad_tokens": 0, "self_misses": 0,
                         "self_miss_examples": [], "started": time.time()}
OUT: Path | None = None
CRASH_DIR: Path | None = None
_last_write = 0.0
_conn = sqlite3.connect(":memory:")
_conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(tokens, tokenize=\"{tokenizer.FTS_TOKENIZE}\")")


DEADLINE = [float("inf")]


def write_stats(force: bool = False) -> None:
    """Every second, and every 50 ms in the last two (libFuzzer ends the process without
    returning, so the last write before the deadline is the final figure)."""
    global _last_write
    now = time.time()
    every = 0.05 if now > DEADLINE[0] - 2.0 else 1.0
    if OUT is None or (not force and now - _last_write < every):
        return
    _last_write = now
    data = {**STATS, "seconds": round(now - STATS["started"], 1)}
    tmp = OUT.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=True), encoding="utf-8")
    os.replace(tmp, OUT)


def _record_crash(exc: BaseException, data: bytes, where: str) -> None:
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    signature = f"{where}: {type(exc).__name__} at {Path(frame.filename).name}:{frame.lineno}" if frame else where
    STATS["crashes"] += 1
    entry = STATS["crash_signatures"].setdefault(signature, {"count": 0, "message": str(exc)[:300]})
    entry["count"] += 1
    if entry["count"] == 1 and CRASH_DIR is not None:
        CRASH_DIR.mkdir(parents=True, exist_ok=True)
        (CRASH_DIR / f"crash-{len(STATS['crash_signatures']):03d}").write_bytes(data)


def _texts(data: bytes) -> tuple[str, str]:
    if atheris is not None:
        fdp = atheris.FuzzedDataProvider(data)
        mode = fdp.ConsumeIntInRange(0, 3)
        size = fdp.ConsumeIntInRange(0, 4096)
        first = fdp.ConsumeUnicode(size) if mode == 0 else fdp.ConsumeUnicodeNoSurrogates(size)
        second = fdp.ConsumeUnicodeNoSurrogates(fdp.remaining_bytes()) if mode == 3 else first
        return first, second
    # surrogateescape turns each byte that is not UTF-8 into a lone surrogate (and never raises,
    # unlike surrogatepass, which stopped the whole run at its first invalid byte)
    text = data.decode("utf-8", "surrogateescape" if data[:1] == b"\x00" else "replace")
    return text, text


def one_input(data: bytes) -> None:
    STATS["inputs"] += 1
    text, query = _texts(data)
    try:
        tokens = tokenizer.index_tokens(text)
        stream = tokenizer.index_text(text)
        plan = tokenizer.plan_query(query)
        expression = plan.match_any() if plan.units else ""
        plan.match_all()
        tokenizer.matched_units(plan, tokens)
    except Exception as exc:
        _record_crash(exc, data, "tokenizer")
        write_stats()
        return
    if any(not t or any(c.isspace() for c in t) for t in tokens):
        STATS["bad_tokens"] += 1
    if expression:
        try:
            _conn.execute("DELETE FROM t")
            _conn.execute("INSERT INTO t(rowid, tokens) VALUES (1, ?)", (stream.encode("utf-8", "replace").decode(
                "utf-8", "replace"),))
            found = _conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,)).fetchall()
        except sqlite3.OperationalError as exc:
            STATS["fts_syntax_errors"] += 1
            _record_crash(exc, data, "fts5 MATCH")
            write_stats()
            return
        except UnicodeEncodeError as exc:  # a lone surrogate reaching SQLite
            _record_crash(exc, data, "fts5 bind")
            write_stats()
            return
        if query == text and not found:
            STATS["self_misses"] += 1
            if len(STATS["self_miss_examples"]) < 10:
                STATS["self_miss_examples"].append(ascii(text[:200]))
    write_stats()


SEEDS = ["我今天在改广告SDK", "retry_policy RetryPolicy settings-prod.yaml", '"AND" OR NEAR(a b) ^x *', "廣告點擊率",
         "ﾃｽﾄ ＡＢＣ déjà vu", "E_TIMEOUT src/foo/bar.py:42", "a" * 300, "ー〜・", "x.y.z:/a-b_c"]


def main(argv: list[str] | None = None) -> int:
    global OUT, CRASH_DIR
    parser = argparse.ArgumentParser(prog="python -m bench.stress.fuzz_tokenizer")
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--out", type=Path, default=Path("bench/out/fuzz-tokenizer.json"))
    parser.add_argument("--seed", type=int, default=1)
    args, rest = parser.parse_known_args(argv)
    DEADLINE[0] = time.time() + args.seconds
    STATS["budget_seconds"] = args.seconds
    OUT = args.out
    OUT.parent.mkdir(parents=True, exist_ok=True)
    CRASH_DIR = OUT.with_name(OUT.stem + "-crashes")
    corpus = OUT.with_name(OUT.stem + "-corpus")
    corpus.mkdir(exist_ok=True)
    for i, seed in enumerate(SEEDS):
        (corpus / f"seed-{i}").write_bytes(b"\x01\x00" + seed.encode("utf-8"))
    if atheris is None:
        rng = random.Random(args.seed)
        deadline = time.time() + args.seconds
        pool = [s.encode("utf-8") for s in SEEDS]
        while time.time() < deadline:
            base = bytearray(rng.choice(pool))
            for _ in range(rng.randint(1, 8)):
                op = rng.random()
                if op < 0.4 and base:
                    base[rng.randrange(len(base))] = rng.randrange(256)
                elif op < 0.7:
                    base[rng.randrange(len(base) + 1):0] = rng.randbytes(rng.randint(1, 16))
                else:
                    base += rng.choice(pool)
            one_input(bytes(base))
        write_stats(force=True)
        return 0
    atheris.Setup([sys.argv[0], f"-max_total_time={args.seconds}", "-timeout=20", "-rss_limit_mb=3072",
                   f"-seed={args.seed}", *rest, str(corpus)], one_input)
    try:
        atheris.Fuzz()
    finally:
        write_stats(force=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
