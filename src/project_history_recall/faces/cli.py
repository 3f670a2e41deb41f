"""``phr``: the command line, a thin face over :class:`~project_history_recall.recall.Recall`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from project_history_recall.errors import RecallError
from project_history_recall.faces import humanize
from project_history_recall.hermes_home import HermesHome


def _home(path: str | None) -> HermesHome:
    return HermesHome(Path(path).expanduser()) if path else HermesHome.current()


def _recall(ctx: click.Context):
    from project_history_recall.recall import Recall

    return Recall(ctx.obj["home"], detach_embedding=True)


def _emit(payload: dict, as_json: bool, human) -> None:
    if as_json:
        click.echo(json.dumps(payload, ensure_ascii=False, indent=2, default=str))
    else:
        human(payload)
    if payload.get("success") is False:
        sys.exit(1)


def _run(fn, as_json: bool, human) -> None:
    try:
        payload = fn()
    except RecallError as exc:
        payload = exc.as_dict()
        if not as_json:
            click.echo(humanize.error(payload), err=True)
            sys.exit(1)
    _emit(payload, as_json, human)


@click.group()
@click.option("--home", "home", envvar="HERMES_HOME", default=None,
              help="Hermes home (default: $HERMES_HOME, else ~/.hermes).")
@click.version_option(package_name="project-history-recall")
@click.pass_context
def main(ctx: click.Context, home: str | None) -> None:
    """Find what was said and done in earlier sessions of the same project."""
    ctx.obj = {"home": _home(home)}


def _echo(formatter):
    """A human printer for ``_emit`` from a :mod:`.humanize` formatter (shared with ``/recall``)."""
    return lambda payload: click.echo(formatter(payload))


def print_search(payload: dict) -> None:
    click.echo(humanize.search(payload))


def _asker(cwd: str | None) -> str | None:
    return str(Path(cwd).expanduser().resolve()) if cwd is not None else None


def _checked(ctx: click.Context, session_id: str | None, cwd: str | None):
    """The facade, once the ``--session`` and ``--cwd`` the person typed name something real."""
    recall = _recall(ctx)
    recall.check_asker(session_id, cwd)
    return recall


def _fresh(ctx: click.Context, call, session_id: str | None = None, cwd: str | None = None) -> dict:
    """A read that says "building" / "updating" the way the tools do."""
    recall = _checked(ctx, session_id, cwd)
    return recall.answer(lambda: call(recall))


@main.command()
@click.argument("query", nargs=-1, required=True)
@click.option("--cwd", default=None, help="Ask as a session in this folder (default: the current folder).")
@click.option("--session", "session_id", default=None, help="Ask as this session (its project, excluded itself).")
@click.option("--mode", type=click.Choice(["hybrid", "keyword", "semantic"]), default="hybrid")
@click.option("--limit", type=int, default=5, show_default=True)
@click.option("--after", default=None, help="Only after this time (2026-11-01, ISO time, or 7d).")
@click.option("--before", default=None, help="Only before this time.")
@click.option("--kinds", default=None, help="Comma list of user,assistant,tool_call,title.")
@click.option("--all-projects", is_flag=True, help="Search every project on purpose.")
@click.option("--branch", default=None, help="Narrow to a git branch (unknown-branch sessions stay).")
@click.option("--json", "as_json", is_flag=True, help="JSON output for scripts.")
@click.pass_context
def search(ctx: click.Context, query: tuple[str, ...], cwd: str | None, session_id: str | None, mode: str,
           limit: int, after: str | None, before: str | None, kinds: str | None, all_projects: bool,
           branch: str | None, as_json: bool) -> None:
    """Search this project's history."""
    cwd = _asker(cwd)
    _run(lambda: _fresh(ctx, lambda r: r.search(" ".join(query), session_id=session_id, cwd=cwd, mode=mode,
                                                 limit=limit, after=after, before=before, kinds=kinds,
                                                 scope="all" if all_projects else "project", branch=branch),
                       session_id, cwd),
         as_json, print_search)


