"""Global test guards.

No test may reach the real internet through the update check: every test runs with
the new-version check switched off and pip pointed at a closed port on 127.0.0.1, so
even a check that got through would fail at once, locally. ``tests/test_updates.py``
turns the check back on against its own fake index on 127.0.0.1.

No test may touch the real ``$HOME`` or start Hermes's language servers: for the whole run
``HOME`` and the XDG folders point into a temporary folder, and Hermes's LSP service (which
otherwise runs ``npm install pyright`` into the home on the first file edit of a git
workspace, config ``lsp.enabled``) is never created. Session-wide, so module fixtures get it too.

No test may depend on the machine's speed: the bounds a read waits for the index
(1.5 s for a refresh, 5 s for a first build or ``/recall index``) are for users; on a
loaded CI machine a small build may take longer and a test would see "updating" by
chance. They are lifted here; the tests of a bound set their own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from builders import register_plugin
from project_history_recall.faces.hermes import commands
from project_history_recall.services import freshness


@pytest.fixture(autouse=True, scope="session")
def _a_temporary_home_and_no_language_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    from agent.lsp.manager import LSPService

    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(home))
        for name in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
            mp.setenv(name, str(home / name.lower()))
        mp.setenv("npm_config_cache", str(home / "npm"))
        mp.setenv("npm_config_offline", "true")
        # The same outcome as ``lsp: {enabled: false}`` in every test's config.yaml.
        mp.setattr(LSPService, "create_from_config", classmethod(lambda cls: None))
        yield


@pytest.fixture(autouse=True)
def _no_update_check_to_the_internet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROJECT_HISTORY_RECALL_UPDATE_CHECK", "0")
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)


@pytest.fixture(autouse=True)
def _read_bounds_a_slow_machine_cannot_hit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(freshness, "FRESH_WAIT", 120.0)
    monkeypatch.setattr(freshness, "FIRST_BUILD_WAIT", 120.0)
    monkeypatch.setattr(commands, "COMMAND_WAIT", 120.0)


@pytest.fixture
def registered_plugin(tmp_path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """``HERMES_HOME`` at ``tmp_path/hermes`` and the plugin registered through Hermes's own
    loader (test files use it with ``pytestmark = pytest.mark.usefixtures("registered_plugin")``)."""
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "hermes"))
    return register_plugin()
