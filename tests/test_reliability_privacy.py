"""Privacy (issue 6 §6): a remote embedding provider on 127.0.0.1 behind a counting TCP relay.
Zero bytes before consent on every path (search in all modes, browse, index, move, /recall, the
background worker, the session-start hook, a detached job, status, the CLI ``phr``), zero with a
consent for another model or endpoint; after consent, no planted secret in any request."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.stress import privacy  # noqa: E402 - needs the repo root on sys.path
from bench.stress.fake import embedding_server  # noqa: E402


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    with embedding_server() as server, pytest.MonkeyPatch.context() as mp:
        mp.delenv("PROJECT_HISTORY_EMBEDDING_API_KEY", raising=False)
        mp.setenv("PROJECT_HISTORY_RECALL_UPDATE_CHECK", "0")
        yield privacy.run(tmp_path_factory.mktemp("privacy"), server)


def test_nothing_reaches_the_provider_before_consent(report):
    assert report["paths_before_consent"] >= 35
    assert report["connections_before_consent"] == 0, report["paths_with_traffic_before_consent"]
    assert report["bytes_before_consent"] == 0


def test_a_consent_for_another_model_or_endpoint_sends_nothing(report):
    assert report["paths_with_non_matching_consent"] >= 30
    assert report["bytes_with_non_matching_consent"] == 0, report["paths_with_traffic_non_matching_consent"]


def test_after_consent_requests_flow(report):
    assert report["requests_after_consent"] > 0 and report["texts_after_consent"] > 0


def test_no_planted_secret_is_ever_sent(report):
    assert report["secret_leaks"] == []


def test_a_consent_for_one_project_sends_nothing_of_another(report):
    assert report["one_project_consent_paths"] >= 5
    assert report["other_project_texts_sent_with_one_project_consent"] == 0, report["one_project_consent"]
