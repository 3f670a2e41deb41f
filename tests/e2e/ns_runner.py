"""Runs INSIDE a fresh network namespace (``unshare -n``): fake LLM server + one Hermes command.

Started by :func:`harness.run_hermes_oneshot` as::

    unshare -n PYTHON tests/e2e/ns_runner.py --work DIR --hermes-home H --cwd C --timeout T -- CMD...

Steps:
1. bring the namespace's loopback interface up (ioctl; no ``ip`` binary needed);
2. start ``tests/fakes/llm_server.py`` on 127.0.0.1 with a random port, logging every
   request to ``DIR/requests.jsonl``;
3. point ``model.base_url`` in ``H/config.yaml`` at that port;
4. run CMD (e.g. ``hermes -z PROMPT``) with cwd C, no stdin, stdout/stderr to
   ``DIR/stdout.txt`` / ``DIR/stderr.txt``, killed (whole process group) after T seconds;
5. stop the server and write ``DIR/result.json`` (returncode, timed_out, port, durations).

Only loopback exists in the namespace, so nothing Hermes tries can leave the machine.
Stdlib + PyYAML (a Hermes dependency) only.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
LLM_SERVER = HERE.parent / "fakes" / "llm_server.py"

SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1


def bring_loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16sH14s", b"lo", 0, b"\0" * 14)
        res = fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, ifreq)
        flags = struct.unpack("16sH14s", res)[1]
        if not flags & IFF_UP:
            ifreq = struct.pack("16sH14s", b"lo", flags | IFF_UP, b"\0" * 14)
            fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, ifreq)


def set_base_url(config_path: Path, base_url: str) -> None:
    import yaml

    cfg = yaml.safe_load(config_path.read_text(encoding="utf-8")) if config_path.exists() else {}
    cfg = cfg or {}
    model = cfg.get("model")
    if not isinstance(model, dict):
        model = {"default": model} if model else {}
        cfg["model"] = model
    model["base_url"] = base_url
    tmp = config_path.with_suffix(".yaml.tmp")
    tmp.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    os.replace(tmp, config_path)


def kill_group(proc: subprocess.Popen[bytes], grace: float = 3.0) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def reap_group(pgid: int) -> None:
    """Kill whatever is left in a finished command's process group (background helpers)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--hermes-home", required=True)
    ap.add_argument("--cwd", required=True)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--no-loopback-up", action="store_true")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd and args.cmd[0] == "--" else args.cmd
    if not cmd:
        ap.error("no command given")

    work = Path(args.work)
    result: dict[str, object] = {"returncode": None, "timed_out": False, "error": None}
    t0 = time.monotonic()

    if not args.no_loopback_up:
        bring_loopback_up()

    port_file = work / "port"
    server_out = open(work / "server.log", "wb")  # noqa: SIM115 - closed in the finally below
    server = subprocess.Popen(
        [
            sys.executable,
            str(LLM_SERVER),
            "--script",
            str(work / "script.json"),
            "--log",
            str(work / "requests.jsonl"),
            "--port-file",
            str(port_file),
            "--idle-timeout",
            str(max(args.timeout + 30, 60)),
        ],
        stdin=subprocess.DEVNULL,
        stdout=server_out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 15
        while not port_file.exists():
            if server.poll() is not None or time.monotonic() > deadline:
                result["error"] = "fake LLM server did not start (see server.log)"
                return 0
            time.sleep(0.02)
        port = int(port_file.read_text())
        result["port"] = port
        set_base_url(Path(args.hermes_home) / "config.yaml", f"http://127.0.0.1:{port}/v1")

        env = dict(os.environ)
        env["HERMES_HOME"] = args.hermes_home
        env["PHR_E2E_FAKE_LLM_PORT"] = str(port)
        t1 = time.monotonic()
        with open(work / "stdout.txt", "wb") as out, open(work / "stderr.txt", "wb") as err:
            proc = subprocess.Popen(
                cmd,
                cwd=args.cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
            try:
                result["returncode"] = proc.wait(args.timeout)
            except subprocess.TimeoutExpired:
                result["timed_out"] = True
                kill_group(proc)
                result["returncode"] = proc.returncode
            reap_group(proc.pid)
        result["command_seconds"] = round(time.monotonic() - t1, 3)
        return 0
    finally:
        kill_group(server)
        server_out.close()
        result["total_seconds"] = round(time.monotonic() - t0, 3)
        tmp = work / "result.json.tmp"
        tmp.write_text(json.dumps(result), encoding="utf-8")
        os.replace(tmp, work / "result.json")


if __name__ == "__main__":
    sys.exit(main())
