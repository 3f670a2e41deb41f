"""Hermes homes for the reliability runs, written only through Hermes's own APIs
(``SessionDB``, ``projects_db``), plus the plugin's config block and consent."""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from bench import corpus as bc
from bench.evalset import HERMES_HISTORY_ONLY

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = "project-history-recall"


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a child process: the repo root importable (``bench.stress``),
    no update check, pip pointed at a closed local port (nothing may leave the machine)."""
    env = dict(os.environ)
    paths = [str(ROOT), str(ROOT / "src")]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env.update({
        "PYTHONPATH": os.pathsep.join(paths),
        "PROJECT_HISTORY_RECALL_UPDATE_CHECK": "0",
        "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
        "PIP_CONFIG_FILE": os.devnull,
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
    })
    env.update(extra or {})
    return env


def python() -> str:
    return sys.executable


def write_config(home: Path, *, embedding: dict[str, Any] | None = None, **block: Any) -> None:
    """``config.yaml`` with the plugin's block: embedding off unless given, no update check, and
    Hermes's history alone (not this machine's ``~/.claude`` or ``~/.codex``: an empty
    ``~/.claude/projects`` once turned the missing-state.db case into a Home answer)."""
    entry: dict[str, Any] = {"update_check": False, **HERMES_HISTORY_ONLY, **block}
    entry["embedding"] = embedding if embedding is not None else {"enabled": False}
    data = {"plugins": {"entries": {PLUGIN: entry}}}
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump(data, sort_keys=True), encoding="utf-8")


def remote_embedding(base_url: str, model: str = "m", **extra: Any) -> dict[str, Any]:
    return {"provider": "openai", "base_url": base_url, "model": model, "enabled": True, **extra}


def consent_all(home: Path, base_url: str, model: str = "m", projects: list[str] | None = None) -> None:
    from project_history_recall.hermes_home import HermesHome
    from project_history_recall.services.consent import record_consent

    h = HermesHome(home)
    record_consent(h.data_dir, profile=h.profile, projects=projects or ["*"], provider="openai",
                   endpoint=base_url, model=model)


def data_dir(home: Path) -> Path:
    return home / "plugins" / PLUGIN


def corpus_home(root: Path, sessions: int, messages: int, seed: int = 11) -> bc.Corpus:
    """A seeded realistic history (bench.corpus: real repos, a worktree, projects.db, rewinds,
    archives, subagents), reused when already written with the same parameters."""
    corpus = bc.ensure_corpus(root, seed, bc.Size(f"stress-{sessions}", sessions, messages), progress=False)
    write_config(corpus.hermes_home)
    return corpus


def clone_home(src: Path, dst: Path) -> Path:
    """A copy of a Hermes home's databases (the work folders are shared: paths are absolute)."""
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    for name in ("state.db", "projects.db", "config.yaml"):
        if (src / name).exists():
            if name.endswith(".db"):
                source = sqlite3.connect(src / name)
                target = sqlite3.connect(dst / name)
                source.backup(target)
                target.close()
                source.close()
            else:
                shutil.copy2(src / name, dst / name)
    return dst


def mutate(home: Path, seed: int, work: Path) -> dict[str, int]:
    """Move a history forward the ways a live Hermes does: new messages in old sessions,
    new sessions, rewinds, retitles, archives, deletions and moves. Returns counts."""
    from hermes_state import SessionDB

    rng = random.Random(f"mutate:{seed}")
    db = SessionDB(db_path=home / "state.db")
    counts = dict.fromkeys(("appended", "new_sessions", "rewound", "retitled", "archived", "deleted", "moved"), 0)
    try:
        rows = db._conn.execute(  # read-only look at what exists (ids, cwd) to pick targets
            "SELECT id, cwd, git_repo_root, source FROM sessions ORDER BY id").fetchall()
        ids = [r["id"] for r in rows if r["source"] != "subagent"]
        rng.shuffle(ids)
        clock = bc.END + 60.0
        for sid in ids[: max(1, len(ids) // 4)]:
            for k in range(rng.randint(1, 4)):
                clock += 7.0
                role = "user" if k % 2 == 0 else "assistant"
                db.append_message(sid, role, f"follow-up {rng.randrange(10**6)} about the rollout of {sid[-6:]}",
                                  timestamp=clock)
                counts["appended"] += 1
        cwds = [r["cwd"] for r in rows if r["cwd"]]
        for n in range(max(1, len(ids) // 12)):
            sid = f"29990101_{n:06d}_new{rng.randrange(16**4):04x}"
            db.create_session(sid, "cli", cwd=rng.choice(cwds))
            for k in range(rng.randint(0, 5)):
                clock += 5.0
                db.append_message(sid, "user" if k % 2 == 0 else "assistant",
                                  f"fresh session {n} talks about quokka{n} and the deploy", timestamp=clock)
            counts["new_sessions"] += 1
        for sid in ids[len(ids) // 4 : len(ids) // 4 + max(1, len(ids) // 40)]:
            users = [m for m in db.get_messages(sid) if m["role"] == "user"]
            if len(users) >= 2:
                db.rewind_to_message(sid, users[len(users) // 2]["id"])
                counts["rewound"] += 1
        for sid in ids[: max(1, len(ids) // 30)]:
            db.set_session_title(sid, f"Retitled {sid[-8:]} {rng.randrange(10**5)}")
            counts["retitled"] += 1
        for sid in ids[-max(1, len(ids) // 60):]:
            db.set_session_archived(sid, True)
            counts["archived"] += 1
        for sid in ids[-2 * max(1, len(ids) // 60) : -max(1, len(ids) // 60)]:
            db.delete_session(sid)
            counts["deleted"] += 1
        folders = sorted({str(p) for p in work.iterdir() if p.is_dir()})
        for sid in ids[len(ids) // 2 : len(ids) // 2 + max(1, len(ids) // 50)]:
            target = rng.choice(folders)
            db.update_session_cwd(sid, target)
            counts["moved"] += 1
    finally:
        db.close()
    return counts


def git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True)


def git_init(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git("init", "-q", "-b", "main", str(path))
    git("-C", str(path), "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "--allow-empty",
        "-m", "init")
    return path


def add_worktree(repo: Path, path: Path, branch: str) -> Path:
    git("-C", str(repo), "worktree", "add", "-q", "-b", branch, str(path))
    return path


def checkpoint(db: Path) -> None:
    """Fold a WAL into the main file (so a copy of the one file is the whole database)."""
    if db.exists():
        conn = sqlite3.connect(db)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()


def snapshot_index(home: Path, dst: Path) -> Path:
    """A consistent copy of the plugin's index (SQLite's backup API)."""
    src = data_dir(home) / "index.db"
    if dst.exists():
        dst.unlink()
    source = sqlite3.connect(src)
    target = sqlite3.connect(dst)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()
    return dst


def restore_index(home: Path, snapshot: Path | None) -> None:
    """Put a snapshot back as the index (or none at all), with no WAL, no lock, no state files
    (the consent record stays)."""
    folder = data_dir(home)
    keep = {"consent.json"}
    if folder.exists():
        for part in folder.iterdir():
            if part.name in keep:
                continue
            if part.is_dir() and not part.is_symlink():
                shutil.rmtree(part)
            else:
                part.unlink()
    if snapshot is not None:
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy2(snapshot, folder / "index.db")