@main.command()
@click.option("--force", is_flag=True, help="Rebuild from scratch (the old index serves until it is done).")
@click.option("--background", is_flag=True, help="Hand the work to a background job and return at once.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def index(ctx: click.Context, force: bool, background: bool, as_json: bool) -> None:
    """Build or refresh the index (with a progress bar); reports a job that is already running."""
    recall = _recall(ctx)
    bars: dict[str, Any] = {}
    shown: dict[str, int] = {}

    def progress_for(label: str):
        def progress(done: int, total: int) -> None:
            if as_json or total <= 0:
                return
            if label not in bars:
                bars[label] = click.progressbar(length=total, label=label, file=sys.stderr)
                bars[label].__enter__()
                shown[label] = 0
            bars[label].update(done - shown[label])
            shown[label] = done
        return progress

    def run() -> dict:
        if background:  # a detached job: this process is about to exit
            return recall.request_index(force=force, reason="cli", background=True)
        try:
            return recall.index_in_foreground(force=force, progress=progress_for("indexing sessions"),
                                              embed_progress=progress_for("embedding messages"))
        finally:
            for bar in bars.values():
                bar.__exit__(None, None, None)

    _run(run, as_json, _echo(humanize.index))


@main.command()
@click.option("--cwd", default=None, help="Ask from this folder (default: the current folder).")
@click.option("--session", "session_id", default=None, help="Ask as this session.")
@click.option("--branch", default=None)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def status(ctx: click.Context, cwd: str | None, session_id: str | None, branch: str | None, as_json: bool) -> None:
    """Index health; answers even when there is no index (and never creates one)."""
    _run(lambda: _checked(ctx, session_id, _asker(cwd)).status(session_id=session_id, cwd=_asker(cwd),
                                                               branch=branch), as_json,
         _echo(humanize.status))


@main.command()
@click.argument("session_ref")
@click.option("--around", "around_message_id", type=int, default=None, help="Only a window around this message id.")
@click.option("--window", type=int, default=None, help="Messages on each side of --around (default 5).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def session(ctx: click.Context, session_ref: str, around_message_id: int | None, window: int | None,
            as_json: bool) -> None:
    """Open one session by id, @session: link or unique prefix."""
    _run(lambda: _fresh(ctx, lambda r: r.session(session_ref, around_message_id=around_message_id, window=window)),
         as_json, _echo(humanize.session))


@main.command()
@click.option("--cwd", default=None, help="Ask from this folder (default: the current folder).")
@click.option("--session", "session_id", default=None, help="Ask as this session.")
@click.option("--all-projects", is_flag=True, help="Every project, not just this one.")
@click.option("--after", default=None, help="Sessions active at or after this time (2026-11-01, ISO, or 7d).")
@click.option("--before", default=None, help="Sessions started before this time.")
@click.option("--branch", default=None)
@click.option("--limit", type=int, default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def timeline(ctx: click.Context, cwd: str | None, session_id: str | None, all_projects: bool, after: str | None,
             before: str | None, branch: str | None, limit: int, as_json: bool) -> None:
    """Sessions newest first, in this project (or every project)."""
    _run(lambda: _fresh(ctx, lambda r: r.timeline(session_id=session_id, cwd=_asker(cwd),
                                                  scope="all" if all_projects else "project", after=after,
                                                  before=before, branch=branch, limit=limit),
                       session_id, _asker(cwd)),
         as_json, _echo(humanize.timeline))


@main.command()
@click.option("--cwd", default=None, help="Mark the project of this folder (default: the current folder).")
@click.option("--session", "session_id", default=None)
@click.option("--branch", default=None)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def projects(ctx: click.Context, cwd: str | None, session_id: str | None, branch: str | None, as_json: bool) -> None:
    """Every project with its sessions and messages; * marks the current one."""
    _run(lambda: _fresh(ctx, lambda r: r.projects(session_id=session_id, cwd=_asker(cwd), branch=branch),
                        session_id, _asker(cwd)),
         as_json, _echo(humanize.projects))


@main.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def install(ctx: click.Context, as_json: bool) -> None:
    """Install as a plugin folder in $HERMES_HOME/plugins/ and enable it."""
    from project_history_recall.faces.hermes.install import install as do_install

    def human(p: dict) -> None:
        click.echo(f"installed {p['plugin_dir']} and enabled it in {p['config']}")

    _run(lambda: do_install(ctx.obj["home"]), as_json, human)


@main.command()
@click.option("--demo-home", default=None, help="Where to build the demo home (default: a cache folder).")
@click.option("--json", "as_json", is_flag=True, help="JSON output for scripts.")
@click.pass_context
def demo(ctx: click.Context, demo_home: str | None, as_json: bool) -> None:
    """Index your Hermes history (or a built-in demo one when you have none) and run a few searches."""
    from project_history_recall.faces.demo import run_demo

    def quiet(_: object) -> None:
        return None

    _run(lambda: run_demo(ctx.obj["home"], Path(demo_home) if demo_home else None,
                          echo=quiet if as_json else click.echo, print_search=quiet if as_json else print_search),
         as_json, quiet)



@main.command("code-history")
@click.argument("path")
@click.option("--symbol", default=None, help="Only rounds touching this function or class.")
@click.option("--query", default=None, help="Only rounds whose request or patch mentions these words.")
@click.option("--branch", default=None, help="Narrow to a git branch (unknown-branch sessions stay).")
@click.option("--limit", type=int, default=None, help="How many rounds, newest kept (default 10).")
@click.option("--cwd", default=None, help="Ask from this folder (default: the current folder).")
@click.option("--session", "session_id", default=None, help="Ask as this session.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def code_history(ctx: click.Context, path: str, symbol: str | None, query: str | None, branch: str | None,
                 limit: int | None, cwd: str | None, session_id: str | None, as_json: bool) -> None:
    """How a file's code evolved across this project's sessions, oldest round first."""
    asker = _asker(cwd) if cwd is not None else (None if session_id else os.getcwd())
    _run(lambda: _checked(ctx, session_id, asker).code_history(path, session_id=session_id, cwd=asker,
                                                               symbol=symbol, query=query, branch=branch,
                                                               limit=limit), as_json, _echo(humanize.code_history))


@main.command()
@click.option("--all-projects", is_flag=True, help="Consent for every project, not just this one.")
@click.option("--revoke", is_flag=True, help="Withdraw the consent: nothing more is sent.")
@click.option("--cwd", default=None, help="The project to consent for (default: the current folder).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def consent(ctx: click.Context, all_projects: bool, revoke: bool, cwd: str | None, as_json: bool) -> None:
    """Consent to sending history to the configured remote embedding provider (secrets redacted)."""
    _run(lambda: _checked(ctx, None, _asker(cwd)).consent(cwd=_asker(cwd) if cwd else os.getcwd(),
                                                          everywhere=all_projects, revoke=revoke),
         as_json, _echo(humanize.consent))


@main.command()
@click.argument("session_ref")
@click.option("--undo", is_flag=True, help="Lift the tombstone: the session is indexed again.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def forget(ctx: click.Context, session_ref: str, undo: bool, as_json: bool) -> None:
    """Remove a session (and sessions continued from it) from the index for good. Hermes keeps it."""
    _run(lambda: _recall(ctx).forget(session_ref, undo=undo), as_json, _echo(humanize.withheld))


@main.command()
@click.option("--project", default=None, help="An explicit project's name or id, or a project's folder.")
@click.option("--path", "glob", default=None, help="A folder or glob over cwd / repo root (covers subfolders).")
@click.option("--remove", is_flag=True, help="Remove this exclusion: its sessions are indexed again.")
@click.option("--list", "show", is_flag=True, help="List exclusions (with config's) and forgotten sessions.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def exclude(ctx: click.Context, project: str | None, glob: str | None, remove: bool, show: bool,
            as_json: bool) -> None:
    """Keep a whole project or folders out of the index and of any remote embedding."""
    recall = _recall(ctx)
    if show:
        _run(recall.withheld, as_json, _echo(humanize.withheld))
        return
    _run(lambda: recall.exclude(project=project, path=glob, remove=remove), as_json, _echo(humanize.withheld))



@main.command("mcp")
@click.option("--cwd", default=None, type=click.Path(exists=True, file_okay=False),
              help="The project to serve: this folder's (default: the folder the server starts in).")
@click.pass_context
def mcp_command(ctx: click.Context, cwd: str | None) -> None:
    """Serve the model's tools over MCP on stdin/stdout (for Claude Code, Codex, any MCP host)."""
    from project_history_recall.faces import mcp_server
    from project_history_recall.recall import Recall

    home = ctx.obj["home"]
    # A long-lived server, like the plugin: a large embedding backlog is worked off in the background.
    mcp_server.serve(lambda: Recall(home, background_embedding=True), _asker(cwd) or os.getcwd())


if __name__ == "__main__":  # pragma: no cover
    main()
