"""One background thread per index per process.

The refresh before a read and the background embedding each run in a daemon thread; a
second caller for the same index (another tool call of the same Hermes process) must find
the running one instead of starting another beside it. Across processes the file locks of
:mod:`~project_history_recall.locks` decide who works.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

Worker = TypeVar("Worker", bound=threading.Thread)


class Workers(Generic[Worker]):
    """The threads of one kind, by key (an index's path): at most one alive per key."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: dict[str, Worker] = {}

    def last(self, key: str) -> Worker | None:
        """The thread last started for ``key``, alive or ended (its outcome is on it)."""
        with self._lock:
            return self._threads.get(key)

    def running(self, key: str) -> bool:
        worker = self.last(key)
        return worker is not None and worker.is_alive()

    def start(self, key: str, make: Callable[[], Worker]) -> Worker:
        """The live thread for ``key``, or a new one from ``make()``, started."""
        with self._lock:
            worker = self._threads.get(key)
            if worker is None or not worker.is_alive():
                worker = self._threads[key] = make()
                worker.start()
            return worker
