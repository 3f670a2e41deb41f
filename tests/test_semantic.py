"""Semantic and hybrid search with the real local model, and the remote path against a
fake OpenAI-compatible server on 127.0.0.1 (what is and is not sent)."""

from __future__ import annotations

import pytest
from filelock import FileLock

from builders import History, git_init, session_ids, two_projects
from fakes.embedding_server import FakeEmbeddingServer
from project_history_recall.embeddings.local import LocalProvider
from project_history_recall.services.consent import record_consent
from project_history_recall.services.semantic import SYNC_EMBED_BUDGET

pytestmark = pytest.mark.model

SECRET = "sk-proj-Zq8vT1mW9xL2cR7bN4pK6sD3fG5hJ0aY"


def write_history(h: History, repo) -> None:
    h.session("auth", repo, "the login test keeps failing on CI",
              "the auth request kept timing out, so we raised the client timeout to ten seconds")
    h.session("port", repo, "部署到测试环境的时候端口冲突了", "把服务端口改成 8081 就好了")
    h.session("pdf", repo, "the invoice pdf layout is broken", "switched the invoice rendering to weasyprint templates")
    h.session("cache", repo, "我们的缓存总是过期太快", "把 Redis 的过期时间从一分钟调到一小时")
    h.session("db", repo, "the nightly backup job of the postgres database is slow",
              "we added an index and vacuumed the table")
    h.session("ask", repo)


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    root = tmp_path_factory.mktemp("semantic")
    h = History(root / "hermes")
    write_history(h, git_init(root / "repo"))
    yield h
    h.close()


def first(h: History, query: str, mode: str, **kw) -> list[str]:
    return session_ids(h.recall(**kw).search(query, session_id="ask", mode=mode, limit=5))


@pytest.mark.parametrize(("query", "gold"), [
    ("sign-in checks were unreliable", "auth"),  # English paraphrase
    ("billing documents looked wrong", "pdf"),
    ("临时数据保存时间太短了", "cache"),  # Chinese paraphrase
])
def test_paraphrase_is_found_by_meaning_where_keywords_find_nothing(history, query, gold):
    assert first(history, query, "keyword") == []
    assert first(history, query, "semantic")[0] == gold
    assert first(history, query, "hybrid")[0] == gold


@pytest.mark.parametrize(("query", "gold"), [
    ("发票文件生成的问题", "pdf"),  # Chinese question, English history
    ("认证请求超时", "auth"),
    ("port collision during deployment", "port"),  # English question, Chinese history
])
def test_cross_language(history, query, gold):
    assert first(history, query, "semantic")[0] == gold
    assert first(history, query, "hybrid")[0] == gold


def test_results_say_where_they_came_from(history):
    response = history.recall().search("认证请求超时", session_id="ask", mode="hybrid")
    assert response["semantic_status"] == "ready"
    assert {r["score_source"] for r in response["results"]} <= {"keyword", "semantic", "both"}
    assert response["results"][0]["score_source"] == "semantic"


def test_an_exact_identifier_hit_is_not_buried(tmp_path):
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    h.session("exact", repo, "what about the odd flag", "set E_GW_TMO_RETRY=1 in the worker env")
    for n in range(6):
        h.session(f"near{n}", repo, "the gateway kept timing out and we retried the requests",
                  f"retries with backoff for gateway timeouts, variant {n}")
    h.session("ask", repo)
    assert first(h, "E_GW_TMO_RETRY gateway timeout retries", "hybrid")[0] == "exact"
    h.close()


def test_hybrid_keeps_a_confident_keyword_answer_first(tmp_path):
    # keyword is sure (only one session says the rare word); semantic neighbours are many and close
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    h.session("exact", repo, "notes on the week", "the quillfeather exporter dropped rows, fixed the cursor")
    for n in range(6):
        h.session(f"near{n}", repo, "the csv exporter dropped rows when the export was large",
                  f"rows went missing in the export, variant {n}")
    h.session("ask", repo)
    query = "quillfeather exporter dropped rows"
    keyword = first(h, query, "keyword")
    assert keyword[0] == "exact"
    assert first(h, query, "hybrid")[:2] == keyword[:2]
    h.close()


