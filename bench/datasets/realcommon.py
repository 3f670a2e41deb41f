"""Shared helpers for the converters of real, public data into evaluation sets
(``/work/shared/eval/FORMAT.md``): stable ids and hashes, reading a fetched
snapshot (a bare git directory) and writing the fixed tune / held-out split.

Nothing here touches the network. Converted sets go to ``bench/out/real/``
(gitignored: fetched data is never committed).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

OUT_DIR = Path(__file__).resolve().parents[1] / "out" / "real"
MIRRORS = Path("/work/.mirror")


def stable_hash(*parts: object) -> int:
    """A 64-bit hash of the parts that does not depend on PYTHONHASHSEED or the platform."""
    text = "\x1f".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha1(text.encode("utf-8")).digest()[:8], "big")


def session_id(started_at: float, *parts: object) -> str:
    """A Hermes-style id ``YYYYMMDD_HHMMSS_xxxxxx`` (UTC), unique through the hashed parts."""
    stamp = datetime.fromtimestamp(started_at, tz=UTC).strftime("%Y%m%d_%H%M%S")
    return f"{stamp}_{stable_hash(*parts) % 16**6:06x}"


class Snapshot:
    """Files of a fetched repository, read from its bare git dir (``git show HEAD:path``)
    or, when ``root`` is a plain folder, from the file tree."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.bare = (self.root / "HEAD").exists() and (self.root / "objects").exists()

    def list(self, prefix: str = "") -> list[str]:
        if not self.bare:
            base = self.root / prefix
            return sorted(str(p.relative_to(self.root)) for p in base.rglob("*") if p.is_file())
        out = subprocess.run(["git", f"--git-dir={self.root}", "ls-tree", "-r", "--name-only", "HEAD", "--", prefix],
                             check=True, capture_output=True, text=True).stdout
        return sorted(line for line in out.splitlines() if line)

    def read(self, path: str) -> bytes:
        if not self.bare:
            return (self.root / path).read_bytes()
        return subprocess.run(["git", f"--git-dir={self.root}", "show", f"HEAD:{path}"], check=True,
                              capture_output=True).stdout

    def head(self) -> str:
        if not self.bare:
            return "worktree"
        return subprocess.run(["git", f"--git-dir={self.root}", "rev-parse", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()


def converter_arguments(doc: str, default_source: Path) -> argparse.ArgumentParser:
    """The command line every converter shares: ``--source`` (the fetched snapshot) and ``--out``."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=default_source)
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    return parser


def foreign_control(query: dict, asked_in: str, asking_session: str, category: str) -> dict:
    """A negative control: ``query``'s question asked from another project's asking session,
    where nothing answers it (its id says where it came from and where it is asked)."""
    return {"id": f"{query['id']}-asked-in-{asked_in}", "query": query["query"], "current_session": asking_session,
            "gold_sessions": [], "lang": query.get("lang", "en"), "category": category}


def write_set(path: Path, name: str, projects: list[dict], sessions: list[dict], queries: list[dict]) -> dict:
    """Write one set, keeping only the projects and sessions its queries need; returns its counts."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"name": name, "projects": projects, "sessions": sessions, "queries": queries}
    path.write_text(json.dumps(data, ensure_ascii=False, indent=None, sort_keys=False), encoding="utf-8")
    return {"file": str(path), "projects": len(projects), "sessions": len(sessions), "queries": len(queries),
            "negatives": sum(1 for q in queries if not q["gold_sessions"]),
            "messages": sum(len(s["messages"]) for s in sessions)}
