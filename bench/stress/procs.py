"""Child processes for the stress runs: start, wait for a marker line, kill with SIGKILL."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .world import child_env, python


@dataclass
class Child:
    proc: subprocess.Popen
    log: Path
    lines: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    ready_at: float | None = None
    _buffer: bytes = b""

    def _pump(self, timeout: float) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        # selectors (epoll), not select.select: a long test run may hold more than 1,024 fds.
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            ready = selector.select(max(0.0, timeout))
        if not ready:
            return
        chunk = os.read(fd, 65536)
        if not chunk:
            return
        self._buffer += chunk
        *complete, self._buffer = self._buffer.split(b"\n")
        self.lines.extend(line.decode("utf-8", "replace") for line in complete)

    def wait_line(self, prefix: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            if any(line.startswith(prefix) for line in self.lines):
                if prefix == "READY" and self.ready_at is None:
                    self.ready_at = time.monotonic()
                return True
            left = deadline - time.monotonic()
            if left <= 0 or (self.proc.poll() is not None and not self._more()):
                return any(line.startswith(prefix) for line in self.lines)
            self._pump(min(left, 0.05))

    def _more(self) -> bool:
        before = len(self.lines)
        self._pump(0.0)
        return len(self.lines) != before

    def kill(self) -> bool:
        """SIGKILL now; True when the child was still running (the kill landed)."""
        if self.proc.poll() is not None:
            return False
        try:
            os.kill(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            return False
        self.proc.wait()
        self._drain()
        return self.proc.returncode == -signal.SIGKILL

    def finish(self, timeout: float) -> int:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self._drain()
        return self.proc.returncode

    def _drain(self) -> None:
        for _ in range(100):
            if not self._more():
                break

    def stderr(self) -> str:
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")[-4000:]
        except OSError:
            return ""


def spawn(args: list[str], log: Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> Child:
    log.parent.mkdir(parents=True, exist_ok=True)
    err = open(log, "wb")  # noqa: SIM115 - handed to the child
    try:
        proc = subprocess.Popen([python(), *args], stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                env=child_env(env), cwd=str(cwd) if cwd else None)
    finally:
        err.close()
    return Child(proc, log)


def python_c(code: str, *argv: str, log: Path, env: dict[str, str] | None = None) -> Child:
    return spawn(["-c", code, *argv], log, env)