# -- the six semantic states ------------------------------------------------------------


def test_disabled_in_config_keeps_keyword_results(tmp_path):
    h = History(tmp_path / "hermes")
    write_history(h, git_init(tmp_path / "repo"))
    (h.root / "config.yaml").write_text(
        "plugins:\n  entries:\n    project-history-recall:\n      embedding:\n        enabled: false\n")
    response = h.recall().search("invoice", session_id="ask", mode="hybrid")
    assert response["semantic_status"] == "disabled" and session_ids(response) == ["pdf"]
    h.close()


def _big_backlog(tmp_path) -> History:
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    for n in range(SYNC_EMBED_BUDGET // 2 + 4):
        h.session(f"s{n}", repo, f"note {n} about the heron pipeline", f"answer {n} about herons")
    h.session("ask", repo)
    return h


def test_partial_says_how_many_lack_vectors(tmp_path):
    h = _big_backlog(tmp_path)
    response = h.recall().search("heron", session_id="ask", mode="hybrid")
    assert response["semantic_status"] == "partial"
    assert response["semantic_pending"] == 2 * (SYNC_EMBED_BUDGET // 2 + 4)
    assert response["results"]  # keyword results are still returned
    h.recall().embed()
    assert h.recall().search("heron", session_id="ask", mode="hybrid")["semantic_status"] == "ready"
    h.close()


def _semantic_while_another_window_embeds(recall, query: str) -> dict:
    """A semantic search while another Hermes window holds this profile's embedding lock."""
    lock = FileLock(str(recall.index.data_dir / "embed.lock"))
    lock.acquire()
    try:
        return recall.search(query, session_id="ask", mode="semantic")
    finally:
        lock.release()


def test_indexing_while_vectors_are_being_built(tmp_path):
    h = _big_backlog(tmp_path)
    recall = h.recall(background_embedding=True)
    recall.refresh()
    response = _semantic_while_another_window_embeds(recall, "heron")
    assert response["semantic_status"] == "indexing" and response["semantic_pending"] > 0
    assert response["results"], "keyword results stand in while vectors are built"
    h.close()


def test_the_keyword_results_that_stand_in_are_keyword_modes_own(tmp_path):
    h = _big_backlog(tmp_path)
    ids = h.session("agreed", tmp_path / "repo", "Let me check the heron retry limit of the upstream client.",
                    "ok", "go on", "The heron retry limit of the upstream client stays at five, as we agreed.")
    recall = h.recall(background_embedding=True)
    recall.refresh()
    standing_in = _semantic_while_another_window_embeds(recall, "heron retry limit upstream client")
    keyword = recall.search("heron retry limit upstream client", session_id="ask", mode="keyword")
    assert standing_in["semantic_status"] == "indexing"
    shown = [(r["session_id"], r["message_id"]) for r in standing_in["results"]]
    assert shown == [(r["session_id"], r["message_id"]) for r in keyword["results"]]
    assert shown[0] == ("agreed", ids[3])  # what was agreed, not the line announcing the check
    h.close()


def test_ready_after_a_small_backlog_is_embedded_on_the_spot(history):
    assert history.recall().search("anything", session_id="ask", mode="semantic")["semantic_status"] == "ready"


# -- a remote provider: consent, redaction, failures ---------------------------------------



@pytest.fixture
def remote(tmp_path):
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    h.session("old", repo, "deploy with the token", f"use OPENAI_API_KEY={SECRET} for the heron deploy")
    h.session("ask", repo)
    with FakeEmbeddingServer(dim=8) as server:
        h.use_remote_embedder(server.base_url)
        yield h, server
    h.close()


def consent(h: History, server: FakeEmbeddingServer, projects=("*",)) -> None:
    record_consent(h.root / "plugins" / "project-history-recall", profile="default", projects=list(projects),
                   provider="openai", endpoint=server.base_url, model="m")


def test_nothing_is_sent_before_consent(remote):
    h, server = remote
    recall = h.recall(background_embedding=True)
    for mode in ("hybrid", "semantic", "keyword"):
        response = recall.search("heron deploy", session_id="ask", mode=mode)
        assert response["semantic_status"] == "consent_required"
        assert session_ids(response) == ["old"]
    assert recall.embed()["semantic_status"] == "consent_required"
    recall.refresh(force=True)
    recall.status()
    assert server.requests == []


def test_after_consent_texts_are_redacted(remote):
    h, server = remote
    consent(h, server)
    response = h.recall().search("heron deploy", session_id="ask", mode="hybrid")
    assert response["semantic_status"] == "ready"
    sent = [text for request in server.embedding_requests for text in request.inputs]
    assert sent and all(SECRET not in text for text in sent)
    assert any("heron deploy" in text for text in sent)


def test_a_changed_endpoint_needs_consent_again(remote):
    h, server = remote
    consent(h, server)
    h.recall().search("heron", session_id="ask", mode="hybrid")
    with FakeEmbeddingServer(dim=8) as other:
        h.use_remote_embedder(other.base_url)
        response = h.recall().search("heron", session_id="ask", mode="hybrid")
        assert response["semantic_status"] == "consent_required"
        assert other.requests == []


def test_consent_for_another_project_does_not_cover_this_one(remote):
    h, server = remote
    consent(h, server, projects=["auto:/somewhere/else"])
    assert h.recall().search("heron", session_id="ask", mode="hybrid")["semantic_status"] == "consent_required"
    assert server.embedding_requests == []


def test_a_failing_provider_is_unavailable_and_keyword_results_stay(remote):
    h, server = remote
    consent(h, server)
    server.fail_next(50, 500)
    response = h.recall().search("heron deploy", session_id="ask", mode="hybrid")
    assert response["semantic_status"] == "unavailable" and response["semantic_error"]
    assert session_ids(response) == ["old"]


# -- vectors belong to messages, not projects ----------------------------------------------


def test_moving_a_session_re_embeds_nothing(tmp_path, monkeypatch):
    h, _, _, pid = two_projects(tmp_path)
    passages: list[int] = []
    original = LocalProvider.embed_passages

    def counting(self, texts):
        passages.append(len(texts))
        return original(self, texts)

    monkeypatch.setattr(LocalProvider, "embed_passages", counting)
    assert first_from(h, "ask-a") == ["old"]
    embedded = sum(passages)
    assert embedded > 0
    assert h.recall().move_session("old", pid)["success"]
    assert first_from(h, "ask-b") == ["old"] and first_from(h, "ask-a") == []
    assert sum(passages) == embedded
    h.close()


def first_from(h: History, asker: str) -> list[str]:
    return session_ids(h.recall().search("heron cache", session_id=asker, mode="semantic"))


def test_the_user_consents_with_the_slash_command(remote, monkeypatch, tmp_path):
    from project_history_recall.faces.hermes.commands import run

    h, server = remote
    monkeypatch.setenv("HERMES_HOME", str(h.root))
    monkeypatch.chdir(tmp_path / "repo")
    before = h.recall().search("heron deploy", session_id="ask", mode="hybrid")
    assert before["semantic_status"] == "consent_required" and "/recall consent" in before["semantic_message"]
    text, _ = run("consent", lambda: h.recall())
    assert "may now be sent" in text and server.requests == []
    assert h.recall().search("heron deploy", session_id="ask", mode="hybrid")["semantic_status"] == "ready"
    text, _ = run("consent revoke", lambda: h.recall())
    assert "revoked" in text
    assert h.recall().search("heron", session_id="ask", mode="hybrid")["semantic_status"] == "consent_required"


def test_status_shows_what_was_sent_as_counts_only(remote):
    h, server = remote
    assert h.recall().status()["sent"] == {"requests": 0, "texts": 0, "chars": 0}
    consent(h, server)
    h.recall().search("heron deploy", session_id="ask", mode="hybrid")
    status = h.recall().status()
    assert status["sent"]["requests"] == len(server.requests) > 0
    assert status["consent"]["given"] and SECRET not in str(status)


def test_the_backlog_count_follows_turns_embedding_rewinds_and_deletions_in_one_process(tmp_path):
    """A long-lived process counts again only the sessions a write may have changed: the
    count it reports must still be the true one after each kind of write."""
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    h.session("a", repo, "note about the heron pipeline", "answer about herons")
    h.session("b", repo, "the egret backlog", "egrets are next")
    h.session("ask", repo)
    recall = h.recall()

    def pending() -> int:
        return recall.search("heron", session_id="ask", mode="keyword").get("semantic_pending", 0)

    assert pending() == 4
    recall.embed()
    assert pending() == 0
    h.say("a", ("user", "one more heron question"))
    assert pending() == 1  # a turn: its session is counted again
    said = h.say("b", ("user", "and the egret answer?"))
    recall.refresh()
    recall.embed()
    assert pending() == 0  # vectors written: the sessions that had a backlog are counted again
    h.say("b", ("assistant", "egrets after herons"))
    assert pending() == 1
    h.db.rewind_to_message("b", said)
    assert pending() == 0  # the rewound messages' vectors are orphans: they count for nothing
    h.say("a", ("assistant", "the last heron note"))
    h.db.delete_session("b")
    assert pending() == 1
    h.close()


# -- one long-lived process: the vectors it holds follow every write ------------------------


@pytest.mark.parametrize("room", ["spare rows", "no spare rows"])
def test_a_long_lived_process_finds_new_vectors_and_never_returns_removed_ones(tmp_path, monkeypatch, room):
    """Hermes keeps one process for many turns: its vector matrix is extended with the rows each
    turn adds and read again whole after deletions. Each answer must be what the index holds
    then: the new message found (in a scope scored from its kept block and in one scored whole),
    a rewound or deleted one never shown."""
    if room == "no spare rows":
        from project_history_recall.search import semantic
        monkeypatch.setattr(semantic, "MIN_SPARE_ROWS", 0)
        monkeypatch.setattr(semantic, "SPARE_SHARE", 0.0)
    h = History(tmp_path / "hermes")
    small, large = git_init(tmp_path / "small"), git_init(tmp_path / "large")
    # 24 vectors in the small project, whose block then takes a turn's two as rows apart; 120
    # in the large one, over 80 % of all: scored with one product over the whole matrix.
    topics = ["invoice layout", "login timeout", "backup speed", "cache expiry", "font size", "deploy order"]
    for n, topic in enumerate(topics * 2):
        h.session(f"s{n}", small, f"the {topic} problem again", f"we looked at the {topic} settings")
    for n in range(60):
        h.session(f"l{n}", large, f"ticket {n} about the build matrix", f"rerun build {n} with more workers")
    h.session("ask", small)
    h.session("ask-large", large)
    recall = h.recall()
    recall.embed()

    def shown(asker: str, query: str) -> list[tuple[str, int]]:
        recall.refresh()
        recall.embed()
        response = recall.search(query, session_id=asker, mode="semantic", limit=3)
        return [(r["session_id"], r["message_id"]) for r in response["results"]]

    question = "where do kingfishers dig their nests"
    assert all(mid is not None for _, mid in shown("ask", question))
    said = h.say("s1", ("user", "where do kingfishers dig their nests?"))
    h.say("s1", ("assistant", "no idea, ask the bird club"))
    assert shown("ask", question)[0] == ("s1", said)
    h.db.rewind_to_message("s1", said)
    assert ("s1", said) not in shown("ask", question)
    again = h.say("s2", ("user", "kingfishers nest in burrows they dig in river banks"))
    assert shown("ask", question)[0] == ("s2", again)
    h.db.delete_session("s2")
    assert all(sid != "s2" for sid, _ in shown("ask", question))
    shown("ask", "the invoice layout")  # the scope as it stands, so that a new session joins it
    joined = h.session("s-new", small, "kingfishers dig their nest burrows in soft river banks", "noted")
    assert shown("ask", question)[0] == ("s-new", joined[0])
    in_large = h.say("l3", ("user", "kingfishers dig nest burrows in sandy river banks"))
    h.say("l3", ("assistant", "noted for the build matrix ticket"))
    assert shown("ask-large", question)[0] == ("l3", in_large)
    assert all(sid != "l3" for sid, _ in shown("ask", question))  # another project's vector, never shown
    h.close()
