"""The user's consent to send history to a remote embedding service, and what was sent.

``<data dir>/consent.json`` (seed §五)::

    {"profile": "default", "projects": ["p_abc"], "provider": "openai",
     "endpoint": "https://api.openai.com/v1", "model": "text-embedding-3-small",
     "confirmed_at": "2026-09-01T14:30:22Z", "scope": "history+incremental", "version": 1}

* A consent covers exactly one service — provider, endpoint (normalised, see
  :func:`~project_history_recall.embeddings.base.normalize_endpoint`) and model —
  and a set of projects (``["*"]`` means every project). Changing any of the
  three, or a project outside the set, needs a new confirmation.
* ``scope`` is ``"history+incremental"`` (existing history and new messages) or
  ``"incremental"``: only messages written at or after ``confirmed_at`` may be sent;
  older history stays on this machine, found by keyword search only (and by vectors
  made earlier under a wider consent). The embedder reads it through
  :attr:`Consent.history_since`, before every batch.
* The local provider never needs consent.
* The file is written atomically (temp file in the same folder, fsync,
  ``os.replace``). A missing, unreadable, half-written or malformed file means
  *no consent* — never an exception.

``<data dir>/embedding_usage.json`` counts what was sent — requests, texts,
characters, per service and in total, never any content — for ``phr status``.
It is updated under a lock file (``fcntl``; best effort where unavailable) and
written atomically too.
"""

from __future__ import annotations

import calendar
import json
import os
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONSENT_FILE = "consent.json"
USAGE_FILE = "embedding_usage.json"
SCOPE_ALL = "history+incremental"
SCOPE_NEW = "incremental"
SCOPES = (SCOPE_ALL, SCOPE_NEW)
ALL_PROJECTS = "*"
LOCAL_PROVIDER = "local"
_MAX_FILE_BYTES = 1 << 20
_usage_lock = threading.Lock()


def _now_iso(now: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if now is None else now))


def _norm_endpoint(endpoint: str) -> str:
    from project_history_recall.embeddings.base import ProviderError, normalize_endpoint

    text = (endpoint or "").strip()
    if not text:
        return ""
    try:
        return normalize_endpoint(text)
    except ProviderError:
        return text.rstrip("/")


def _norm_projects(projects: Iterable[str]) -> tuple[str, ...]:
    if isinstance(projects, str):
        projects = [projects]
    clean = sorted({str(p).strip() for p in projects if str(p).strip()})
    return (ALL_PROJECTS,) if ALL_PROJECTS in clean else tuple(clean)


# -- atomic files ---------------------------------------------------------------
def _fsync_dir(path: Path) -> None:
    if os.name != "posix":
        return
    with suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_json(path: str | os.PathLike[str], data: Any) -> None:
    """Write JSON so that readers see the old file or the new one, never a mix."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, ensure_ascii=False, indent=2, sort_keys=True)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(target.parent)


def _read_json(path: Path) -> Any:
    """The parsed file, or None when it is missing, too big, unreadable or not JSON."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_MAX_FILE_BYTES + 1)
    except OSError:
        return None
    if len(raw) > _MAX_FILE_BYTES:
        return None
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None


# -- consent ----------------------------------------------------------------------
@dataclass(frozen=True)
class Consent:
    profile: str
    projects: tuple[str, ...]
    provider: str
    endpoint: str
    model: str
    confirmed_at: str
    scope: str = SCOPE_ALL

    @property
    def all_projects(self) -> bool:
        return ALL_PROJECTS in self.projects

    @property
    def includes_history(self) -> bool:
        """May messages written before ``confirmed_at`` be sent?"""
        return self.scope == SCOPE_ALL

    @property
    def history_since(self) -> float | None:
        """The oldest message time that may be sent (epoch seconds); None: all history. An
        unreadable ``confirmed_at`` on an incremental consent lets nothing old through."""
        if self.includes_history:
            return None
        try:
            return float(calendar.timegm(time.strptime(self.confirmed_at, "%Y-%m-%dT%H:%M:%SZ")))
        except ValueError:
            return float("inf")

    @property
    def scope_meaning(self) -> str:
        if self.includes_history:
            return "all history of the covered projects, and new messages, may be sent"
        return (f"only messages written since {self.confirmed_at} may be sent; older history stays on "
                "this machine (keyword search only)")

    def covers_project(self, project_key: str) -> bool:
        return self.all_projects or project_key in self.projects

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": 1,
            "profile": self.profile,
            "projects": list(self.projects),
            "provider": self.provider,
            "endpoint": self.endpoint,
            "model": self.model,
            "confirmed_at": self.confirmed_at,
            "scope": self.scope,
        }


