"""Saying once that a newer release exists, without ever getting in the way.

The plugin cannot upgrade itself (it lives in the host's environment), so it
does the next best thing: after one of its tools was used, at most every
``update_check_interval_hours``, a background thread asks the package index the
user's pip is configured with for the newest ``project-history-recall``; when
that is newer than the running version, the NEXT tool result carries a one-line
``notice``, once per version. What was checked and what was said is kept in
``<data_dir>/update_check.json`` (written atomically), so a restart does not say
it again. Any failure (no network, a time-out, an odd index, a read-only disk)
means only that there is nothing to say.

The index is pip's: ``PIP_INDEX_URL``, else pip's own configuration (``pip
config list``: ``install.index-url`` over ``global.index-url``; the pip.conf
files when pip itself is not there), else https://pypi.org/simple. It is asked
through the PEP 691 JSON simple API (an HTML simple page is understood too).

``update_check: false`` turns it off, as does ``PROJECT_HISTORY_RECALL_UPDATE_CHECK=0``
in the environment (the test suite sets it, so tests never reach the internet).
"""

from __future__ import annotations

import configparser
import contextlib
import html
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from project_history_recall.services.jobs import read_json, write_json_atomic
from project_history_recall.settings import Settings

PACKAGE = "project-history-recall"
DEFAULT_INDEX = "https://pypi.org/simple"
STATE_FILE = "update_check.json"
DISABLE_ENV = "PROJECT_HISTORY_RECALL_UPDATE_CHECK"
TIMEOUT = 3.0
PIP_CONFIG_TIMEOUT = 5.0
JSON_ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"

_ANCHOR = re.compile(r"<a\s([^>]*)>([^<]+)</a>", re.IGNORECASE)


def _running_version() -> str:
    from project_history_recall import __version__

    return __version__


# -- which index ---------------------------------------------------------------------


def _from_pip_config_output(text: str) -> str | None:
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip().strip("'\"")
    for key in (":env:.index-url", "install.index-url", "global.index-url"):
        if values.get(key):
            return values[key]
    return None


def _pip_config_files() -> list[Path]:
    """pip's configuration files in its override order (later wins)."""
    if sys.platform == "win32":  # pragma: no cover
        appdata = Path(os.environ.get("APPDATA", Path.home()))
        files = [Path(os.environ.get("PROGRAMDATA", "C:/ProgramData")) / "pip" / "pip.ini",
                 Path.home() / "pip" / "pip.ini", appdata / "pip" / "pip.ini"]
    else:
        xdg_dirs = os.environ.get("XDG_CONFIG_DIRS", "/etc/xdg").split(os.pathsep)
        xdg_home = Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config"))
        files = [Path(d) / "pip" / "pip.conf" for d in xdg_dirs if d] + [Path("/etc/pip.conf")]
        env_file = os.environ.get("PIP_CONFIG_FILE")
        if not (env_file and os.path.exists(env_file)):
            files += [Path.home() / ".pip" / "pip.conf", xdg_home / "pip" / "pip.conf"]
    name = "pip.ini" if sys.platform == "win32" else "pip.conf"
    files.append(Path(sys.prefix) / name)
    if os.environ.get("PIP_CONFIG_FILE"):
        files.append(Path(os.environ["PIP_CONFIG_FILE"]))
    return files


def _from_pip_config_files() -> str | None:
    found: str | None = None
    for path in _pip_config_files():
        parser = configparser.RawConfigParser()
        try:
            if not path.is_file() or not parser.read(path, encoding="utf-8"):
                continue
        except (OSError, configparser.Error):
            continue
        for section in ("global", "install"):  # install's wins within a file
            if parser.has_option(section, "index-url"):
                found = parser.get(section, "index-url").strip() or found
    return found


def index_url() -> str:
    """The simple index the user's pip installs from."""
    env = os.environ.get("PIP_INDEX_URL", "").strip()
    if env:
        return env
    try:
        out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                             timeout=PIP_CONFIG_TIMEOUT, stdin=subprocess.DEVNULL,
                             env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
        if out.returncode == 0:
            return _from_pip_config_output(out.stdout) or DEFAULT_INDEX
    except (OSError, subprocess.SubprocessError):
        pass
    return _from_pip_config_files() or DEFAULT_INDEX


# -- what is there -------------------------------------------------------------------


def _file_version(filename: str) -> Any:
    from packaging.utils import (
        InvalidSdistFilename,
        InvalidWheelFilename,
        parse_sdist_filename,
        parse_wheel_filename,
    )

    try:
        if filename.endswith(".whl"):
            return parse_wheel_filename(filename)[1]
        return parse_sdist_filename(filename)[1]
    except (InvalidWheelFilename, InvalidSdistFilename, ValueError):
        return None


