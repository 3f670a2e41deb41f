"""Privacy: with a remote embedding provider configured, nothing leaves the machine before
consent, whatever path runs; after consent, no planted secret is ever in a request.

The provider's ``base_url`` points at :class:`CountingProxy`, a TCP relay on 127.0.0.1 that
counts every connection and every byte it receives before handing them to the recording
fake embedding server (``tests/fakes/embedding_server.py``). "Zero bytes" is measured at
the socket, so even a connection that sends no request counts.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import selectors
import socket
import string
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from project_history_recall.faces.hermes.plugin import session_start_hook

from . import world

OTHER_MARK = "othermarkqz"  # in every message of the project that gets no consent


class CountingProxy:
    """127.0.0.1:PORT → the fake server: counts connections and bytes, keeps what clients sent."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.bytes_in = 0
        self.raw = bytearray()
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="counting-proxy", daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _accept(self) -> None:
        self.sock.settimeout(0.1)
        while not self._stop.is_set():
            try:
                client, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            with self.lock:
                self.connections += 1
            threading.Thread(target=self._pipe, args=(client,), daemon=True).start()

    def _pipe(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.upstream, timeout=10)
        except OSError:
            client.close()
            return
        selector = selectors.DefaultSelector()  # epoll: fds past 1,024 are fine
        for sock in (client, upstream):
            selector.register(sock, selectors.EVENT_READ)
        try:
            while not self._stop.is_set():
                for key, _ in selector.select(0.2):
                    s = key.fileobj
                    assert isinstance(s, socket.socket)
                    data = s.recv(65536)
                    if not data:
                        return
                    if s is client:
                        with self.lock:
                            self.bytes_in += len(data)
                            self.raw += data
                        upstream.sendall(data)
                    else:
                        client.sendall(data)
        except OSError:
            return
        finally:
            selector.close()
            client.close()
            upstream.close()

    def snapshot(self) -> tuple[int, int]:
        with self.lock:
            return self.connections, self.bytes_in

    def stop(self) -> None:
        self._stop.set()
        self.sock.close()
        self._thread.join(timeout=2)