def consent_path(data_dir: str | os.PathLike[str]) -> Path:
    return Path(data_dir) / CONSENT_FILE


def _parse_consent(data: Any) -> Consent | None:
    if not isinstance(data, dict):
        return None
    fields = ("profile", "provider", "endpoint", "model", "confirmed_at", "scope")
    if not all(isinstance(data.get(name), str) for name in fields):
        return None
    projects = data.get("projects")
    if not isinstance(projects, list) or not projects or not all(isinstance(p, str) for p in projects):
        return None
    provider = data["provider"].strip().lower()
    if not provider or not data["model"].strip() or data["scope"] not in SCOPES:
        return None
    normalized = _norm_projects(projects)
    if not normalized:
        return None
    return Consent(
        profile=data["profile"],
        projects=normalized,
        provider=provider,
        endpoint=_norm_endpoint(data["endpoint"]),
        model=data["model"].strip(),
        confirmed_at=data["confirmed_at"],
        scope=data["scope"],
    )


def load_consent(data_dir: str | os.PathLike[str]) -> Consent | None:
    """The recorded consent, or None (missing, corrupt or malformed — never raises)."""
    try:
        return _parse_consent(_read_json(consent_path(data_dir)))
    except Exception:  # defensive: a consent problem must never break search
        return None


def record_consent(
    data_dir: str | os.PathLike[str],
    *,
    profile: str,
    projects: Iterable[str],
    provider: str,
    endpoint: str,
    model: str,
    scope: str = SCOPE_ALL,
    now: float | None = None,
) -> Consent:
    """Write (replace) the consent record atomically and return it.

    ``projects`` replaces the previous set; to widen a consent pass the union
    (``[*old.projects, new]``). Raises ``ValueError`` for an empty project set,
    an unknown scope or a missing provider/model.
    """
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}")
    normalized = _norm_projects(projects)
    if not normalized:
        raise ValueError("consent needs at least one project (or '*')")
    if not provider.strip() or not model.strip():
        raise ValueError("consent needs a provider and a model")
    consent = Consent(
        profile=str(profile),
        projects=normalized,
        provider=provider.strip().lower(),
        endpoint=_norm_endpoint(endpoint),
        model=model.strip(),
        confirmed_at=_now_iso(now),
        scope=scope,
    )
    atomic_write_json(consent_path(data_dir), consent.as_dict())
    return consent


def revoke_consent(data_dir: str | os.PathLike[str]) -> bool:
    """Delete the consent record; True if there was one."""
    try:
        consent_path(data_dir).unlink()
    except FileNotFoundError:
        return False
    return True


def needs_consent(provider: str) -> bool:
    return (provider or LOCAL_PROVIDER).strip().lower() != LOCAL_PROVIDER


def consent_matches_service(consent: Consent | None, *, provider: str, endpoint: str, model: str) -> bool:
    """Does ``consent`` name this provider, endpoint and model? (Local: always.)"""
    if not needs_consent(provider):
        return True
    if consent is None:
        return False
    return (
        consent.provider == provider.strip().lower()
        and consent.endpoint == _norm_endpoint(endpoint)
        and consent.model == model.strip()
    )