def versions_from_json(data: dict) -> list[Any]:
    files = data.get("files") if isinstance(data, dict) else None
    found = []
    for item in files if isinstance(files, list) else []:
        if isinstance(item, dict) and isinstance(item.get("filename"), str) and not item.get("yanked"):
            version = _file_version(item["filename"])
            if version is not None:
                found.append(version)
    return found


def versions_from_html(text: str) -> list[Any]:
    found = []
    for attributes, label in _ANCHOR.findall(text):
        if "data-yanked" in attributes.lower():
            continue
        version = _file_version(html.unescape(label.strip()))
        if version is not None:
            found.append(version)
    return found


def latest_release(index: str, *, timeout: float | None = None, current: str | None = None) -> str | None:
    """The newest non-yanked release on ``index`` (pre-releases only when running one)."""
    import httpx
    from packaging.version import Version

    timeout = TIMEOUT if timeout is None else timeout
    if not index.startswith(("http://", "https://")):
        return None
    url = index.rstrip("/") + f"/{PACKAGE}/"
    response = httpx.get(url, headers={"Accept": JSON_ACCEPT}, timeout=timeout, follow_redirects=True)
    if response.status_code != 200:
        return None
    kind = response.headers.get("content-type", "")
    versions = versions_from_json(response.json()) if "json" in kind else versions_from_html(response.text)
    allow_pre = current is not None and Version(current).is_prerelease
    candidates = [v for v in versions if allow_pre or not v.is_prerelease]
    return str(max(candidates)) if candidates else None


def is_newer(candidate: str | None, current: str) -> bool:
    from packaging.version import InvalidVersion, Version

    if not candidate:
        return False
    try:
        return Version(candidate) > Version(current)
    except InvalidVersion:
        return False


# -- when to check, what to say ------------------------------------------------------------


@dataclass
class _Checker:
    """One data dir's check state in this process (the file is the truth across processes)."""

    data_dir: Path
    memory: dict
    thread: threading.Thread | None = None

    @property
    def path(self) -> Path:
        return self.data_dir / STATE_FILE

    def load(self) -> dict:
        return {**self.memory, **(read_json(self.path) or {})}

    def save(self, state: dict) -> None:
        self.memory = dict(state)
        if self.data_dir.is_dir():  # never create the data dir just for this (status must create nothing)
            with contextlib.suppress(OSError):
                write_json_atomic(self.path, state)


_checkers: dict[str, _Checker] = {}
_lock = threading.Lock()


def _checker(data_dir: Path) -> _Checker:
    with _lock:
        return _checkers.setdefault(str(data_dir), _Checker(data_dir, {}))


def enabled(settings: Settings) -> bool:
    return settings.update_check and os.environ.get(DISABLE_ENV, "").strip().lower() not in ("0", "false", "off", "no")


def take_notice(data_dir: Path, current: str | None = None) -> str | None:
    """The one-line notice, if a newer release was found and not yet announced; announces it."""
    current = current or _running_version()
    checker = _checker(data_dir)
    with _lock:
        state = checker.load()
        latest = state.get("latest")
        if not is_newer(latest, current) or state.get("notified") == latest:
            return None
        state["notified"] = latest
        checker.save(state)
    return (f"project-history-recall {latest} is available (running {current}): "
            f"pip install -U {PACKAGE}, then restart Hermes.")


def _check(checker: _Checker, current: str) -> None:
    latest = None
    try:
        latest = latest_release(index_url(), current=current)
    except Exception:  # silent by design: no network, a time-out or an odd index only mean "nothing to say"
        latest = None
    with _lock:
        state = checker.load()
        state["checked_at"] = time.time()
        if latest:
            state["latest"] = latest
        checker.save(state)


def maybe_check(data_dir: Path, settings: Settings, current: str | None = None) -> threading.Thread | None:
    """Start a background check when one is due; returns its thread (tests join it)."""
    if not enabled(settings):
        return None
    current = current or _running_version()
    checker = _checker(data_dir)
    with _lock:
        if checker.thread is not None and checker.thread.is_alive():
            return None
        checked_at = float(checker.load().get("checked_at") or 0)
        if time.time() - checked_at < settings.update_check_interval_hours * 3600:
            return None
        checker.thread = threading.Thread(target=_check, args=(checker, current), name="phr-update-check",
                                          daemon=True)
        checker.thread.start()
        return checker.thread


def after_tool_use(home: Any, settings: Settings, payload: dict) -> None:
    """After a tool ran: add a pending notice to its answer, then maybe check again."""
    if not enabled(settings):
        return
    try:
        notice = take_notice(home.data_dir)
        if notice and isinstance(payload, dict):
            payload["notice"] = notice
        maybe_check(home.data_dir, settings)
    except Exception:  # never let the notice machinery touch a tool's answer
        return
