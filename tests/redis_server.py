"""A throwaway real redis-server for the Redis store's tests.

A fake would agree with whatever the code assumes; the real server checks
GETEX, SCAN patterns and TTLs as production runs them. It listens on a free
loopback port, persists nothing and is stopped by the test session that
started it. Talking to it takes a bare socket, so this helper needs no client
package.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "MISSING_REASON",
    "RedisServer",
    "free_port",
    "redis_server_binary",
    "serve_for_test",
    "start_redis_server",
]

MISSING_REASON = "redis-server is not installed (apt-get install redis-server)"


def redis_server_binary() -> str | None:
    return shutil.which("redis-server")


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def ping(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """A running redis-server; :meth:`stop` ends it."""

    def __init__(self, process: subprocess.Popen[bytes], port: int, workdir: Path) -> None:
        self.process = process
        self.port = port
        self.workdir = workdir

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


def start_redis_server(workdir: Path, *, binary: str | None = None, timeout: float = 10.0) -> RedisServer:
    """Start redis-server in ``workdir`` and wait until it answers PING.

    The free port can be taken between choosing it and binding it, so a
    server that dies at start is tried again on another port.
    """
    binary = binary or redis_server_binary()
    if binary is None:
        raise FileNotFoundError(MISSING_REASON)
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "redis.log"
    for _attempt in range(3):
        port = free_port()
        process = subprocess.Popen(
            [
                binary,
                "--port", str(port),
                "--bind", "127.0.0.1",
                "--save", "",
                "--appendonly", "no",
                "--dir", str(workdir),
                "--logfile", str(log),
                "--daemonize", "no",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=workdir,
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and process.poll() is None:
            if ping(port):
                return RedisServer(process, port, workdir)
            time.sleep(0.02)
        server = RedisServer(process, port, workdir)
        server.stop()
    tail = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"
    raise RuntimeError(f"redis-server did not start; its log ends with:\n{tail}")


def serve_for_test(directory: Path) -> Iterator[RedisServer]:
    """A fixture's body: a server for one test, resumed if the test paused it, then stopped.

    Skips when redis-server or the ``redis`` package is missing on a user's
    machine, and fails under CI, which must run the Redis tests.
    """
    import os
    import signal

    import pytest

    pytest.importorskip("redis")
    if redis_server_binary() is None:
        if os.environ.get("CI"):
            pytest.fail(f"{MISSING_REASON}; CI must run the Redis tests")
        pytest.skip(MISSING_REASON)
    server = start_redis_server(directory)
    yield server
    if server.process.poll() is None:
        os.kill(server.process.pid, signal.SIGCONT)
    server.stop()