def consent_covers(
    consent: Consent | None,
    *,
    provider: str,
    endpoint: str,
    model: str,
    project_key: str,
    profile: str | None = None,
) -> bool:
    """May this project's history go to this service? Local providers need no consent.

    ``profile``, when given, must match the profile the consent was given in.
    """
    if not needs_consent(provider):
        return True
    if not consent_matches_service(consent, provider=provider, endpoint=endpoint, model=model):
        return False
    assert consent is not None
    if profile is not None and consent.profile != profile:
        return False
    return bool(project_key) and consent.covers_project(project_key)


# -- what was sent ------------------------------------------------------------------
@dataclass(frozen=True)
class SentCounts:
    requests: int = 0
    texts: int = 0
    chars: int = 0

    def plus(self, requests: int, texts: int, chars: int) -> SentCounts:
        return SentCounts(self.requests + requests, self.texts + texts, self.chars + chars)

    def as_dict(self) -> dict[str, int]:
        return {"requests": self.requests, "texts": self.texts, "chars": self.chars}


@dataclass(frozen=True)
class SentUsage:
    total: SentCounts = field(default_factory=SentCounts)
    by_service: dict[str, SentCounts] = field(default_factory=dict)  # "provider|endpoint|model"
    first_sent_at: str | None = None
    last_sent_at: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": 1,
            "total": self.total.as_dict(),
            "by_service": {name: counts.as_dict() for name, counts in sorted(self.by_service.items())},
            "first_sent_at": self.first_sent_at,
            "last_sent_at": self.last_sent_at,
        }


def usage_path(data_dir: str | os.PathLike[str]) -> Path:
    return Path(data_dir) / USAGE_FILE


def _counts(data: Any) -> SentCounts | None:
    if not isinstance(data, dict):
        return None
    values = [data.get(name) for name in ("requests", "texts", "chars")]
    numbers = [v for v in values if isinstance(v, int) and not isinstance(v, bool) and v >= 0]
    if len(numbers) != 3:
        return None
    return SentCounts(*numbers)


def load_sent(data_dir: str | os.PathLike[str]) -> SentUsage:
    """The counters (all zero when the file is missing or corrupt — never raises)."""
    data = _read_json(usage_path(data_dir))
    if not isinstance(data, dict):
        return SentUsage()
    total = _counts(data.get("total")) or SentCounts()
    services = data.get("by_service")
    by_service: dict[str, SentCounts] = {}
    if isinstance(services, dict):
        for name, value in services.items():
            counts = _counts(value)
            if isinstance(name, str) and counts is not None:
                by_service[name] = counts
    first, last = data.get("first_sent_at"), data.get("last_sent_at")
    return SentUsage(
        total=total,
        by_service=by_service,
        first_sent_at=first if isinstance(first, str) else None,
        last_sent_at=last if isinstance(last, str) else None,
    )


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: in-process lock only
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def service_key(provider: str, endpoint: str, model: str) -> str:
    return f"{provider.strip().lower()}|{_norm_endpoint(endpoint)}|{model.strip()}"


def record_sent(
    data_dir: str | os.PathLike[str],
    *,
    provider: str,
    endpoint: str,
    model: str,
    requests: int = 1,
    texts: int,
    chars: int,
    now: float | None = None,
) -> SentUsage:
    """Add one request's numbers to the counters (atomic read-modify-write)."""
    if min(requests, texts, chars) < 0:
        raise ValueError("counts must be non-negative")
    directory = Path(data_dir)
    with _usage_lock, _file_lock(directory / f".{USAGE_FILE}.lock"):
        current = load_sent(directory)
        key = service_key(provider, endpoint, model)
        by_service = dict(current.by_service)
        by_service[key] = by_service.get(key, SentCounts()).plus(requests, texts, chars)
        stamp = _now_iso(now)
        usage = SentUsage(
            total=current.total.plus(requests, texts, chars),
            by_service=by_service,
            first_sent_at=current.first_sent_at or stamp,
            last_sent_at=stamp,
        )
        atomic_write_json(usage_path(directory), usage.as_dict())
    return usage
