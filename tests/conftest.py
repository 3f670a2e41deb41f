"""Global test guard: no test may reach the real internet through the update check.

Every test runs with the new-version check switched off and pip pointed at a
closed port on 127.0.0.1, so even a check that got through would fail at once,
locally. ``tests/test_updates.py`` turns the check back on against its own fake
index on 127.0.0.1.
"""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _no_update_check_to_the_internet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROJECT_HISTORY_RECALL_UPDATE_CHECK", "0")
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
