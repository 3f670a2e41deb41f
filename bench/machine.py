"""What machine a figure was measured on, so numbers from different machines are never compared blind."""

from __future__ import annotations

import os
import platform
import sqlite3
import sys
from pathlib import Path


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3, 1)
    except (ValueError, OSError, AttributeError):
        return None


def _hermes_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("hermes-agent")
    except Exception:
        return None


def machine() -> dict:
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "ram_gb": _ram_gb(),
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "hermes_agent": _hermes_version(),
    }


def describe(info: dict) -> str:
    return (f"{info['cpu']}, {info['cores']} cores, {info['ram_gb']} GB RAM, {info['os']}; "
            f"Python {info['python']}, SQLite {info['sqlite']}, hermes-agent {info['hermes_agent']}")
