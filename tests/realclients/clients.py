"""Running the real clients headless against a base URL.

Each run gets a fresh home directory and a minimal environment: nothing of
the caller's own configuration, keys or proxies reaches the client, and the
client writes nothing outside the test's directories. The settings are the
ones the installed versions really have (checked against ``claude --help``
and ``codex exec --help`` of the pinned versions):

- Claude Code: ``ANTHROPIC_BASE_URL`` (the root, without ``/v1``), a dummy
  ``ANTHROPIC_API_KEY``, no autoupdate, telemetry or other non-essential
  traffic; ``-p`` with ``--output-format json``, a short ``--system-prompt``,
  ``--tools`` and ``--allowedTools`` naming the same tools (``--dangerously-skip-permissions``
  is refused as root), ``--no-session-persistence``. ``bashOutputMaxChars``
  (settings, 4000-128000) sets how much Bash output is sent inline; past it the
  client saves the output to a file and sends a 2 KB preview.
- Codex: a ``model_providers`` entry in a temporary ``CODEX_HOME``
  (``base_url`` with ``/v1``, ``wire_api = "responses"``, ``supports_websockets = false``,
  no retries), ``codex exec --json --ephemeral --skip-git-repo-check``, the sandbox
  bypassed (the test's directory is the sandbox). ``tool_output_token_limit``
  sets how much command output is sent; by default Codex truncates it to
  about 10 KB itself.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from .install import Client

__all__ = ["CLAUDE_MODEL", "CODEX_MODEL", "Run", "codex_config", "run_claude", "run_codex"]

CLAUDE_MODEL = "claude-sonnet-4-5-20250929"
CODEX_MODEL = "gpt-5-codex"
DUMMY_ANTHROPIC_KEY = "sk-ant-api03-offline-test-key"
DUMMY_OPENAI_KEY = "sk-offline-test-key"


@dataclass(frozen=True, slots=True)
class Run:
    """How a client run ended."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def json_lines(self) -> list[Any]:
        """Every stdout line that is a JSON value (codex ``--json`` events, claude's result)."""
        out: list[Any] = []
        for line in self.stdout.splitlines():
            line = line.strip()
            if line.startswith(("{", "[")):
                try:
                    out.append(orjson.loads(line))
                except orjson.JSONDecodeError:
                    continue
        return out

    def describe(self) -> str:
        head = f"{' '.join(self.argv[:2])} exited {self.returncode} after {self.seconds:.1f} s"
        return f"{head}\nstdout:\n{self.stdout[-4000:]}\nstderr:\n{self.stderr[-4000:]}"


def _base_env(home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "TMPDIR": str(home / "tmp"),
    }


def _run(argv: Sequence[str], cwd: Path, env: Mapping[str, str], timeout: float) -> Run:
    started = time.monotonic()
    try:
        done = subprocess.run(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:

        def text(data: bytes | str | None) -> str:
            return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")

        return Run(
            tuple(argv), -9, text(exc.stdout), text(exc.stderr) + f"\n(timed out after {timeout} s)", timeout
        )
    return Run(tuple(argv), done.returncode, done.stdout, done.stderr, time.monotonic() - started)


def run_claude(
    client: Client,
    base_url: str,
    prompt: str,
    *,
    cwd: Path,
    home: Path,
    tools: str = "Bash,Read,Grep",
    system_prompt: str = "You are a terse coding agent. Use the tools you are given.",
    settings: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 90,
    extra: Sequence[str] = (),
) -> Run:
    """``claude -p PROMPT`` pointed at ``base_url``; its stdout is the JSON result.

    ``extra`` are more arguments (``--mcp-config FILE``...).
    """
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    full_env = {
        **_base_env(home),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": DUMMY_ANTHROPIC_KEY,
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",
        **(env or {}),
    }
    argv = [
        str(client.binary),
        "-p",
        prompt,
        "--output-format",
        "json",
        "--system-prompt",
        system_prompt,
        "--tools",
        tools,
        "--allowedTools",
        tools,
        "--no-session-persistence",
        "--model",
        CLAUDE_MODEL,
    ]
    if settings:
        argv += ["--settings", orjson.dumps(dict(settings)).decode()]
    argv += extra
    return _run(argv, cwd, full_env, timeout)


def codex_config(
    base_url: str, *, extra: Mapping[str, Any] | None = None, provider: Mapping[str, Any] | None = None
) -> str:
    """A ``config.toml`` whose only provider is ``base_url`` (the root; ``/v1`` is added).

    ``extra`` adds top-level keys; ``provider`` adds or overrides keys of the provider entry.
    """

    def toml(value: Any) -> str:
        return orjson.dumps(value).decode()  # strings, numbers and booleans read the same in TOML

    top = {"model": CODEX_MODEL, "model_provider": "scripted", **(extra or {})}
    lines = [f"{key} = {toml(value)}" for key, value in top.items()]
    entry = {
        "name": "scripted",
        "base_url": base_url.rstrip("/") + "/v1",
        "env_key": "SCRIPTED_OPENAI_KEY",
        "wire_api": "responses",
        "supports_websockets": False,
        "request_max_retries": 0,
        "stream_max_retries": 0,
        **(provider or {}),
    }
    lines.append("[model_providers.scripted]")
    lines += [f"{key} = {toml(value)}" for key, value in entry.items()]
    return "\n".join(lines) + "\n"


def run_codex(
    client: Client,
    base_url: str,
    prompt: str,
    *,
    cwd: Path,
    home: Path,
    config: Mapping[str, Any] | None = None,
    provider: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 90,
) -> Run:
    """``codex exec --json PROMPT`` with ``base_url`` as its only provider (see :func:`codex_config`)."""
    codex_home = home / "codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(codex_config(base_url, extra=config, provider=provider))
    full_env = {
        **_base_env(home),
        "CODEX_HOME": str(codex_home),
        "SCRIPTED_OPENAI_KEY": DUMMY_OPENAI_KEY,
        **(env or {}),
    }
    argv = [
        str(client.binary),
        "exec",
        "--json",
        "--ephemeral",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        prompt,
    ]
    return _run(argv, cwd, full_env, timeout)
