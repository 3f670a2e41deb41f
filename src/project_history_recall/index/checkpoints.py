"""Copying the write-ahead log into the database beside a large build, not in its way.

Every page a build writes goes to the log first and into the database at a checkpoint.
SQLite checkpoints after a commit, on the committing connection: in a first build of the M
corpus that copy was a twelfth of the writer's time, on the one core that the build waits
for, while the other (the worker preparing sessions) has time to spare. So during a large
build the writer does not checkpoint; a thread with a connection of its own copies what the
writer has committed, each time it is told a batch was (:func:`checkpointing_aside`). A
checkpoint that fails only leaves the log longer: the refresh empties it at its end
(:meth:`~.store.Index.trim_log`), as it does when a reader's snapshot held it.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

logger = logging.getLogger(__name__)

#: SQLite's own default, set again when the build ends.
AUTOCHECKPOINT_PAGES = 1000


def checkpoint(conn: sqlite3.Connection) -> None:
    """Copy what is committed; never waits for the writer or for readers."""
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")


@contextlib.contextmanager
def checkpointing_aside(path: Path, writer: sqlite3.Connection) -> Iterator[Callable[[], None]]:
    """While it lasts, ``writer`` does not checkpoint, and calling what it yields (after a
    commit) has a thread checkpoint ``path`` soon; when it ends, all that was committed has
    been copied (but what a reader's older snapshot still needs)."""
    committed = threading.Event()
    ending = threading.Event()

    def run() -> None:
        try:
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error:
            logger.warning("cannot open the index to checkpoint beside the build", exc_info=True)
            return
        try:
            while committed.wait():
                committed.clear()
                checkpoint(conn)
                if ending.is_set():
                    break
        except sqlite3.Error:
            logger.warning("checkpoint beside the build failed; the refresh empties the log at its end",
                           exc_info=True)
        finally:
            conn.close()

    thread = threading.Thread(target=run, name="phr-checkpoint", daemon=True)
    writer.execute("PRAGMA wal_autocheckpoint=0")
    thread.start()
    try:
        yield committed.set
    finally:
        ending.set()
        committed.set()
        thread.join()
        writer.execute(f"PRAGMA wal_autocheckpoint={AUTOCHECKPOINT_PAGES}")
