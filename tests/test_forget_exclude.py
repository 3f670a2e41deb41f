"""Issue 15, item 3: a person forgets a session, excludes a project or folder, and marks text
``<private>``; through Hermes's dispatch (tools, ``/recall``) and ``phr``. What is withheld is
never indexed, embedded or found again (``--force`` included), and Hermes's state.db is not written."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from builders import History, alpha_and_beta, dispatch, file_digest, tool_call
from fakes.embedding_server import FakeEmbeddingServer
from project_history_recall.faces.cli import main
from project_history_recall.services.consent import record_consent

pytestmark = pytest.mark.usefixtures("registered_plugin")

SECRET = "walrus"


def phr(h: History, *args: str) -> dict:
    result = CliRunner().invoke(main, ["--home", str(h.root), *args, "--json"], catch_exceptions=False)
    return json.loads(result.output)


def slash(args: str) -> str:
    from hermes_cli.plugins import get_plugin_command_handler, resolve_plugin_command_result

    handler = get_plugin_command_handler("recall")
    assert handler is not None
    return str(resolve_plugin_command_result(handler(args)))


def search(query: str, asker: str, mode: str = "keyword") -> dict:
    reply = dispatch("project_history_search", {"query": query, "mode": mode}, session_id=asker)
    assert reply["success"], reply
    return reply


def found(query: str, asker: str = "b-now", mode: str = "keyword") -> set[str]:
    return {r["session_id"] for r in search(query, asker, mode)["results"]}


def configure(h: History, **block) -> None:
    (h.root / "config.yaml").write_text(yaml.safe_dump({"plugins": {"entries": {"project-history-recall": block}}}))


def remote(server: FakeEmbeddingServer) -> dict:
    return {"embedding": {"provider": "openai", "base_url": server.base_url, "model": "m", "dimensions": 8,
                          "enabled": True}}


def consent_everywhere(h: History, server: FakeEmbeddingServer) -> None:
    record_consent(h.root / "plugins" / "project-history-recall", profile="default", projects=["*"],
                   provider="openai", endpoint=server.base_url, model="m")


def sent_texts(server: FakeEmbeddingServer) -> str:
    return "\n".join(text for request in server.embedding_requests for text in request.inputs)


@pytest.fixture()
def two(tmp_path):
    """Project Alpha and project Beta; Beta's ``b-secret`` edited ``plan.py`` and was continued in ``b-child``."""
    h, a, b = alpha_and_beta(tmp_path)
    h.session("a-old", a, "alpha talks about the heron", "fine")
    h.session("b-secret", b, f"the {SECRET} migration plan", title="Beta walrus plan")
    h.say("b-secret", ("assistant", "", {"tool_calls": [tool_call(
        "c1", "write_file", {"path": str(b / "plan.py"), "content": f"{SECRET}_steps = 3\n"})]}))
    h.say("b-secret", ("tool", json.dumps({"bytes_written": 16}), {"tool_call_id": "c1", "tool_name": "write_file"}))
    h.session("b-child", b, f"continuing the {SECRET} plan", parent="b-secret")
    h.session("b-other", b, "the heron in beta")
    h.session("b-now", b)
    h.session("a-now", a)
    yield h
    h.close()


def rounds(asker: str = "b-now") -> list:
    reply = dispatch("project_code_history", {"path": "plan.py"}, session_id=asker)
    return reply.get("rounds", []) if reply.get("success") else []


def test_forget_removes_a_session_from_every_answer_and_survives_force(two):
    with FakeEmbeddingServer(dim=8) as server:
        configure(two, **remote(server))
        consent_everywhere(two, server)
        assert found(SECRET) == {"b-secret", "b-child"}
        assert "b-secret" in found(SECRET, mode="semantic")
        assert rounds(), "the edit round is there before forgetting"
        vectors = phr(two, "status")["semantic"]["vectors_indexed"]
        hermes_before = file_digest(two.root / "state.db")

        reply = phr(two, "forget", "@session:b-secret")
        assert reply["success"] and reply["forgotten"] == "b-secret" and reply["sessions_withheld"] == 2

        for mode in ("keyword", "semantic", "hybrid"):
            assert not found(SECRET, mode=mode) & {"b-secret", "b-child"}, mode
        assert rounds() == []
        assert phr(two, "status")["semantic"]["vectors_indexed"] < vectors
        opened = dispatch("project_history", {"operation": "session", "session_id": "b-secret"}, session_id="b-now")
        assert opened["code"] == "not_found", opened

        assert phr(two, "index", "--force")["success"] is not False
        assert not found(SECRET) and rounds() == []
        status = phr(two, "status")
        assert status["withheld"] == {"forgotten": 1, "exclusions": 0, "sessions_withheld": 2}
        assert SECRET not in json.dumps(status) and "b-secret" not in json.dumps(status)
        assert file_digest(two.root / "state.db") == hermes_before  # Hermes's database is never written

        assert phr(two, "forget", "--undo", "b-sec")["restored"] == "b-secret"
        assert found(SECRET) == {"b-secret", "b-child"} and rounds()


