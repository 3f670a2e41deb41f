"""A realistic, seeded Hermes home for the benchmarks, written through Hermes's own APIs.

``python -m bench.corpus --size S --out DIR`` writes ``DIR/hermes`` (a Hermes
home: ``state.db`` and ``projects.db``), ``DIR/work`` (the project folders:
real ``git init`` repos, one with a linked worktree, plain folders) and
``DIR/queries.json`` (seeded queries with a current session in a large and in a
small project). ``DIR/corpus.json`` is the marker: a later call with the same
seed and size reuses the folder.

Why ``import_sessions`` for the bulk: ``append_message`` is one write
transaction per message (about 1,600 messages/s here, so M would take two
minutes and L ten); ``SessionDB.import_sessions`` is Hermes's own restore path
(one transaction per batch of at most 500 sessions / 50,000 messages, about
13,000 messages/s) and it also records ``started_at``, cwd, git fields, title
and parent exactly as given. The live path is still exercised: 1% of the
sessions are created empty and filled with ``update_session_cwd``,
``set_session_title`` and ``append_message``; rewinds use
``rewind_to_message`` (then the user types on), archives
``set_session_archived``.

Content is a pure function of (seed, size): one ``random.Random`` for the plan
and one per session (seeded by the session id) for its messages.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .textgen import SessionText, Topic
from .vocab import LARGE_PROJECT, PROJECTS, SMALL_PROJECT, ProjectSpec

GENERATOR_VERSION = 2
DEFAULT_SEED = 7
MARKER = "corpus.json"
QUERIES = "queries.json"
END = 1_767_225_600.0  # 2026-01-01T00:00:00Z: the corpus's "now"
SPAN = 365 * 86_400.0
SPECS = {p.key: p for p in PROJECTS}

# Import batches stay well inside SessionDB's import caps (500 sessions, 50,000 messages, 25 MB).
BATCH_SESSIONS = 400
BATCH_MESSAGES = 40_000
BATCH_BYTES = 16_000_000


@dataclass(frozen=True)
class Size:
    name: str
    sessions: int
    messages: int


SIZES = {
    "S": Size("S", 500, 20_000),
    "M": Size("M", 5_000, 200_000),
    "L": Size("L", 20_000, 1_000_000),
}


@dataclass
class SessionPlan:
    """Everything about a session except its messages (those are generated on demand)."""

    id: str
    project: str
    lang: str
    source: str
    started_at: float
    n_messages: int
    cwd: str | None = None  # relative to the work folder; "~" is the user's home
    git_root: str | None = None
    branch: str | None = None
    title: str | None = None
    parent: str | None = None
    archived: bool = False
    rewind: bool = False
    live: bool = False
    current: str | None = None  # "large" / "small": an empty session queries are asked from


@dataclass
class Corpus:
    """A written corpus: where it is and what it holds (the marker file's content)."""

    root: Path
    seed: int
    size: Size
    generator_version: int = GENERATOR_VERSION
    sessions: int = 0
    messages_written: int = 0
    messages_active: int = 0
    current: dict[str, str] = field(default_factory=dict)
    projects: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def hermes_home(self) -> Path:
        return self.root / "hermes"

    @property
    def work(self) -> Path:
        return self.root / "work"

    def queries(self) -> list[dict]:
        return json.loads((self.root / QUERIES).read_text(encoding="utf-8"))

    def as_dict(self) -> dict:
        data = asdict(self)
        data["root"] = str(self.root)
        return data


# -- the plan --------------------------------------------------------------------------


def _allocate(total: int, weights: list[float], minimum: int = 0) -> list[int]:
    """Split ``total`` in proportion to ``weights`` (largest remainder), each at least ``minimum``."""
    if not weights:
        return []
    total_weight = sum(weights)
    raw = [total * w / total_weight for w in weights]
    counts = [max(minimum, int(r)) for r in raw]
    order = sorted(range(len(raw)), key=lambda i: -(raw[i] - int(raw[i])))
    i = 0
    while sum(counts) < total:
        counts[order[i % len(order)]] += 1
        i += 1
    by_size = sorted(range(len(counts)), key=lambda i: -counts[i])
    i = 0
    while sum(counts) > total and any(c > minimum for c in counts):
        j = by_size[i % len(by_size)]
        if counts[j] > minimum:
            counts[j] -= 1
        i += 1
    return counts


def _places(spec: ProjectSpec) -> list[tuple[str, str | None, str | None]]:
    """(cwd, git root, fixed branch) a session of this project can run in."""
    if spec.kind == "home":
        return [("~", None, None)]
    places: list[tuple[str, str | None, str | None]] = []
    folders = list(spec.folders or spec.repos or spec.subdirs[:1])
    # An auto project outside git *is* its folder: a subfolder would be another project.
    subdirs = list(spec.subdirs) if (spec.kind == "explicit" or spec.repos) else []
    for cwd in dict.fromkeys([*folders, *spec.repos, *subdirs]):
        root = next((r for r in spec.repos if cwd == r or cwd.startswith(r + "/")), None)
        branch = None
        if spec.worktree and (cwd == spec.worktree[1] or cwd.startswith(spec.worktree[1] + "/")):
            root, branch = spec.worktree[0], spec.worktree[2]
        places.append((cwd, root, branch))
    if spec.worktree:
        places.append((spec.worktree[1], spec.worktree[0], spec.worktree[2]))
    return places


def _session_id(rng: random.Random, started_at: float, taken: set[str]) -> str:
    stamp = time.strftime("%Y%m%d_%H%M%S", time.gmtime(started_at))
    while True:
        sid = f"{stamp}_{rng.getrandbits(24):06x}"
        if sid not in taken:
            taken.add(sid)
            return sid


def plan_sessions(seed: int, size: Size) -> list[SessionPlan]:
    """The sessions of a corpus, oldest first. Deterministic in (seed, size)."""
    rng = random.Random(f"corpus:{seed}:{size.sessions}:{size.messages}")
    per_project = _allocate(size.sessions - 2, [p.share for p in PROJECTS], minimum=1)
    taken: set[str] = set()
    plans: list[SessionPlan] = []
    for spec, count in zip(PROJECTS, per_project, strict=True):
        places = _places(spec)
        for _ in range(count):
            started = END - SPAN + rng.uniform(0, SPAN - 3_600)
            lang = "en"
            if rng.random() < spec.zh_share:
                lang = "mixed" if rng.random() < 0.35 else "zh"
            cwd: str | None
            cwd, root, branch = rng.choice(places)
            if spec.kind == "home" and rng.random() < 0.3:
                cwd = None
            if root and not branch:
                branch = "main" if rng.random() < 0.7 else f"feat/{rng.choice(spec.terms).snake.replace('_', '-')}"
            roll = rng.random()
            source = "cli" if roll < 0.82 else ("tui" if roll < 0.94 else "cron")
            plan = SessionPlan(_session_id(rng, started, taken), spec.key, lang, source, started, 0, cwd, root, branch)
            if spec.kind != "home" and rng.random() < 0.05:
                plan.source = "subagent"
            plan.archived = plan.source != "subagent" and rng.random() < 0.04
            plan.rewind = rng.random() < 0.03
            plan.live = rng.random() < 0.01
            plans.append(plan)
    plans.sort(key=lambda p: (p.started_at, p.id))

    # Subagents run under an earlier session of their project, in its folder.
    earlier: dict[str, list[SessionPlan]] = {}
    for plan in plans:
        if plan.source == "subagent":
            parents = earlier.get(plan.project)
            if parents:
                parent = rng.choice(parents[-20:])
                plan.parent, plan.cwd = parent.id, parent.cwd
                plan.git_root, plan.branch = parent.git_root, parent.branch
            else:
                plan.source = "cli"
        if plan.source != "subagent":
            earlier.setdefault(plan.project, []).append(plan)

    weights = [rng.lognormvariate(0, 0.9) * (0.5 if p.source == "subagent" else 1.0) for p in plans]
    for plan, n in zip(plans, _allocate(size.messages, weights, minimum=2), strict=True):
        plan.n_messages = n
        plan.rewind = plan.rewind and n >= 6

    titles: set[str] = set()
    for plan in plans:
        if plan.source != "subagent" and rng.random() < 0.75:
            base = session_topic(seed, plan).title()
            title, k = base, 2
            while title.lower() in titles:
                title, k = f"{base} #{k}", k + 1
            titles.add(title.lower())
            plan.title = title

    for role, key, place in (("large", LARGE_PROJECT, _places(SPECS[LARGE_PROJECT])[0]),
                             ("small", SMALL_PROJECT, _places(SPECS[SMALL_PROJECT])[0])):
        started = END - 600.0 + (0 if role == "large" else 60)
        plans.append(SessionPlan(_session_id(rng, started, taken), key, "en", "cli", started, 0, place[0], place[1],
                                 "main" if place[1] else None, current=role))
    return plans


def session_topic(seed: int, plan: SessionPlan) -> Topic:
    rng = random.Random(f"session:{seed}:{plan.id}")
    return Topic.draw(rng, SPECS[plan.project], plan.lang)


def session_messages(seed: int, plan: SessionPlan, count: int | None = None, *, salt: str = "") -> list[dict]:
    """The messages of one session: user turns, tool rounds, assistant replies, with timestamps."""
    rng = random.Random(f"session:{seed}:{plan.id}{salt}")
    topic = Topic.draw(rng, SPECS[plan.project], plan.lang)
    text = SessionText(rng, topic)
    n = plan.n_messages if count is None else count
    messages: list[dict] = []
    while len(messages) < n:
        messages.append(text.user())
        for _ in range(rng.choice((0, 0, 1, 1, 2, 3)) if rng.random() < 0.7 else 0):
            messages.extend(text.tool_round())
        messages.append(text.assistant())
    messages = messages[:n]
    clock = plan.started_at + (plan.n_messages * 40.0 + 600 if salt else 0.0)
    for message in messages:
        clock += rng.uniform(3, 90)
        message["timestamp"] = round(clock, 3)
    return messages


def rewind_followup(seed: int, plan: SessionPlan) -> list[dict]:
    """What the user typed after rewinding: a fresh user turn and its answer."""
    return session_messages(seed, plan, 2, salt=":after-rewind")


# -- queries ---------------------------------------------------------------------------


def make_queries(seed: int, n: int = 200) -> list[dict]:
    """Seeded queries from the corpus vocabulary: English, Chinese and identifiers.

    40% from the large project's terms, 30% from the small one's, 30% from the
    others (mostly noise in either scope)."""
    rng = random.Random(f"queries:{seed}")
    others = [p for p in PROJECTS if p.key not in (LARGE_PROJECT, SMALL_PROJECT)]
    queries = []
    for i in range(n):
        roll = rng.random()
        spec = SPECS[LARGE_PROJECT] if roll < 0.4 else SPECS[SMALL_PROJECT] if roll < 0.7 else rng.choice(others)
        topic = Topic.draw(rng, spec, "en")
        kind = rng.random()
        if kind < 0.4:
            lang = "en"
            query = rng.choice((topic.main.en, f"{topic.main.en} {topic.problem.en}",
                                f"{topic.action.en} {topic.main.en}",
                                f"{topic.main.en} {topic.other.en} {topic.state.en}"))
        elif kind < 0.7:
            lang = "zh"
            query = rng.choice((topic.main.zh, f"{topic.main.zh}{topic.problem.zh}",
                                f"{topic.main.zh} {topic.other.zh}",
                                f"上次{topic.main.zh}的{topic.problem.zh}怎么解决的"))
        else:
            lang = "code"
            query = rng.choice((topic.func, topic.main.camel, topic.file, topic.extra, topic.main.snake, topic.func2))
        queries.append({"id": f"q{i + 1:03d}", "query": query, "lang": lang, "project": spec.key})
    return queries


# -- writing ---------------------------------------------------------------------------


def _git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True)


