"""``phr``: the command line, a thin face over :class:`~project_history_recall.recall.Recall`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from .errors import RecallError
from .host import HermesHome


def _home(path: str | None) -> HermesHome:
    return HermesHome(Path(path).expanduser()) if path else HermesHome.current()


def _recall(ctx: click.Context):
    from .recall import Recall

    return Recall(ctx.obj["home"])


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
            click.echo(f"error: {exc.message} ({exc.code})", err=True)
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


def print_search(payload: dict) -> None:
    project = payload.get("project") or {}
    name = project.get("name") or project.get("key") or project.get("kind")
    click.echo(f"project: {name} · {payload.get('sessions_in_scope', 0)} sessions in scope · "
               f"semantic: {payload.get('semantic_status')}")
    if payload.get("message"):
        click.echo(payload["message"])
    for n, r in enumerate(payload.get("results", []), start=1):
        title = r.get("title") or "(untitled)"
        click.echo(f"{n}. {r['link']}  {title}  [{r['when']}, {r['kind']}, {r['score_source']}]")
        click.echo(f"   {r['snippet']}")


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
    if cwd is not None:
        cwd = str(Path(cwd).expanduser().resolve())
    _run(lambda: _recall(ctx).search(" ".join(query), session_id=session_id, cwd=cwd, mode=mode, limit=limit,
                                     after=after, before=before, kinds=kinds,
                                     scope="all" if all_projects else "project", branch=branch),
         as_json, print_search)


@main.command()
@click.option("--force", is_flag=True, help="Rebuild from scratch (the old index serves until it is done).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def index(ctx: click.Context, force: bool, as_json: bool) -> None:
    """Build or refresh the index."""
    recall = _recall(ctx)
    bar: Any = None
    shown = 0

    def progress(done: int, total: int) -> None:
        nonlocal bar, shown
        if as_json or total <= 0:
            return
        if bar is None:
            bar = click.progressbar(length=total, label="indexing sessions", file=sys.stderr)
            bar.__enter__()
        bar.update(done - shown)
        shown = done

    def run() -> dict:
        try:
            report = recall.refresh(force=force, progress=progress)
        finally:
            if bar is not None:
                bar.__exit__(None, None, None)
        return {"success": True, **report.as_dict()}

    def human(p: dict) -> None:
        click.echo(f"indexed {p['sessions_updated']} changed sessions of {p['sessions_total']} "
                   f"({p['messages_read']} messages) in {p['seconds']:.2f}s")

    _run(run, as_json, human)


@main.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Index health; answers even when there is no index (and never creates one)."""

    def human(p: dict) -> None:
        for key, value in p.items():
            if key != "success":
                click.echo(f"{key}: {value}")

    _run(lambda: _recall(ctx).status(), as_json, human)


@main.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def install(ctx: click.Context, as_json: bool) -> None:
    """Install as a plugin folder in $HERMES_HOME/plugins/ and enable it."""
    from .install import install as do_install

    def human(p: dict) -> None:
        click.echo(f"installed {p['plugin_dir']} and enabled it in {p['config']}")

    _run(lambda: do_install(ctx.obj["home"]), as_json, human)


@main.command()
@click.option("--demo-home", default=None, help="Where to build the demo home (default: a cache folder).")
@click.pass_context
def demo(ctx: click.Context, demo_home: str | None) -> None:
    """Index your Hermes history (or a built-in demo one when you have none) and run a few searches."""
    from .demo import run_demo

    run_demo(ctx.obj["home"], Path(demo_home) if demo_home else None, echo=click.echo, print_search=print_search)


if __name__ == "__main__":  # pragma: no cover
    main()
