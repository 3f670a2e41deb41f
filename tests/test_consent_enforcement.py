"""Consent is enforced while sending, not only before (issue 18 §1, §7), through Hermes's tool
dispatch and ``/recall``, against a fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import time

import pytest

from builders import Gate, History, dispatch, git_init
from fakes.embedding_server import FakeEmbeddingServer
from project_history_recall.index import vectors
from project_history_recall.recall import Recall
from project_history_recall.services.consent import SCOPE_NEW, consent_path, record_consent
from project_history_recall.services.semantic import SYNC_EMBED_BUDGET
from test_commands import recall as slash

pytestmark = pytest.mark.usefixtures("registered_plugin")



@pytest.fixture
def setup(tmp_path, monkeypatch):
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    monkeypatch.chdir(repo)
    with FakeEmbeddingServer(dim=8) as server:
        h.use_remote_embedder(server.base_url, batch_size=2)
        yield h, repo, server
    h.close()


def sent_texts(server: FakeEmbeddingServer) -> list[str]:
    return [text for request in server.embedding_requests for text in request.inputs]


def wait_for_the_worker(recall: Recall) -> None:
    limit = time.monotonic() + 60
    while vectors.background_running(recall.index) and time.monotonic() < limit:
        time.sleep(0.05)
    assert not vectors.background_running(recall.index)


def test_revoking_consent_stops_a_background_backlog_at_once(setup):
    h, repo, server = setup
    for n in range(SYNC_EMBED_BUDGET):
        h.session(f"s{n}", repo, f"backlog note {n} about the heron pipeline", f"backlog answer {n}")
    h.session("ask", repo)
    assert "may now be sent" in slash("consent")
    gate = Gate()
    server.hold_when(gate, "backlog")
    reply = dispatch("project_history_search", {"query": "heron", "mode": "hybrid"}, session_id="ask")
    assert reply["semantic_status"] == "indexing", reply
    assert gate.reached.wait(30)
    assert "nothing more is sent" in slash("consent revoke")
    backlog_requests = sum(any("backlog" in t for t in r.inputs) for r in server.embedding_requests)
    assert backlog_requests == 1  # the one in flight, held at the gate
    assert gate.opened_in_time()
    wait_for_the_worker(h.recall())
    assert sum(any("backlog" in t for t in r.inputs) for r in server.embedding_requests) == 1
    # Stopped for consent, not failed: once consent is given again the backlog resumes.
    assert dispatch("project_history_search", {"query": "heron"}, session_id="ask")["semantic_status"] \
        == "consent_required"
    slash("consent")
    resumed = dispatch("project_history_search", {"query": "heron"}, session_id="ask")
    assert resumed["semantic_status"] in ("indexing", "ready", "partial"), resumed
    wait_for_the_worker(h.recall())


def test_an_incremental_consent_sends_only_what_was_written_after_it(setup):
    h, repo, server = setup
    h.session("old", repo, "the old kestrel migration plan", "we kept the kestrel schema as it was")
    record_consent(h.root / "plugins" / "project-history-recall", profile="default", projects=["*"],
                   provider="openai", endpoint=server.base_url, model="m", scope=SCOPE_NEW)
    h.clock = time.time() + 3600  # written after the consent
    h.session("new", repo, "the new kestrel rollout", "rolled kestrel out to staging")
    h.session("ask", repo)
    reply = dispatch("project_history_search", {"query": "kestrel", "mode": "hybrid"}, session_id="ask")
    assert reply["semantic_status"] == "ready", reply  # old history is not "pending": it stays local
    sent = "\n".join(sent_texts(server))
    assert "rolled kestrel out to staging" in sent
    assert "old kestrel migration" not in sent and "schema as it was" not in sent
    assert {r["session_id"] for r in reply["results"]} == {"old", "new"}  # old still found by keyword
    consent = dispatch("project_history", {"operation": "status"}, session_id="ask")["consent"]
    assert consent["scope"] == SCOPE_NEW and "only messages written since" in consent["meaning"]


def test_widening_an_incremental_consent_keeps_it_incremental(setup):
    h, repo, server = setup
    data_dir = h.root / "plugins" / "project-history-recall"
    record_consent(data_dir, profile="default", projects=["auto:/elsewhere"], provider="openai",
                   endpoint=server.base_url, model="m", scope=SCOPE_NEW)
    h.session("ask", repo)
    assert "may now be sent" in slash("consent")
    record = json.loads(consent_path(data_dir).read_text())
    assert record["scope"] == SCOPE_NEW and len(record["projects"]) == 2


def test_common_password_spellings_never_reach_the_embedder(setup):
    h, repo, server = setup
    secrets = [f"Zq{n}x7Wm" for n in range(8)]
    said = (f"export PGPASSWORD={secrets[0]} and MYSQLPWD={secrets[1]}; mysql -u root -p{secrets[2]} shop; "
            f"curl -u admin:{secrets[3]} https://api; sshpass -p {secrets[4]} ssh host; "
            f"redis://:{secrets[5]}@cache:6379; postgres://app:{secrets[6]}@x@db/app; "
            f"the password is {secrets[7]}")
    h.session("ops", repo, "the grebe deploy notes", said)
    h.session("ask", repo)
    slash("consent")
    reply = dispatch("project_history_search", {"query": "grebe deploy", "mode": "hybrid"}, session_id="ask")
    assert reply["semantic_status"] == "ready", reply
    sent = "\n".join(sent_texts(server))
    assert "grebe deploy" in sent
    assert [s for s in secrets if s in sent] == []


def test_a_background_failure_is_reported_then_tried_again(setup, monkeypatch):
    h, repo, server = setup
    for n in range(SYNC_EMBED_BUDGET):
        h.session(f"s{n}", repo, f"backlog note {n} about the heron pipeline", f"backlog answer {n}")
    h.session("ask", repo)
    slash("consent")
    server.fail_next(50, status=400, message="the embedding service is down")
    assert dispatch("project_history_search", {"query": "heron"}, session_id="ask")["semantic_status"] == "indexing"
    wait_for_the_worker(h.recall())
    failed = dispatch("project_history_search", {"query": "heron"}, session_id="ask")
    assert failed["semantic_status"] == "unavailable" and "down" in failed["semantic_error"], failed
    server.clear()  # the service is back
    monkeypatch.setattr(vectors, "BACKGROUND_RETRY_SECONDS", 0.0)
    retried = dispatch("project_history_search", {"query": "heron"}, session_id="ask")
    assert retried["semantic_status"] in ("indexing", "ready"), retried
    wait_for_the_worker(h.recall())
    assert dispatch("project_history_search", {"query": "heron"}, session_id="ask")["semantic_status"] == "ready"