def _rand(rng: random.Random, n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


@dataclass(frozen=True)
class Secret:
    name: str
    text: str  # as it is written in the history
    material: tuple[str, ...]  # the parts that must never be sent (each checked in 16-char windows)


def planted_secrets(seed: int = 8) -> list[Secret]:
    """Realistic (random, never real) credentials in the shapes people paste into a session."""
    rng = random.Random(seed)
    b64 = string.ascii_letters + string.digits + "+/"
    pem_lines = [_rand(rng, 64, b64) for _ in range(12)]
    pem = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(pem_lines) + "\n-----END RSA PRIVATE KEY-----"
    ssh_lines = [_rand(rng, 70, b64) for _ in range(6)]
    ssh = "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(ssh_lines) + "\n-----END OPENSSH PRIVATE KEY-----"
    gcp_lines = [_rand(rng, 64, b64) for _ in range(6)]
    gcp_key = "-----BEGIN PRIVATE KEY-----\\n" + "\\n".join(gcp_lines) + "\\n-----END PRIVATE KEY-----\\n"
    openai = "sk-proj-" + _rand(rng, 48)
    anthropic = "sk-ant-api03-" + _rand(rng, 80, string.ascii_letters + string.digits + "-_")
    ghp = "ghp_" + _rand(rng, 36)
    gh_pat = "github_pat_" + _rand(rng, 22) + "_" + _rand(rng, 59)
    akia = "AKIA" + _rand(rng, 16, string.ascii_uppercase + string.digits)
    aws_secret = _rand(rng, 40, b64)
    slack = f"xoxb-{rng.randrange(10**11, 10**12)}-{rng.randrange(10**12, 10**13)}-{_rand(rng, 24)}"
    stripe = "sk_live_" + _rand(rng, 24)
    google = "AIza" + _rand(rng, 35, string.ascii_letters + string.digits + "-_")
    jwt = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + "eyJ" + _rand(rng, 40, string.ascii_letters + string.digits)
           + "." + _rand(rng, 43, string.ascii_letters + string.digits + "-_"))
    db_pass = "S3cr3t" + _rand(rng, 10) + "!"
    bearer = _rand(rng, 40, string.ascii_letters + string.digits + "-._")
    env_pass = "hunter2-" + _rand(rng, 12)
    flag_token = _rand(rng, 24, "abcdef0123456789") + "Zq"
    yaml_pass = "C0rrect-H0rse-" + _rand(rng, 10)
    cjk_pass = "Tr0ub4dor&" + _rand(rng, 8)
    loose = _rand(rng, 44)
    return [
        Secret("openai_key", f"export OPENAI_API_KEY={openai}", (openai,)),
        Secret("openai_key_prose", f"my key is {openai} please keep it", (openai,)),
        Secret("anthropic_key", f"ANTHROPIC_API_KEY=\"{anthropic}\"", (anthropic,)),
        Secret("github_token", f"git clone https://{ghp}@github.com/acme/app.git", (ghp,)),
        Secret("github_pat", f"token: {gh_pat}", (gh_pat,)),
        Secret("aws_keys", f"[default]\naws_access_key_id = {akia}\naws_secret_access_key = {aws_secret}",
               (akia, aws_secret)),
        Secret("slack_token", f"SLACK_BOT_TOKEN={slack}", (slack,)),
        Secret("stripe_key", f"stripe.api_key = '{stripe}'", (stripe,)),
        Secret("google_key", f"https://maps.googleapis.com/maps/api/js?key={google}", (google,)),
        Secret("jwt", f"curl -H 'Authorization: Bearer {jwt}' https://api.internal/v1/me", (jwt,)),
        Secret("rsa_private_key", pem, tuple(pem_lines)),
        Secret("openssh_private_key", ssh, tuple(ssh_lines)),
        Secret("gcp_service_account", json.dumps({"type": "service_account", "private_key": gcp_key.replace(
            "\\n", "\n")}), tuple(gcp_lines)),
        Secret("url_credentials", f"DATABASE_URL=postgres://admin:{db_pass}@db.internal:5432/app", (db_pass,)),
        Secret("bearer_header", f"Authorization: Bearer {bearer}", (bearer,)),
        Secret("dotenv_password", f"DATABASE_PASSWORD={env_pass}", (env_pass,)),
        Secret("cli_flag", f"deploy --token {flag_token} --region eu-west-1", (flag_token,)),
        Secret("yaml_password", f"db:\n  password: '{yaml_pass}'", (yaml_pass,)),
        Secret("cjk_password", f"数据库密码：{cjk_pass}", (cjk_pass,)),
        Secret("loose_high_entropy", f"the signing secret is {loose} do not share", (loose,)),
    ]


def leaks(secrets: list[Secret], blobs: list[str], window: int = 16) -> list[dict]:
    """Each secret part (or a ``window``-character piece of it) found in what was sent."""
    found = []
    for secret in secrets:
        for part in secret.material:
            pieces = [part] if len(part) <= window else [part[i : i + window]
                                                          for i in range(0, len(part) - window + 1, 4)]
            for blob in blobs:
                hit = next((p for p in pieces if p in blob), None)
                if hit:
                    found.append({"secret": secret.name, "piece": hit[:6] + "…", "in": blob[
                        max(0, blob.index(hit) - 40): blob.index(hit) + 20].replace(hit, "<" + hit[:4] + "…>")})
                    break
    return found


@dataclass
class PrivacyWorld:
    root: Path
    home: Path
    repo: Path
    other: Path
    project_id: str
    askers: dict[str, str]
    secrets: list[Secret]
    base_url: str
    model: str = "m"


