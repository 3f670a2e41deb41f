"""The new-version notice, against a fake package index on 127.0.0.1 (never the internet)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from builders import Gate, History, dispatch, git_init, register_plugin
from project_history_recall.services import updates

PAGE = f"/simple/{updates.PACKAGE}/"


@dataclass
class FakeIndex:
    """A PEP 691 (or HTML) simple index serving one project."""

    releases: list[tuple[str, bool]] = field(default_factory=lambda: [("0.1.0", False), ("0.2.0", False)])
    mode: str = "json"  # json | html | error | slow
    hits: int = 0
    held: Gate = field(default_factory=Gate)  # where a "slow" request waits
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/simple"

    def files(self) -> list[tuple[str, bool]]:
        name = updates.PACKAGE.replace("-", "_")
        return [(f"{name}-{v}-py3-none-any.whl" if i % 2 == 0 else f"{name}-{v}.tar.gz", yanked)
                for i, (v, yanked) in enumerate(self.releases)]

    def body(self) -> tuple[str, bytes]:
        if self.mode == "html":
            yanked = ' data-yanked=""'
            links = "".join(f'<a href="../../f/{f}"{yanked if y else ""}>{f}</a><br/>' for f, y in self.files())
            return "text/html", f"<html><body>{links}</body></html>".encode()
        data = {"meta": {"api-version": "1.1"}, "name": updates.PACKAGE,
                "files": [{"filename": f, "url": f"../../f/{f}", "hashes": {}, "yanked": y} for f, y in self.files()]}
        return "application/vnd.pypi.simple.v1+json", json.dumps(data).encode()


@pytest.fixture()
def fake_index() -> Iterator[FakeIndex]:
    state = FakeIndex()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.hits += 1
            if state.mode == "slow":
                state.held.hold()
            if state.mode == "error" or self.path != PAGE:
                self.send_response(500 if state.mode == "error" else 404)
                self.end_headers()
                return
            kind, body = state.body()
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


@pytest.fixture()
def checking(tmp_path, monkeypatch, fake_index):
    """The check switched back on (conftest turns it off), pointed at the fake index."""
    monkeypatch.delenv(updates.DISABLE_ENV, raising=False)
    monkeypatch.setenv("PIP_INDEX_URL", fake_index.url)
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "hermes"))
    monkeypatch.setattr(updates, "_running_version", lambda: "0.1.0")
    register_plugin()
    return fake_index


def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "hermes" / "plugins" / "project-history-recall"


def settle(tmp_path: Path) -> None:
    """Wait for the background check of this data dir, if one runs."""
    checker = updates._checkers.get(str(data_dir(tmp_path)))
    if checker is not None and checker.thread is not None:
        checker.thread.join(10)


def status() -> dict:
    return dispatch("project_history", {"operation": "status"}, session_id="now")


@pytest.fixture()
def h(tmp_path):
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    h.session("old", repo, "hello")
    h.session("now", repo)
    yield h
    h.close()


# -- the index and what it lists ----------------------------------------------------------------


def test_latest_release_json_and_html(fake_index):
    fake_index.releases = [("0.1.0", False), ("0.2.0", False), ("0.3.0rc1", False), ("0.9.0", True)]
    assert updates.latest_release(fake_index.url, current="0.1.0") == "0.2.0"  # no pre-release, no yanked
    assert updates.latest_release(fake_index.url, current="0.3.0rc0") == "0.3.0rc1"
    fake_index.mode = "html"
    assert updates.latest_release(fake_index.url, current="0.1.0") == "0.2.0"
    fake_index.mode = "error"
    assert updates.latest_release(fake_index.url, current="0.1.0") is None
    assert updates.latest_release("file:///opt/pypi/simple") is None


def test_index_url_follows_pip(tmp_path, monkeypatch):
    assert updates.index_url() == "http://127.0.0.1:9/simple"  # conftest's PIP_INDEX_URL
    monkeypatch.delenv("PIP_INDEX_URL")
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = https://mirror.example/simple\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    assert updates.index_url() == "https://mirror.example/simple"  # via `pip config list`
    assert updates._from_pip_config_files() == "https://mirror.example/simple"
    conf.write_text("[global]\nindex-url = https://mirror.example/simple\n[install]\nindex-url = https://i.example/s\n")
    assert updates.index_url() == "https://i.example/s"
    assert updates._from_pip_config_files() == "https://i.example/s"
    assert updates._from_pip_config_output("global.cert='/x'\n") is None


# -- the notice, through the real registry ------------------------------------------------------


def test_a_newer_release_is_announced_once_on_the_next_tool_result(h, tmp_path, checking):
    first = dispatch("project_history_index", {}, session_id="now")
    assert first["success"] and "notice" not in first  # the check starts after this call
    settle(tmp_path)
    assert checking.hits == 1
    second = status()
    assert second["notice"] == ("project-history-recall 0.2.0 is available (running 0.1.0): "
                                "pip install -U project-history-recall, then restart Hermes.")
    third = dispatch("project_history_search", {"query": "hello", "mode": "keyword"}, session_id="now")
    assert "notice" not in third and third["success"]
    settle(tmp_path)
    assert checking.hits == 1  # not again within update_check_interval_hours
    state = json.loads((data_dir(tmp_path) / updates.STATE_FILE).read_text())
    assert state["latest"] == state["notified"] == "0.2.0" and state["checked_at"] > 0
    # A restart remembers what was said.
    updates._checkers.clear()
    assert "notice" not in status()
    # A later release, once the interval has passed, is announced in its turn.
    checking.releases.append(("0.3.0", False))
    (data_dir(tmp_path) / updates.STATE_FILE).write_text(json.dumps({**state, "checked_at": 0}))
    assert "notice" not in status()
    settle(tmp_path)
    assert "0.3.0 is available" in status()["notice"]


def test_running_the_newest_says_nothing(h, tmp_path, checking, monkeypatch):
    monkeypatch.setattr(updates, "_running_version", lambda: "0.2.0")
    status()
    settle(tmp_path)
    assert checking.hits == 1 and "notice" not in status()


def test_a_failing_index_is_silent(h, tmp_path, checking):
    checking.mode = "error"
    assert dispatch("project_history_index", {}, session_id="now")["success"]
    settle(tmp_path)
    assert checking.hits == 1 and "notice" not in status()


def test_an_index_slower_than_the_timeout_is_silent(h, tmp_path, checking, monkeypatch):
    monkeypatch.setattr(updates, "TIMEOUT", 0.3)
    checking.mode = "slow"
    assert dispatch("project_history_index", {}, session_id="now")["success"]
    settle(tmp_path)  # the check gave up on its own
    assert checking.held.reached.is_set() and not checking.held.passed.is_set()
    assert "notice" not in status()
    checking.held.open()


def test_the_check_never_delays_a_tool(h, tmp_path, checking, monkeypatch):
    monkeypatch.setattr(updates, "TIMEOUT", 60.0)  # longer than the index is held: only a background check can
    checking.mode = "slow"                         # let the tool answer before the test releases it
    checking.held.limit = 10.0
    assert dispatch("project_history_index", {}, session_id="now")["success"]
    assert checking.held.opened_in_time()
    settle(tmp_path)
    assert checking.hits == 1


def test_an_unreachable_index_is_silent(h, tmp_path, checking, monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    dispatch("project_history_index", {}, session_id="now")
    settle(tmp_path)
    assert "notice" not in status() and status()["success"]


def test_update_check_false_turns_it_off(h, tmp_path, checking):
    (h.root / "config.yaml").write_text(yaml.safe_dump(
        {"plugins": {"entries": {"project-history-recall": {"update_check": False}}}}))
    dispatch("project_history_index", {}, session_id="now")
    status()
    settle(tmp_path)
    assert checking.hits == 0


def test_status_with_no_index_still_creates_no_file(h, tmp_path, checking):
    reply = status()
    assert reply["success"] and reply["index_exists"] is False
    settle(tmp_path)
    assert checking.hits == 1  # the check ran...
    assert not (tmp_path / "hermes" / "plugins").exists()  # ...and wrote nothing