def _make_folders(work: Path) -> None:
    """Real folders: git repos with a first commit, one linked worktree, plain folders."""
    for spec in PROJECTS:
        for repo in spec.repos:
            path = work / repo
            path.mkdir(parents=True, exist_ok=True)
            _git("init", "-q", "-b", "main", str(path))
            _git("-C", str(path), "-c", "user.email=bench@example.com", "-c", "user.name=bench",
                 "commit", "-q", "--allow-empty", "-m", "init")
        if spec.worktree:
            repo, tree, branch = spec.worktree
            _git("-C", str(work / repo), "worktree", "add", "-q", "-b", branch, str(work / tree))
        for folder in (*spec.folders, *spec.subdirs):
            (work / folder).mkdir(parents=True, exist_ok=True)


def _make_projects(home: Path, work: Path) -> None:
    from hermes_cli import projects_db

    path = home / "projects.db"
    # projects_db creates its schema once per path per process; a corpus rebuilt in the same
    # process (after rmtree) would otherwise get a file without tables.
    getattr(projects_db, "_INITIALIZED_PATHS", set()).discard(str(path.resolve()))
    with projects_db.connect_closing(path) as conn:
        for spec in PROJECTS:
            if spec.kind == "explicit":
                folders = [str(work / f) for f in spec.folders]
                projects_db.create_project(conn, name=spec.name, folders=folders, primary_path=folders[0])