def build_world(root: Path, base_url: str, secrets: list[Secret], filler_messages: int = 60) -> PrivacyWorld:
    import shutil

    from hermes_cli import projects_db
    from hermes_state import SessionDB

    if root.exists():
        shutil.rmtree(root)
    home = root / "hermes"
    repo = world.git_init(root / "work" / "app")
    other = world.git_init(root / "work" / "other")
    with projects_db.connect_closing(home / "projects.db") as conn:
        pid = projects_db.create_project(conn, name="App", folders=[str(repo)])
    db = SessionDB(db_path=home / "state.db")
    rng = random.Random(2)
    clock = 1_767_000_000.0
    filler = ("we looked at the deployment pipeline and the retry logic of the payment worker, then "
              "talked about caching and the flaky integration test that times out on CI ")

    def say(sid: str, role: str, text: str | None, **extra: Any) -> None:
        nonlocal clock
        clock += 20
        if text is not None and sid.startswith("other-"):
            text = f"{text} {OTHER_MARK}"
        db.append_message(sid, role, text, timestamp=clock, **extra)

    try:
        for where, folder in (("app", repo), ("other", other)):
            for n, secret in enumerate(secrets):
                sid = f"{where}-{n:02d}-{secret.name}"
                db.create_session(sid, "cli", cwd=str(folder))
                say(sid, "user", f"here is the config: {secret.text}")
                say(sid, "assistant", f"Noted. I will not repeat it. ({secret.text})", tool_calls=[{
                    "id": f"c{n}", "type": "function", "function": {
                        "name": "write_file", "arguments": json.dumps({"path": ".env", "content": secret.text})}}])
                say(sid, "tool", "wrote .env", tool_call_id=f"c{n}", tool_name="write_file")
                # The secret around a chunk boundary: a long message with it at several offsets.
                words = (filler * 40).split()
                for at in (300, 330, 360, 390, 420):
                    words.insert(at + rng.randrange(5), secret.text.replace("\n", " \n"))
                say(sid, "assistant", " ".join(words))
            for n in range(filler_messages):
                sid = f"{where}-filler-{n:03d}"
                db.create_session(sid, "cli", cwd=str(folder))
                say(sid, "user", f"{filler} note {n}")
            db.create_session(f"{where}-ask", "cli", cwd=str(folder))
    finally:
        db.close()
    world.write_config(home, embedding=world.remote_embedding(base_url))
    (home / ".env").write_text("PROJECT_HISTORY_EMBEDDING_API_KEY=sk-test-" + "k" * 32 + "\n")
    return PrivacyWorld(root, home, repo, other, pid, {"app": "app-ask", "other": "other-ask"}, secrets, base_url)


# -- the code paths --------------------------------------------------------------------------------


