"""A fake OpenAI-compatible embeddings server on 127.0.0.1 for tests.

Stdlib only. ``POST /v1/embeddings`` (also ``/embeddings``) answers
``{"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [...]}], ...}``
with a deterministic, *not* normalised vector per input (:func:`vector_for`), so a
client's own normalisation is visible.

Every request is recorded (:attr:`FakeEmbeddingServer.requests`: method, path,
lower-cased headers, raw body and parsed JSON). Misbehaviour is scripted per
request with :meth:`FakeEmbeddingServer.enqueue`; once the queue is empty the
server answers normally. An action is a dict:

* ``{"status": 500}`` — that status with an OpenAI-style error body
  (``"message"`` overrides the text, ``"headers"`` adds headers, e.g. ``Retry-After``);
* ``{"hang": 5.0}`` — wait that long (or until :meth:`stop`) before answering normally;

:meth:`FakeEmbeddingServer.hold_when` makes the first request carrying a given text wait at a
``builders.Gate``: the test decides when it is answered, and others pass meanwhile.
* ``{"drop": True}`` — close the connection without an answer;
* ``{"raw": "not json"}`` — a 200 with that body;
* ``{"json": {...}}`` — a 200 with that JSON;
* ``{"count_delta": -1}`` / ``{"dim": 3}`` / ``{"shuffle": True}`` / ``{"base64": True}``
  — a normal answer with one embedding too few, the wrong width, items out of
  order (with correct ``index``), or base64-encoded vectors.

With ``api_key`` set, requests without ``Authorization: Bearer <api_key>`` get a
401 whose message echoes the key they sent (as some servers do) — to prove the
client scrubs it.

Use it as a context manager::

    with FakeEmbeddingServer(dim=8, api_key="sk-test") as server:
        client = OpenAIProvider("fake-embed", base_url=server.base_url, api_key="sk-test")

or run it: ``python tests/fakes/embedding_server.py --dim 8`` (prints ``LISTENING <port>``).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import random
import socket
import struct
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def vector_for(text: str, dim: int) -> list[float]:
    """The fake embedding of ``text``: deterministic, length ≈ 3 (not normalised)."""
    out: list[float] = []
    counter = 0
    while len(out) < dim:
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        out.extend((b - 127.5) / 42.0 for b in digest)
        counter += 1
    vec = out[:dim]
    norm = sum(v * v for v in vec) ** 0.5 or 1.0
    return [3.0 * v / norm for v in vec]


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any = None  # parsed JSON, or None

    @property
    def inputs(self) -> list[str]:
        value = self.body.get("input") if isinstance(self.body, dict) else None
        if isinstance(value, str):
            return [value]
        return list(value) if isinstance(value, list) else []


@dataclass
class _State:
    dim: int
    api_key: str | None
    model: str | None
    requests: list[RecordedRequest] = field(default_factory=list)
    queue: deque[dict[str, Any]] = field(default_factory=deque)
    holds: list[tuple[Any, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)


class _Handler(BaseHTTPRequestHandler):
    server_version = "FakeEmbeddings/1.0"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        return

    @property
    def state(self) -> _State:
        return self.server.state  # type: ignore[attr-defined,no-any-return]

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self._send(status, {"error": {"message": message, "type": "fake_error", "code": status}}, headers)

    def do_GET(self) -> None:
        self._record(b"")
        self._error(404, "not found")

    def _record(self, raw: bytes) -> RecordedRequest:
        try:
            body = json.loads(raw.decode()) if raw else None
        except ValueError:
            body = None
        request = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            raw=raw,
            body=body,
        )
        with self.state.lock:
            self.state.requests.append(request)
        return request

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        request = self._record(raw)
        state = self.state
        with state.lock:
            action = state.queue.popleft() if state.queue else {}
        if action.get("hang"):
            state.stopping.wait(float(action["hang"]))
        with state.lock:
            held = next((h for h in state.holds if any(h[1] in t for t in request.inputs)), None)
            if held is not None:
                state.holds.remove(held)
        if held is not None:
            held[0].hold()
        if action.get("drop"):
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if "status" in action:
            status = int(action["status"])
            self._error(status, action.get("message", f"fake failure {status}"), action.get("headers"))
            return
        if "raw" in action:
            self._send(200, str(action["raw"]).encode())
            return
        if "json" in action:
            self._send(200, action["json"])
            return
        if self.path.rstrip("/") not in ("/v1/embeddings", "/embeddings"):
            self._error(404, f"no route {self.path}")
            return
        if state.api_key is not None:
            auth = request.headers.get("authorization", "")
            if auth != f"Bearer {state.api_key}":
                sent = auth.removeprefix("Bearer ")
                self._error(401, f"Incorrect API key provided: {sent}. You can find your key at ...")
                return
        body = request.body if isinstance(request.body, dict) else None
        if body is None or "input" not in body or "model" not in body:
            self._error(400, "body must be JSON with 'model' and 'input'")
            return
        if state.model is not None and body["model"] != state.model:
            self._error(404, f"model {body['model']!r} not found")
            return
        inputs = request.inputs
        if any(not isinstance(t, str) or t == "" for t in inputs):
            self._error(400, "'$.input' is invalid: empty strings are not allowed")
            return
        dim = int(action.get("dim", body.get("dimensions") or state.dim))
        items = []
        for i, text in enumerate(inputs):
            vector = vector_for(text, dim)
            embedding: Any = vector
            if action.get("base64"):
                embedding = base64.b64encode(struct.pack(f"<{dim}f", *vector)).decode()
            items.append({"object": "embedding", "index": i, "embedding": embedding})
        if action.get("shuffle"):
            random.Random(len(items)).shuffle(items)
            items.reverse()
        delta = int(action.get("count_delta", 0))
        if delta < 0:
            items = items[:delta]
        elif delta > 0:
            items = items + items[:delta]
        usage = sum(len(t.split()) for t in inputs)
        self._send(
            200,
            {
                "object": "list",
                "data": items,
                "model": body["model"],
                "usage": {"prompt_tokens": usage, "total_tokens": usage},
            },
        )


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # a client that gave up (timeout) or a dropped connection: not an error here


class FakeEmbeddingServer:
    def __init__(self, dim: int = 8, *, api_key: str | None = None, model: str | None = None) -> None:
        self._state = _State(dim=dim, api_key=api_key, model=model)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------
    def start(self) -> FakeEmbeddingServer:
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.state = self._state  # type: ignore[attr-defined]
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-embeddings", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._state.stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeEmbeddingServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses -----------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting and inspection -------------------------------------------------
    def enqueue(self, *actions: dict[str, Any]) -> None:
        with self._state.lock:
            self._state.queue.extend(actions)

    def fail_next(self, count: int = 1, status: int = 500, **extra: Any) -> None:
        self.enqueue(*({"status": status, **extra} for _ in range(count)))

    def hang_next(self, count: int = 1, seconds: float = 30.0) -> None:
        self.enqueue(*({"hang": seconds} for _ in range(count)))

    def hold_when(self, gate: Any, containing: str) -> None:
        """The first request with an input containing ``containing`` waits at ``gate``
        (``gate.reached`` tells it arrived)."""
        with self._state.lock:
            self._state.holds.append((gate, containing))

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._state.lock:
            return list(self._state.requests)

    @property
    def embedding_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.method == "POST"]

    def clear(self) -> None:
        with self._state.lock:
            self._state.requests.clear()
            self._state.queue.clear()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dim", type=int, default=8)
    parser.add_argument("--api-key")
    args = parser.parse_args()
    server = FakeEmbeddingServer(args.dim, api_key=args.api_key).start()
    print(f"LISTENING {server.port}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