def _abs(work: Path, rel: str | None) -> str | None:
    if rel is None:
        return None
    return str(Path.home()) if rel == "~" else str(work / rel)


def _import_record(plan: SessionPlan, work: Path, messages: list[dict]) -> dict:
    return {"id": plan.id, "source": plan.source, "started_at": plan.started_at, "cwd": _abs(work, plan.cwd),
            "git_repo_root": _abs(work, plan.git_root), "git_branch": plan.branch, "title": plan.title,
            "parent_session_id": plan.parent, "messages": messages}


def _batches(seed: int, plans: list[SessionPlan], work: Path) -> Iterator[list[dict]]:
    batch: list[dict] = []
    n_messages = n_bytes = 0
    for plan in plans:
        messages = session_messages(seed, plan)
        size = sum(len(m["content"]) * 3 + sum(len(c["function"]["arguments"]) * 3 for c in m.get("tool_calls", ()))
                   for m in messages) + 4_096
        if batch and (len(batch) >= BATCH_SESSIONS or n_messages + len(messages) > BATCH_MESSAGES
                      or n_bytes + size > BATCH_BYTES):
            yield batch
            batch, n_messages, n_bytes = [], 0, 0
        batch.append(_import_record(plan, work, messages))
        n_messages += len(messages)
        n_bytes += size
    if batch:
        yield batch


