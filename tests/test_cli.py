"""``phr``: a thin face over the library, human output by default, --json for scripts."""

from __future__ import annotations

import json
import subprocess
import sys

import yaml
from click.testing import CliRunner

from builders import History, git_init
from project_history_recall.faces.cli import main


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_search_index_status_round_trip(tmp_path):
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    h.session("old", repo, "the pelican deploy script", "run deploy/pelican.sh --prod")
    home = str(h.root)
    code, out = run("--home", home, "status", "--json")
    assert code == 0 and json.loads(out)["index_exists"] is False
    code, out = run("--home", home, "index", "--json")
    assert code == 0 and json.loads(out)["sessions_updated"] == 1
    code, out = run("--home", home, "search", "pelican", "--cwd", str(repo), "--json")
    payload = json.loads(out)
    assert code == 0 and [r["session_id"] for r in payload["results"]] == ["old"]
    code, out = run("--home", home, "search", "pelican", "--cwd", str(repo))
    assert code == 0 and "@session:old" in out and "**pelican**" in out
    code, out = run("--home", home, "index", "--force")
    assert code == 0 and "indexed 1 changed session of 1" in out
    h.close()


def test_search_as_a_session_excludes_it(tmp_path):
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    h.session("a", repo, "pelican")
    h.session("b", repo, "pelican too")
    code, out = run("--home", str(h.root), "search", "pelican", "--session", "a", "--json")
    assert code == 0 and [r["session_id"] for r in json.loads(out)["results"]] == ["b"]
    h.close()


def test_errors_are_readable_and_exit_non_zero(tmp_path):
    code, out = run("--home", str(tmp_path / "none"), "search", "x", "--json")
    assert code == 1 and json.loads(out)["code"] == "no_db"
    result = CliRunner().invoke(main, ["--home", str(tmp_path / "none"), "search", "x"])
    assert result.exit_code == 1 and "session database not found" in result.output


def test_install_writes_a_plugin_folder_and_enables_it(tmp_path):
    home = tmp_path / "hermes"
    home.mkdir()
    (home / "config.yaml").write_text("model:\n  default: x\nplugins:\n  disabled: [project-history-recall]\n")
    code, out = run("--home", str(home), "install", "--json")
    assert code == 0 and json.loads(out)["enabled"] is True
    folder = home / "plugins" / "project-history-recall"
    assert (folder / "plugin.yaml").is_file() and (folder / "__init__.py").is_file()
    manifest = yaml.safe_load((folder / "plugin.yaml").read_text())
    assert manifest["name"] == "project-history-recall" and manifest["kind"] == "standalone"
    config = yaml.safe_load((home / "config.yaml").read_text())
    assert config["plugins"]["enabled"] == ["project-history-recall"] and config["plugins"]["disabled"] == []
    assert config["model"] == {"default": "x"}


def test_phr_is_an_installed_command(tmp_path):
    out = subprocess.run([sys.executable, "-m", "project_history_recall.faces.cli", "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert "search" in out and "index" in out and "install" in out


def test_status_counts_what_index_then_changes(tmp_path):
    """A retitle, an ended session, a new message and a deleted session are each counted by
    ``status`` and then done by ``index`` — the same number (issue 19 §5)."""
    h = History(tmp_path / "hermes")
    repo = git_init(tmp_path / "repo")
    for sid in ("a", "b", "c", "d"):
        h.session(sid, repo, f"{sid} talks about the heron", "ok")
    home = str(h.root)
    assert run("--home", home, "index")[0] == 0
    for change in (lambda: h.db.set_session_title("a", "Heron plan"), lambda: h.db.end_session("b", "done"),
                   lambda: h.say("c", "one more heron note"), lambda: h.db.delete_session("d")):
        change()
        pending = json.loads(run("--home", home, "status", "--json")[1])["sessions_pending"]
        report = json.loads(run("--home", home, "index", "--json")[1])
        assert pending == 1 == report["sessions_updated"] + report["sessions_removed"], report
    code, out = run("--home", home, "status")
    assert code == 0 and "(0 changed since the last index)" in out
    h.close()
