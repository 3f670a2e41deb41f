"""Which of many transcript files changed, without a ``stat`` of each one on every search.

A transcript folder has no single file whose size says "nothing changed": the check before
each search used to ``stat`` every file (27 ms at 5,000 Claude Code transcripts, most of a
keyword search). Agents append to the few sessions in use and create files for new ones;
old transcripts are rarely touched. So every file is looked at by a full sweep, which one
background thread per process runs for each watch every :data:`SWEEP_SECONDS` (searches come
minutes apart: a sweep on demand would land on nearly every one), and a check looks only at

* the folders that hold the files (and their folders, up to the root): creating, deleting
  or renaming a file changes its folder's mtime, so a new session is seen at once;
* the files written in the :data:`HOT_SECONDS` before the last sweep: an append to a
  session in use is seen at once.

What this can miss until the next sweep (up to :data:`SWEEP_SECONDS` plus a tick): an append to
a file idle for longer than :data:`HOT_SECONDS`, and a file created in a new folder below a
folder that held no file. A check sweeps itself when it finds no sweep for
:data:`STALE_SWEEPS` intervals (the process was suspended), when a folder changed, and the first time.
A folder modified within :data:`RACY_SECONDS` of a sweep's start is not trusted (a file
created during the sweep, or in the same mtime tick, would not change it): the next check
sweeps again.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from stat import S_ISREG

SWEEP_SECONDS = 30.0
#: How often the background thread looks for watches whose sweep is due.
TICK_SECONDS = 10.0
#: A check that finds no sweep for this many intervals sweeps itself.
STALE_SWEEPS = 4
HOT_SECONDS = 6 * 3600.0
RACY_SECONDS = 1.0

logger = logging.getLogger(__name__)


def _fold(stat: os.stat_result) -> int:
    # Python hashes a tuple of integers the same in every process.
    return hash((stat.st_ino, stat.st_size, stat.st_mtime_ns))


class FileWatch:
    """The current ``stat`` of every file ``files()`` lists, kept up to date cheaply (see the module)."""

    def __init__(self, root: str, files: Callable[[], Iterable[str]], *,
                 sweep_seconds: float = SWEEP_SECONDS, hot_seconds: float = HOT_SECONDS) -> None:
        self.root = root
        self.files = files
        self.sweep_seconds = sweep_seconds
        self.hot_seconds = hot_seconds
        self._lock = threading.Lock()
        self._stats: dict[str, os.stat_result] = {}
        self._folders: dict[str, int | None] = {}  # mtime_ns at the sweep; None: not to be trusted
        self._hot: list[str] = []
        self._folded = 0
        self._swept_at: float | None = None
        #: Full sweeps so far (what the tests count).
        self.sweeps = 0

    def due(self) -> bool:
        """Whether the background thread should sweep this watch now."""
        return self._swept_at is not None and time.time() - self._swept_at >= self.sweep_seconds

    def sweep(self) -> None:
        """Look at every file again (what the background thread does when :meth:`due`)."""
        with self._lock:
            self._sweep(time.time())

    def stats(self) -> dict[str, os.stat_result]:
        """Every file's ``stat`` as of now, as far as this watch can tell (a copy)."""
        with self._lock:
            self._bring_up_to_date()
            return dict(self._stats)

    def marker(self) -> tuple[int, int]:
        """How many files, and a fold of their identities, sizes and mtimes: equal while nothing changed."""
        with self._lock:
            self._bring_up_to_date()
            return len(self._stats), self._folded & 0xFFFFFFFFFFFFFFFF

    def _bring_up_to_date(self) -> None:
        now = time.time()  # compared with mtimes: the wall clock
        if self._swept_at is None:
            _watch_in_background(self)
        if (self._swept_at is None or now - self._swept_at >= STALE_SWEEPS * self.sweep_seconds
                or self._folders_changed()):
            self._sweep(now)
            return
        for path in self._hot:
            old = self._stats.get(path)
            try:
                stat = os.stat(path)
            except OSError:  # gone: its folder's mtime should have said so; sweep to be sure
                self._sweep(now)
                return
            before, after = (_fold(old) if old is not None else 0), _fold(stat)
            if old is None or before != after:
                self._folded += after - before
                self._stats[path] = stat

    def _folders_changed(self) -> bool:
        for folder, mtime in self._folders.items():
            if mtime is None:
                return True
            try:
                if os.stat(folder).st_mtime_ns != mtime:
                    return True
            except OSError:
                return True
        return False

    def _sweep(self, now: float) -> None:
        folders = {self.root}
        stats: dict[str, os.stat_result] = {}
        for path in self.files():
            try:
                stat = os.stat(path)
            except OSError:
                continue
            if S_ISREG(stat.st_mode):
                stats[path] = stat
        for parent in {os.path.dirname(path) for path in stats}:
            while parent not in folders and len(parent) > len(self.root):
                folders.add(parent)
                parent = os.path.dirname(parent)
        self._folders = {}
        for folder in folders:
            try:
                mtime = os.stat(folder).st_mtime_ns
            except OSError:
                mtime = None
            racy = mtime is None or now - mtime / 1e9 < RACY_SECONDS
            self._folders[folder] = None if racy else mtime
        self._stats = stats
        self._hot = [path for path, stat in stats.items() if now - stat.st_mtime < self.hot_seconds]
        self._folded = sum(_fold(stat) for stat in stats.values())
        self._swept_at = now
        self.sweeps += 1


_watches: weakref.WeakSet[FileWatch] = weakref.WeakSet()
_sweeper: threading.Thread | None = None
_sweeper_lock = threading.Lock()


def sweep_due() -> int:
    """Sweep every watch of this process that is :meth:`~FileWatch.due`; returns how many."""
    swept = 0
    with _sweeper_lock:  # a watch registering meanwhile would change the set under the copy
        watches = list(_watches)
    for watch in watches:
        if watch.due():
            watch.sweep()
            swept += 1
    return swept


def _sweep_forever() -> None:
    while True:
        time.sleep(TICK_SECONDS)
        try:
            sweep_due()
        except Exception:  # never let one bad folder stop the sweeps of the others
            logger.warning("transcript sweep failed", exc_info=True)


def _forget_sweeper() -> None:
    """In a forked child: no thread of the parent's runs there, and a lock it held at the fork
    (mid-sweep) would stay held forever."""
    global _sweeper, _sweeper_lock
    _sweeper, _sweeper_lock = None, threading.Lock()
    for watch in list(_watches):
        watch._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_sweeper)


def _watch_in_background(watch: FileWatch) -> None:
    """Have the process's one sweeper thread (started on first use) sweep ``watch`` when due;
    it holds watches weakly, so a dropped source is forgotten."""
    global _sweeper
    with _sweeper_lock:
        _watches.add(watch)
        if _sweeper is None:
            # Not named ``phr-…``: those are work that ends (the tests and the stress harness wait
            # for them); this one lives as long as the process.
            _sweeper = threading.Thread(target=_sweep_forever, name="transcript-sweeper", daemon=True)
            _sweeper.start()