def _write_live(db, seed: int, plan: SessionPlan, work: Path) -> int:
    """The path a running Hermes takes: an empty row, then cwd, title and one message at a time.

    The row is created with ``import_sessions`` (no messages) rather than
    ``create_session`` because that is Hermes's only API that records a given
    ``started_at`` (``create_session`` stamps the wall clock), and the corpus must be
    the same on every run."""
    result = db.import_sessions([{"id": plan.id, "source": plan.source, "started_at": plan.started_at,
                                  "parent_session_id": plan.parent, "messages": []}])
    if not result["ok"]:
        raise RuntimeError(f"import of {plan.id} failed: {result['errors']}")
    cwd = _abs(work, plan.cwd)
    if cwd:
        db.update_session_cwd(plan.id, cwd, git_branch=plan.branch, git_repo_root=_abs(work, plan.git_root))
    if plan.title:
        db.set_session_title(plan.id, plan.title)
    messages = session_messages(seed, plan)
    for m in messages:
        db.append_message(plan.id, m["role"], m["content"], tool_name=m.get("tool_name"),
                          tool_calls=m.get("tool_calls"), tool_call_id=m.get("tool_call_id"), timestamp=m["timestamp"])
    return len(messages)


def _rewind(db, seed: int, plan: SessionPlan) -> tuple[int, int]:
    """Rewind to a user turn in the second half, then type on. Returns (rows rewound, rows added)."""
    rows = db.get_messages(plan.id)
    users = [i for i, m in enumerate(rows) if m["role"] == "user" and i > 0]
    later = [i for i in users if i >= len(rows) // 2] or users
    if not later:
        return 0, 0
    result = db.rewind_to_message(plan.id, rows[later[0]]["id"])
    followup = rewind_followup(seed, plan)
    for m in followup:
        db.append_message(plan.id, m["role"], m["content"], timestamp=m["timestamp"])
    return result["rewound_count"], len(followup)


def write_corpus(root: Path, seed: int, size: Size, *, progress: bool = True) -> Corpus:
    """Write a fresh corpus under ``root`` (which must not hold one already)."""
    from hermes_state import SessionDB

    root = root.resolve()
    corpus = Corpus(root, seed, size)
    corpus.hermes_home.mkdir(parents=True, exist_ok=True)
    clock = time.perf_counter()
    plans = plan_sessions(seed, size)
    corpus.seconds["plan"] = round(time.perf_counter() - clock, 3)

    clock = time.perf_counter()
    _make_folders(corpus.work)
    _make_projects(corpus.hermes_home, corpus.work)
    corpus.seconds["folders_and_projects"] = round(time.perf_counter() - clock, 3)

    db = SessionDB(db_path=corpus.hermes_home / "state.db")
    try:
        clock = time.perf_counter()
        bulk = [p for p in plans if not p.live]
        done = 0
        for batch in _batches(seed, bulk, corpus.work):
            result = db.import_sessions(batch)
            if not result["ok"]:
                raise RuntimeError(f"import_sessions failed: {result['errors'][:3]}")
            done += len(batch)
            corpus.messages_written += sum(len(s["messages"]) for s in batch)
            if progress:
                print(f"\r  imported {done}/{len(bulk)} sessions, {corpus.messages_written} messages",
                      end="", file=sys.stderr, flush=True)
        if progress:
            print(file=sys.stderr)
        corpus.seconds["import_sessions"] = round(time.perf_counter() - clock, 3)

        clock = time.perf_counter()
        live_messages = 0
        for plan in plans:
            if plan.live:
                live_messages += _write_live(db, seed, plan, corpus.work)
        corpus.messages_written += live_messages
        corpus.seconds["append_message_live"] = round(time.perf_counter() - clock, 3)
        corpus.seconds["append_message_per_s"] = round(live_messages / max(corpus.seconds["append_message_live"],
                                                                           1e-9), 1)

        clock = time.perf_counter()
        rewound = 0
        for plan in plans:
            if plan.rewind:
                gone, added = _rewind(db, seed, plan)
                rewound += gone
                corpus.messages_written += added
            if plan.archived:
                db.set_session_archived(plan.id, True)
        corpus.seconds["rewind_and_archive"] = round(time.perf_counter() - clock, 3)

        clock = time.perf_counter()
        db.optimize_fts()  # what Hermes itself does every 1,000 writes
        corpus.seconds["optimize_fts"] = round(time.perf_counter() - clock, 3)
    finally:
        db.close()

    corpus.sessions = len(plans)
    corpus.messages_active = corpus.messages_written - rewound
    corpus.current = {p.current: p.id for p in plans if p.current}
    for plan in plans:
        corpus.projects[plan.project] = corpus.projects.get(plan.project, 0) + 1
    (root / QUERIES).write_text(json.dumps(make_queries(seed), ensure_ascii=False, indent=1), encoding="utf-8")
    (root / MARKER).write_text(json.dumps(corpus.as_dict(), indent=1), encoding="utf-8")
    return corpus


def load_corpus(root: Path) -> Corpus | None:
    try:
        data = json.loads((root / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    size = Size(**data.pop("size"))
    data.pop("root", None)
    return Corpus(root.resolve(), size=size, **data)


def ensure_corpus(root: Path, seed: int, size: Size, *, force: bool = False, progress: bool = True) -> Corpus:
    """The corpus at ``root``: reused when its marker says same generator, seed and size; else rebuilt."""
    root = root.resolve()
    existing = None if force else load_corpus(root)
    if (existing and existing.seed == seed and existing.size == size
            and existing.generator_version == GENERATOR_VERSION and existing.root == root
            and (existing.hermes_home / "state.db").is_file()):
        return existing
    if root.exists():
        shutil.rmtree(root)
    clock = time.perf_counter()
    corpus = write_corpus(root, seed, size, progress=progress)
    corpus.seconds["total"] = round(time.perf_counter() - clock, 3)
    (root / MARKER).write_text(json.dumps(corpus.as_dict(), indent=1), encoding="utf-8")
    return corpus


def default_root(size: Size) -> Path:
    return Path(__file__).resolve().parent / "out" / f"corpus-{size.name}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.corpus", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="S")
    parser.add_argument("--out", type=Path, help="folder to write (default bench/out/corpus-<size>)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--force", action="store_true", help="rebuild even when a matching corpus exists")
    args = parser.parse_args(argv)
    size = SIZES[args.size]
    corpus = ensure_corpus(args.out or default_root(size), args.seed, size, force=args.force)
    print(json.dumps(corpus.as_dict(), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
