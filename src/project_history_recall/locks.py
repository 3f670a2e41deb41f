"""Cross-process locks (one file each) that every Hermes process of a profile shares."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from project_history_recall.errors import RecallError

READ_ONLY = "index_read_only"


@contextlib.contextmanager
def exclusive(path: Path, timeout: float, busy: str) -> Iterator[None]:
    """Hold the lock file at ``path``; after ``timeout`` seconds, ``RecallError(busy, "index_busy")``.

    A lock file that cannot be opened for writing (a read-only file system or folder, a
    foreign owner) is ``RecallError(..., "index_read_only")``: a reader can still answer
    from the index as it stands, a writer has a code to show instead of a traceback."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RecallError(f"the plugin's data folder {path.parent} is not usable: {exc}", "data_dir_unusable") from exc
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=timeout)
    except Timeout as exc:
        raise RecallError(busy, "index_busy") from exc
    except OSError as exc:
        raise RecallError(f"the index cannot be updated: its lock file {path} is not writable ({exc.strerror or exc})",
                          READ_ONLY) from exc
    try:
        yield
    finally:
        lock.release()


def held_elsewhere(path: Path) -> bool:
    """Is the lock at ``path`` held by another holder right now? (Creates nothing when absent.)"""
    if not path.exists():
        return False
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return True
    lock.release()
    return False
