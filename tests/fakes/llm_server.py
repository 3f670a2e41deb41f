"""A scripted fake OpenAI-compatible chat-completions server for end-to-end tests.

Stdlib only (``http.server``), binds 127.0.0.1 on a random port by default.

Script (JSON, from ``--script FILE`` or ``--script-json TEXT``)::

    {
      "model": "fake-model",                  # id reported by /v1/models
      "turns": [                              # answers to the *agent* requests
        {"tool_calls": [{"name": "project_history_search",
                         "arguments": {"query": "retry policy", "mode": "keyword"}}]},
        {"content": "Final answer."}
      ],
      "aux_content": "Fake title"             # answer to auxiliary requests
    }

Which turn answers a request is decided from the conversation the request
carries, not from a request counter: the turn index is the number of assistant
messages in ``messages`` that hold a tool call this server issued (ids start
with ``call_fake_``).  So the first agent request gets ``turns[0]``; the request
that carries the tool result(s) gets ``turns[1]``; retries and injected nudges
do not shift the script.  Past the end of the script the last ``content`` turn
(or a default text) is repeated, so the agent loop always terminates.

A request is an *agent* request when its body has a non-empty ``tools`` list;
requests without tools (title generation, summaries) are *auxiliary* and get
``aux_content``.

Every request is appended to the JSON-lines log (``--log FILE``) as one object::

    {"seq", "time", "method", "path", "kind": "main"|"aux"|"other",
     "turn_index", "stream", "body", "tool_messages": [...]}

``tool_messages`` are the ``role == "tool"`` messages of the request, i.e. the
tool results Hermes sent back to the model.

Both ``stream: true`` (SSE chunks, ``data: [DONE]``) and plain JSON responses
are supported.  ``GET /v1/models`` (and ``/models``) lists the scripted model; every other GET is a 404
(Hermes probes ``/api/v1/models``, ``/api/tags``, ``/v1/props``, ``/props``, ``/version`` to
guess the server type; all 404 means "plain OpenAI-compatible").

Run: ``python tests/fakes/llm_server.py --script s.json --log req.jsonl --port-file port``.
Prints ``LISTENING <port>`` on stdout once bound.  It exits by itself after
``--idle-timeout`` seconds without a request (default 300) and on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FAKE_CALL_PREFIX = "call_fake_"
DEFAULT_FINAL = "Done (fake model)."


def load_script(path: str | None = None, text: str | None = None) -> dict[str, Any]:
    if text:
        script = json.loads(text)
    elif path:
        script = json.loads(Path(path).read_text(encoding="utf-8"))
    else:
        script = {}
    if not isinstance(script, dict):
        raise ValueError("script must be a JSON object")
    script.setdefault("model", "fake-model")
    script.setdefault("turns", [{"content": DEFAULT_FINAL}])
    script.setdefault("aux_content", "Fake title")
    return script


def turn_index_for(messages: list[dict[str, Any]]) -> int:
    """Number of assistant messages holding a tool call issued by this server."""
    n = 0
    for msg in messages or []:
        if not isinstance(msg, dict) or msg.get("role") != "assistant":
            continue
        calls = msg.get("tool_calls") or []
        if any(str((c or {}).get("id", "")).startswith(FAKE_CALL_PREFIX) for c in calls):
            n += 1
    return n


def pick_turn(script: dict[str, Any], index: int) -> dict[str, Any]:
    turns = script.get("turns") or []
    if index < len(turns):
        return turns[index]
    for turn in reversed(turns):
        if "content" in turn and not turn.get("tool_calls"):
            return turn
    return {"content": DEFAULT_FINAL}


def _tool_calls_payload(turn: dict[str, Any], index: int) -> list[dict[str, Any]]:
    out = []
    for j, call in enumerate(turn.get("tool_calls") or []):
        args = call.get("arguments", {})
        out.append(
            {
                "id": call.get("id") or f"{FAKE_CALL_PREFIX}{index}_{j}",
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
        )
    return out


class FakeLLMServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], script: dict[str, Any], log_path: str | None):
        super().__init__(addr, Handler)
        self.script = script
        self.log_path = log_path
        self.lock = threading.Lock()
        self.seq = 0
        self.last_activity = time.monotonic()

    def record(self, entry: dict[str, Any]) -> None:
        with self.lock:
            self.seq += 1
            entry = {"seq": self.seq, "time": time.time(), **entry}
            self.last_activity = time.monotonic()
            if self.log_path:
                with open(self.log_path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
                    fh.flush()


class Handler(BaseHTTPRequestHandler):
    server: FakeLLMServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # silence stderr access log
        pass

    # -- helpers -----------------------------------------------------------
    def _send_json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return {"_raw": raw.decode("utf-8", "replace")}

    # -- routes ------------------------------------------------------------
    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        self.server.record({"method": "GET", "path": self.path, "kind": "other", "body": None})
        model = self.server.script["model"]
        # Only the OpenAI route: answering LM Studio's /api/v1/models (or Ollama's /api/tags,
        # llama.cpp's /props, vLLM's /version) would make Hermes treat this as that server.
        if path in ("/v1/models", "/models"):
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [
                        {
                            "id": model,
                            "object": "model",
                            "created": 0,
                            "owned_by": "fake",
                            "context_length": 128000,
                        }
                    ],
                },
            )
        elif path in ("/v1/models/" + model, "/models/" + model):
            self._send_json(200, {"id": model, "object": "model", "created": 0, "owned_by": "fake"})
        else:
            self._send_json(404, {"error": {"message": f"fake server: no route {self.path}"}})

    def do_POST(self) -> None:
        body = self._read_body()
        path = self.path.split("?", 1)[0].rstrip("/")
        if not path.endswith("/chat/completions") or not isinstance(body, dict):
            self.server.record({"method": "POST", "path": self.path, "kind": "other", "body": body})
            self._send_json(404, {"error": {"message": f"fake server: no route {self.path}"}})
            return

        messages = body.get("messages") or []
        is_main = bool(body.get("tools"))
        stream = bool(body.get("stream"))
        index = turn_index_for(messages)
        tool_messages = [m for m in messages if isinstance(m, dict) and m.get("role") == "tool"]
        self.server.record(
            {
                "method": "POST",
                "path": self.path,
                "kind": "main" if is_main else "aux",
                "turn_index": index if is_main else None,
                "stream": stream,
                "body": body,
                "tool_messages": tool_messages,
            }
        )

        if is_main:
            turn = pick_turn(self.server.script, index)
            tool_calls = _tool_calls_payload(turn, index)
            content = turn.get("content")
            if tool_calls and content is None:
                content = None
            elif content is None:
                content = DEFAULT_FINAL
        else:
            tool_calls = []
            content = str(self.server.script.get("aux_content", "Fake title"))
        finish = "tool_calls" if tool_calls else "stop"
        model = body.get("model") or self.server.script["model"]
        cid = "chatcmpl-fake-" + uuid.uuid4().hex[:12]
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}

        if not stream:
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if tool_calls:
                message["tool_calls"] = tool_calls
            self._send_json(
                200,
                {
                    "id": cid,
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                },
            )
            return

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

        def chunk(delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> None:
            obj = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
                **extra,
            }
            self.wfile.write(b"data: " + json.dumps(obj).encode("utf-8") + b"\n\n")
            self.wfile.flush()

        chunk({"role": "assistant", "content": ""})
        if content:
            chunk({"content": content})
        for j, call in enumerate(tool_calls):
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": j,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["function"]["name"], "arguments": ""},
                        }
                    ]
                }
            )
            chunk({"tool_calls": [{"index": j, "function": {"arguments": call["function"]["arguments"]}}]})
        chunk({}, finish)
        if (body.get("stream_options") or {}).get("include_usage"):
            obj = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [],
                "usage": usage,
            }
            self.wfile.write(b"data: " + json.dumps(obj).encode("utf-8") + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def serve(
    script: dict[str, Any],
    log_path: str | None,
    host: str = "127.0.0.1",
    port: int = 0,
    port_file: str | None = None,
    idle_timeout: float = 300.0,
) -> None:
    server = FakeLLMServer((host, port), script, log_path)
    bound = server.server_address[1]
    if port_file:
        tmp = port_file + ".tmp"
        Path(tmp).write_text(str(bound), encoding="utf-8")
        os.replace(tmp, port_file)
    print(f"LISTENING {bound}", flush=True)

    stop = threading.Event()

    def _on_signal(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        while not stop.wait(0.2):
            if idle_timeout and time.monotonic() - server.last_activity > idle_timeout:
                break
    finally:
        server.shutdown()
        server.server_close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--script", help="path to the JSON script")
    ap.add_argument("--script-json", help="the JSON script inline")
    ap.add_argument("--log", help="JSON-lines request log to append to")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", help="write the bound port here (atomically)")
    ap.add_argument("--idle-timeout", type=float, default=300.0)
    args = ap.parse_args(argv)
    script = load_script(args.script, args.script_json)
    serve(script, args.log, args.host, args.port, args.port_file, args.idle_timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