def _wait_threads(prefixes: tuple[str, ...] = ("phr-", "project-history-recall"), timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [t for t in threading.enumerate() if t.name.startswith(prefixes) and t.is_alive()]
        if not alive:
            return
        time.sleep(0.05)


def _cli(w: PrivacyWorld, *args: str, cwd: Path | None = None) -> dict:
    command = [world.python(), "-m", "project_history_recall.faces.cli", "--home", str(w.home), *args, "--json"]
    out = subprocess.run(command,
                         capture_output=True, text=True, env=world.child_env({"HERMES_HOME": str(w.home)}),
                         cwd=str(cwd or w.repo), timeout=300)
    try:
        return json.loads(out.stdout)
    except ValueError:
        return {"stdout": out.stdout[-500:], "stderr": out.stderr[-500:], "returncode": out.returncode}


def paths(w: PrivacyWorld) -> list[tuple[str, Any]]:
    """Every way the plugin can be made to work, as (name, thunk)."""
    from project_history_recall.recall import Recall
    from project_history_recall.search import semantic
    from project_history_recall.services import jobs

    def tool(name: str, args: dict, asker: str | None = None) -> Any:
        from project_history_recall.faces.hermes.tools import make_handlers

        return lambda: json.loads(make_handlers(lambda: Recall(w.home, background_embedding=True))[name](
            args, session_id=asker or w.askers["app"]))

    def command(raw: str) -> Any:
        def run() -> str:
            from project_history_recall.faces.hermes import commands

            before = os.getcwd()
            os.chdir(w.repo)
            try:
                return commands.run(raw, lambda: Recall(w.home, background_embedding=True))[0]
            finally:
                os.chdir(before)
        return run

    def background() -> Any:
        recall = Recall(w.home, background_embedding=True)
        try:
            worker = semantic.start_background(recall.semantic.embedder(recall.semantic.provider()))
            worker.join(60)
            return {"worker": "started", "error": worker.error}
        except Exception as exc:
            return {"worker": f"refused: {type(exc).__name__}: {getattr(exc, 'code', exc)}"}

    def session_start() -> Any:
        session_start_hook(lambda: Recall(w.home, background_embedding=True))()
        time.sleep(0.2)
        _wait_threads()
        return "hook ran"

    def detached_job() -> Any:
        recall = Recall(w.home)
        reply = jobs.request_index(recall.workspace, force=True, reason="stress", budget=60.0, large=0)
        job = jobs.wait(recall.workspace, jobs.JobStore(recall.home.data_dir).read(reply["job_id"]) or reply, 120) \
            if reply.get("job_id") else None
        return {"reply": reply.get("status"), "job": getattr(job, "state", None)}

    out: list[tuple[str, Any]] = []
    for mode in ("hybrid", "keyword", "semantic"):
        for asker in ("app", "other"):
            out.append((f"tool search {mode} ({asker})", tool("project_history_search", {
                "query": "retry logic of the payment worker", "mode": mode}, w.askers[asker])))
        out.append((f"tool search {mode} scope all", tool("project_history_search", {
            "query": "retry logic", "mode": mode, "scope": "all"})))
    for op in ("status", "timeline", "projects"):
        out.append((f"tool project_history {op}", tool("project_history", {"operation": op})))
    out.append(("tool project_history session", tool("project_history", {"operation": "session",
                                                                          "session_id": "app-00"})))
    out.append(("tool project_history_index", tool("project_history_index", {})))
    out.append(("tool project_history_index force", tool("project_history_index", {"force": True})))
    out.append(("tool project_session_move", tool("project_session_move", {"project_id": w.project_id},
                                                  "other-ask")))
    for raw in ("", "status", "index", "index --force", "search retry logic", "projects", "sessions", "sessions all"):
        out.append((f"/recall {raw}".strip(), command(raw)))
    out.append(("library status", lambda: Recall(w.home).status(session_id=w.askers["app"])))
    out.append(("library embed", lambda: Recall(w.home).embed()))
    out.append(("background worker", background))
    out.append(("session start hook", session_start))
    out.append(("detached index job", detached_job))
    for args in (("search", "retry", "logic", "--mode", "semantic"), ("search", "retry", "--mode", "hybrid"),
                 ("search", "retry", "--mode", "keyword"), ("index",), ("index", "--force"), ("status",),
                 ("timeline",), ("projects",), ("session", "app-00")):
        out.append(("phr " + " ".join(args), (lambda a=args: _cli(w, *a))))
    return out


def _code_tools(w: PrivacyWorld) -> list[tuple[str, Any]]:
    """Tools registered after this module was written (the edit chain): each called with its
    required arguments filled with a plain word."""
    from project_history_recall.faces.hermes.tools import SCHEMAS, make_handlers
    from project_history_recall.recall import Recall

    known = {"project_history_search", "project_history", "project_history_index", "project_session_move"}
    out = []
    for name, schema in SCHEMAS.items():
        if name in known:
            continue
        params = schema.get("parameters", {})
        args = {k: "retry" for k in params.get("required", ())}
        out.append((f"tool {name}", lambda n=name, a=args: json.loads(make_handlers(
            lambda: Recall(w.home, background_embedding=True))[n](a, session_id=w.askers["app"]))))
    return out


@dataclass
class PathResult:
    name: str
    connections: int
    bytes: int
    outcome: str


@dataclass
class Report:
    before_consent: list[PathResult] = field(default_factory=list)
    wrong_consent: list[PathResult] = field(default_factory=list)
    after_consent_requests: int = 0
    after_consent_texts: int = 0
    leaks: list[dict] = field(default_factory=list)
    one_project_consent: list[dict] = field(default_factory=list)
    secrets: int = 0

    def as_dict(self) -> dict:
        before = sum(p.bytes for p in self.before_consent)
        return {
            "paths_before_consent": len(self.before_consent),
            "connections_before_consent": sum(p.connections for p in self.before_consent),
            "bytes_before_consent": before,
            "paths_with_traffic_before_consent": [p.__dict__ for p in self.before_consent if p.bytes or p.connections],
            "paths_with_non_matching_consent": len(self.wrong_consent),
            "bytes_with_non_matching_consent": sum(p.bytes for p in self.wrong_consent),
            "paths_with_traffic_non_matching_consent": [p.__dict__ for p in self.wrong_consent if p.bytes],
            "planted_secrets": self.secrets,
            "requests_after_consent": self.after_consent_requests,
            "texts_after_consent": self.after_consent_texts,
            "secret_leaks": self.leaks,
            "one_project_consent_paths": len(self.one_project_consent),
            "other_project_texts_sent_with_one_project_consent": sum(
                p["other_project_texts"] for p in self.one_project_consent),
            "one_project_consent": self.one_project_consent,
        }


def _run_paths(proxy: CountingProxy, todo: list[tuple[str, Any]]) -> list[PathResult]:
    results = []
    for name, thunk in todo:
        before = proxy.snapshot()
        try:
            value = thunk()
            outcome = json.dumps(value, default=str, ensure_ascii=False)[:160] if not isinstance(value, str) \
                else value[:160]
        except Exception as exc:
            outcome = f"raised {type(exc).__name__}: {exc}"[:160]
        _wait_threads()
        after = proxy.snapshot()
        results.append(PathResult(name, after[0] - before[0], after[1] - before[1], outcome))
    return results


def _reset_index(w: PrivacyWorld) -> None:
    from project_history_recall.index import indexer

    indexer._unchanged.clear()
    folder = world.data_dir(w.home)
    consent = folder / "consent.json"
    kept = consent.read_bytes() if consent.exists() else None
    world.restore_index(w.home, None)
    if kept is not None:
        folder.mkdir(parents=True, exist_ok=True)
        consent.write_bytes(kept)


def run(work: Path, server: Any) -> dict[str, Any]:
    """Before consent, with a consent that does not match, and after consent (``["*"]``)."""
    from project_history_recall.hermes_home import HermesHome
    from project_history_recall.services.consent import record_consent, revoke_consent

    proxy = CountingProxy(server.port)
    report = Report()
    try:
        secrets = planted_secrets()
        report.secrets = sum(len(s.material) for s in secrets)
        w = build_world(work / "privacy", proxy.base_url, secrets)
        h = HermesHome(w.home)
        todo = paths(w) + _code_tools(w)
        report.before_consent = _run_paths(proxy, todo)

        # Consent that covers something else: another model, another endpoint, another project.
        wrong = [dict(model="other-model", endpoint=w.base_url, projects=["*"]),
                 dict(model=w.model, endpoint="http://127.0.0.1:9/v1", projects=["*"])]
        for variant in wrong:
            _reset_index(w)
            record_consent(h.data_dir, profile=h.profile, provider="openai", **variant)
            quick = [p for p in todo if not p[0].startswith(("phr ", "tool project_session"))]
            report.wrong_consent += _run_paths(proxy, quick)
            revoke_consent(h.data_dir)

        # Consent for project App only: the other project's history must never be sent, whichever
        # path embeds (each from a keyword-only index, so that every path has a backlog to send).
        from project_history_recall.recall import Recall

        scoped = [p for p in todo if p[0].startswith(("tool search semantic (app)", "tool search hybrid (app)",
                                                      "tool project_history_index", "/recall index",
                                                      "/recall search", "library embed", "background worker"))]
        for name, thunk in scoped:
            _reset_index(w)
            record_consent(h.data_dir, profile=h.profile, projects=[f"explicit:{w.project_id}", w.project_id],
                           provider="openai", endpoint=w.base_url, model=w.model)
            Recall(w.home).refresh()
            server.clear()
            with contextlib.suppress(Exception):  # what was sent is what is checked
                thunk()
            _wait_threads()
            sent = [t for r in server.embedding_requests for t in r.inputs]
            app = sum(not _mentions_other(t) for t in sent)
            other = sum(_mentions_other(t) for t in sent)
            report.one_project_consent.append({"path": name, "app_texts": app, "other_project_texts": other})
        revoke_consent(h.data_dir)

        # Consent for everything: now requests flow; no secret may be in any of them.
        _reset_index(w)
        world.consent_all(w.home, w.base_url, w.model)
        server.clear()
        proxy.raw.clear()
        secret_queries = [f"what was {s.text} for" for s in secrets]
        after_paths = [p for p in todo if not p[0].startswith("tool project_session")]
        for q in secret_queries:
            after_paths.append((f"search with a secret in the query {q[:10]}", lambda q=q: json.loads(
                __import__("project_history_recall.faces.hermes.tools", fromlist=["make_handlers"]).make_handlers(
                    lambda: __import__("project_history_recall.recall", fromlist=["Recall"]).Recall(w.home))[
                    "project_history_search"]({"query": q, "mode": "semantic"}, session_id=w.askers["app"]))))
        _run_paths(proxy, after_paths)
        requests = server.embedding_requests
        report.after_consent_requests = len(requests)
        report.after_consent_texts = sum(len(r.inputs) for r in requests)
        blobs = [r.raw.decode("utf-8", "replace") for r in requests]
        blobs += [t for r in requests for t in r.inputs]
        blobs.append(bytes(proxy.raw).decode("utf-8", "replace").split("Authorization")[0])
        report.leaks = leaks(secrets, blobs)
    finally:
        proxy.stop()
    return report.as_dict()


def _mentions_other(text: str) -> bool:
    return OTHER_MARK in text
