"""Consent is per service and per project, survives crashes, and a bad file means no consent."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from project_history_recall.services.consent import (
    CONSENT_FILE,
    SCOPE_NEW,
    USAGE_FILE,
    Consent,
    atomic_write_json,
    consent_covers,
    consent_matches_service,
    load_consent,
    load_sent,
    record_consent,
    record_sent,
    revoke_consent,
)

OPENAI = {"provider": "openai", "endpoint": "https://api.openai.com/v1", "model": "text-embedding-3-small"}


def _record(tmp_path: Path, projects: list[str] | None = None, **overrides: str) -> Consent:
    service = {**OPENAI, **overrides}
    return record_consent(tmp_path, profile="default", projects=projects or ["p_abc"], **service)


def test_round_trip_and_file_shape(tmp_path: Path) -> None:
    consent = _record(tmp_path, ["p_b", "p_a", "p_a"])
    assert load_consent(tmp_path) == consent
    data = json.loads((tmp_path / CONSENT_FILE).read_text())
    assert data["projects"] == ["p_a", "p_b"]
    assert set(data) >= {"profile", "projects", "provider", "endpoint", "model", "confirmed_at", "scope"}
    assert data["scope"] == "history+incremental" and consent.includes_history
    assert data["confirmed_at"].endswith("Z")


def test_covers_only_the_consented_service_and_projects(tmp_path: Path) -> None:
    consent = _record(tmp_path)
    assert consent_covers(consent, project_key="p_abc", **OPENAI)
    # the endpoint is compared normalised
    same = {**OPENAI, "endpoint": "https://API.openai.com/v1/embeddings/"}
    assert consent_covers(consent, project_key="p_abc", **same)
    assert not consent_covers(consent, project_key="p_other", **OPENAI)
    assert not consent_covers(consent, project_key="", **OPENAI)
    assert not consent_covers(consent, project_key="p_abc", **{**OPENAI, "model": "text-embedding-3-large"})
    assert not consent_covers(
        consent, project_key="p_abc", **{**OPENAI, "endpoint": "https://evil.example/v1"}
    )
    assert not consent_covers(consent, project_key="p_abc", **{**OPENAI, "provider": "voyage"})
    assert not consent_covers(consent, project_key="p_abc", profile="work", **OPENAI)
    assert consent_covers(consent, project_key="p_abc", profile="default", **OPENAI)
    assert not consent_covers(None, project_key="p_abc", **OPENAI)


def test_wildcard_projects(tmp_path: Path) -> None:
    consent = _record(tmp_path, ["p_a", "*"])
    assert consent.projects == ("*",) and consent.all_projects
    assert consent_covers(consent, project_key="anything", **OPENAI)


def test_local_provider_never_needs_consent() -> None:
    assert consent_covers(None, provider="local", endpoint="", model="use-multilingual", project_key="p")
    assert consent_matches_service(None, provider="local", endpoint="", model="e5-small")


def test_scope_incremental(tmp_path: Path) -> None:
    consent = record_consent(tmp_path, profile="default", projects=["p"], scope=SCOPE_NEW, **OPENAI)
    assert not consent.includes_history
    assert load_consent(tmp_path) == consent


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        record_consent(tmp_path, profile="d", projects=[], **OPENAI)
    with pytest.raises(ValueError):
        record_consent(tmp_path, profile="d", projects=["p"], scope="everything", **OPENAI)
    with pytest.raises(ValueError):
        record_consent(tmp_path, profile="d", projects=["p"], provider="openai", endpoint="x", model=" ")
    assert load_consent(tmp_path) is None


def test_revoke(tmp_path: Path) -> None:
    _record(tmp_path)
    assert revoke_consent(tmp_path)
    assert load_consent(tmp_path) is None
    assert not revoke_consent(tmp_path)


def test_missing_dir_is_no_consent(tmp_path: Path) -> None:
    assert load_consent(tmp_path / "nope") is None
    assert load_sent(tmp_path / "nope").total.requests == 0


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{",
        b'{"profile": "default", "projects": ["p"], "provider": "openai"',  # half written
        b"null",
        b"[]",
        b"\xff\xfe\x00garbage",
        json.dumps(
            {**OPENAI, "profile": "d", "projects": [], "confirmed_at": "x", "scope": "history+incremental"}
        ).encode(),
        json.dumps(
            {**OPENAI, "profile": "d", "projects": "p", "confirmed_at": "x", "scope": "history+incremental"}
        ).encode(),
        json.dumps(
            {**OPENAI, "profile": "d", "projects": ["p"], "confirmed_at": "x", "scope": "all"}
        ).encode(),
        json.dumps(
            {**OPENAI, "profile": 1, "projects": ["p"], "confirmed_at": "x", "scope": "incremental"}
        ).encode(),
        json.dumps(
            {
                **OPENAI,
                "model": "",
                "profile": "d",
                "projects": ["p"],
                "confirmed_at": "x",
                "scope": "incremental",
            }
        ).encode(),
    ],
)
def test_corrupt_files_mean_no_consent(tmp_path: Path, content: bytes) -> None:
    (tmp_path / CONSENT_FILE).write_bytes(content)
    assert load_consent(tmp_path) is None


def test_a_directory_in_the_way_is_no_consent(tmp_path: Path) -> None:
    (tmp_path / CONSENT_FILE).mkdir()
    assert load_consent(tmp_path) is None


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(garbage=st.binary(max_size=300))
def test_arbitrary_bytes_never_crash(tmp_path: Path, garbage: bytes) -> None:
    (tmp_path / CONSENT_FILE).write_bytes(garbage)
    result = load_consent(tmp_path)
    assert result is None or isinstance(result, Consent)


def test_record_is_atomic_when_the_write_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original = _record(tmp_path)

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        _record(tmp_path, ["p_new"], model="other-model")
    monkeypatch.undo()
    assert load_consent(tmp_path) == original
    assert [p.name for p in tmp_path.iterdir()] == [CONSENT_FILE]  # the temp file was cleaned up


def test_atomic_write_never_exposes_a_partial_file(tmp_path: Path) -> None:
    target = tmp_path / "x.json"
    stop = threading.Event()
    seen: list[object] = []

    def reader() -> None:
        while not stop.is_set():
            with contextlib.suppress(FileNotFoundError):
                seen.append(json.loads(target.read_text()))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(200):
            atomic_write_json(target, {"i": i, "pad": "x" * 5000})
    finally:
        stop.set()
        thread.join()
    assert all(isinstance(item, dict) and len(item["pad"]) == 5000 for item in seen)


def test_usage_counters(tmp_path: Path) -> None:
    assert load_sent(tmp_path).total.requests == 0
    record_sent(tmp_path, texts=64, chars=20_000, **OPENAI)
    record_sent(tmp_path, texts=10, chars=3_000, **{**OPENAI, "endpoint": "https://api.openai.com/v1/"})
    usage = record_sent(tmp_path, texts=1, chars=5, **{**OPENAI, "model": "text-embedding-3-large"})
    assert usage == load_sent(tmp_path)
    assert usage.total.as_dict() == {"requests": 3, "texts": 75, "chars": 23_005}
    assert usage.by_service["openai|https://api.openai.com/v1|text-embedding-3-small"].texts == 74
    assert usage.first_sent_at and usage.last_sent_at
    data = json.loads((tmp_path / USAGE_FILE).read_text())  # numbers only, never content
    assert set(data) == {"version", "total", "by_service", "first_sent_at", "last_sent_at"}
    assert all(set(counts) == {"requests", "texts", "chars"} for counts in data["by_service"].values())


def test_usage_counters_are_safe_under_threads(tmp_path: Path) -> None:
    def work() -> None:
        for _ in range(25):
            record_sent(tmp_path, texts=2, chars=10, **OPENAI)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert load_sent(tmp_path).total.as_dict() == {"requests": 100, "texts": 200, "chars": 1000}


def test_corrupt_usage_file_starts_over(tmp_path: Path) -> None:
    (tmp_path / USAGE_FILE).write_text("{not json")
    assert load_sent(tmp_path).total.requests == 0
    assert record_sent(tmp_path, texts=1, chars=1, **OPENAI).total.requests == 1