def test_a_continuation_made_after_forgetting_stays_out(two):
    phr(two, "forget", "b-secret")
    two.session("b-later", two.root.parent / "beta", f"still on the {SECRET}", parent="b-child")
    assert not found(SECRET)
    assert found("heron") == {"b-other"}


def test_forget_with_the_slash_command(two):
    assert found(SECRET) == {"b-secret", "b-child"}
    text = slash("forget @session:b-secret")
    assert "Forgot b-secret" in text, text
    assert not found(SECRET)
    assert "no longer forgotten" in slash("forget b-secret --undo")
    assert found(SECRET) == {"b-secret", "b-child"}
    assert "needs one session id" in slash("forget")
    assert phr(two, "forget", "nope")["code"] == "not_found"


def test_exclude_keeps_a_project_from_the_remote_embedding_server(two):
    """Beta excluded before anything is indexed: not one request to the provider (Alpha has no
    history besides a-old, removed here, so any request at all would be Beta's)."""
    with FakeEmbeddingServer(dim=8) as server:
        configure(two, **remote(server))
        consent_everywhere(two, server)
        assert phr(two, "exclude", "--project", "Beta")["success"]
        phr(two, "exclude", "--path", str(two.root.parent / "alpha"))
        phr(two, "index")
        for mode in ("keyword", "semantic", "hybrid"):
            assert found(SECRET, mode=mode) == set() and found("heron", asker="a-now", mode=mode) == set()
        assert server.requests == []
        listed = phr(two, "exclude", "--list")
        rules = {e.get("name") or e.get("path") for e in listed["exclusions"]}
        assert rules == {"Beta", str(two.root.parent / "alpha")}
        assert listed["sessions_withheld"] == 6
        projects = dispatch("project_history", {"operation": "projects"}, session_id="a-now")
        assert projects["withheld"]["sessions_withheld"] == 6 and SECRET not in json.dumps(projects)

        assert phr(two, "exclude", "--remove", "--project", "Beta")["removed"]
        phr(two, "index")
        assert found(SECRET) == {"b-secret", "b-child"}
        assert SECRET in sent_texts(server) and "alpha talks" not in sent_texts(server)
        assert phr(two, "exclude", "--remove", "--project", "Beta")["code"] == "not_found"
        assert phr(two, "exclude", "--project", "Gamma")["code"] == "not_found"


def test_exclude_globs_in_config(two, tmp_path):
    configure(two, exclude=[str(tmp_path / "be*")])
    assert found(SECRET) == set() and found("heron", asker="a-now") == {"a-old"}
    listed = phr(two, "exclude", "--list")
    assert listed["exclusions"] == [{"path": str(tmp_path / "be*"), "from": "config"}]
    assert phr(two, "exclude", "--remove", "--path", str(tmp_path / "be*"))["code"] == "excluded_in_config"
    configure(two)
    assert found(SECRET) == {"b-secret", "b-child"}


def test_private_spans_are_never_indexed_embedded_or_shown(two):
    with FakeEmbeddingServer(dim=8) as server:
        configure(two, **remote(server))
        consent_everywhere(two, server)
        beta = two.root.parent / "beta"
        two.session("b-priv", beta, "the vault code is <private>okapi 4417</private> for the heron",
                    "noted <PRIVATE>tangerine", title="Heron <private>okapi</private> vault")
        for mode in ("keyword", "semantic", "hybrid"):
            for secret in ("okapi", "4417", "tangerine"):
                assert "b-priv" not in found(secret, mode="keyword"), (mode, secret)
        reply = search("vault heron", "b-now", mode="hybrid")
        assert "b-priv" in {r["session_id"] for r in reply["results"]}
        opened = dispatch("project_history", {"operation": "session", "session_id": "b-priv"}, session_id="b-now")
        shown = json.dumps(reply) + json.dumps(opened)
        assert "[private]" in shown and not any(s in shown for s in ("okapi", "4417", "tangerine"))
        assert sent_texts(server) and not any(s in sent_texts(server) for s in ("okapi", "4417", "tangerine"))


def test_tombstones_live_beside_the_index_not_in_it(two):
    """A damaged index moved aside (or deleted) is rebuilt without what was forgotten."""
    phr(two, "forget", "b-secret")
    data = two.root / "plugins" / "project-history-recall"
    for part in data.glob("index.db*"):
        part.unlink()
    assert not found(SECRET) and found("heron") == {"b-other"}
    assert json.loads((data / "withheld.json").read_text())["forgotten"].keys() == {"b-secret"}
