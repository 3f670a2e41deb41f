"""Global test guards.

No test may reach the real internet through the update check: every test runs with
the new-version check switched off and pip pointed at a closed port on 127.0.0.1, so
even a check that got through would fail at once, locally. ``tests/test_updates.py``
turns the check back on against its own fake index on 127.0.0.1.

No test may depend on the machine's speed: the bounds a read waits for the index
(1.5 s for a refresh, 5 s for a first build or ``/recall index``) are for users; on a
loaded CI machine a small build may take longer and a test would see "updating" by
chance. They are lifted here; the tests of a bound set their own.
"""

from __future__ import annotations

import os

import pytest

from builders import register_plugin
from project_history_recall.faces.hermes import commands
from project_history_recall.services import freshness


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
