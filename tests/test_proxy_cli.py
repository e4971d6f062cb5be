"""``toolbudget proxy``: the server as a command, and the setup lines it prints for each agent."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from proxy_upstream import upstream
from redis_server import free_port

SRC = Path(__file__).resolve().parents[1] / "src"


def toolbudget(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [sys.executable, "-m", "toolbudget", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )


def test_setup_codex_prints_a_responses_provider_without_websockets() -> None:
    done = toolbudget("proxy", "--port", "9911", "setup", "codex")
    assert done.returncode == 0, done.stderr
    assert 'base_url = "http://127.0.0.1:9911/v1"' in done.stdout
    assert 'wire_api = "responses"' in done.stdout
    assert "supports_websockets = false" in done.stdout
    assert '[mcp_servers.toolbudget]\ncommand = "toolbudget"\nargs = ["mcp"]' in done.stdout


@pytest.mark.parametrize(
    ("agent", "line"),
    [
        ("claude", "export ANTHROPIC_BASE_URL=http://127.0.0.1:8787\n"),
        ("claude", "claude mcp add toolbudget -- toolbudget mcp\n"),
        ("gemini", "export GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:8787\n"),
        (
            "gemini",
            '"mcpServers": {"toolbudget": {"type": "stdio", "command": "toolbudget", "args": ["mcp"]}}',
        ),
        ("aider", "export OPENAI_API_BASE=http://127.0.0.1:8787/v1"),
        ("openhands", 'base_url = "http://127.0.0.1:8787/v1"'),
        ("opencode", '"baseURL": "http://127.0.0.1:8787/v1"'),
        ("env", "export GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:8787"),
    ],
)
def test_setup_prints_each_agents_lines(agent: str, line: str) -> None:
    done = toolbudget("proxy", "setup", agent)
    assert done.returncode == 0 and line in done.stdout


def test_a_bad_upstream_is_one_line_and_status_2() -> None:
    done = toolbudget("proxy", "--upstream", "ftp://nowhere")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("toolbudget: error: --upstream")


def test_a_store_url_that_names_no_store_is_one_line_and_status_2() -> None:
    # The store is opened only once the server runs; a typo must not come out as a traceback.
    done = toolbudget("proxy", "--port", str(free_port()), "--store", "bogus:", timeout=30)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(
        "toolbudget: error: unknown store 'bogus:'"
    )


def test_workers_that_cannot_listen_end_the_serve_with_status_2() -> None:
    # The command checks the address first; one taken between that check and the workers' own
    # binds must still not end as if all went well.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        script = (
            "import sys\n"
            "from toolbudget.proxy.config import ProxyConfig\n"
            "from toolbudget.proxy.server import serve\n"
            f"sys.exit(serve(ProxyConfig(store='memory:'), '127.0.0.1', {port}, 2))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
        )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    failed = [
        line for line in done.stderr.splitlines() if line.startswith("toolbudget: error: cannot listen")
    ]
    assert len(failed) == 2 and all("address already in use" in line.lower() for line in failed)


def test_setup_puts_an_ipv6_host_in_brackets() -> None:
    done = toolbudget("proxy", "--host", "::1", "--port", "9912", "setup", "env")
    assert done.returncode == 0, done.stderr
    assert "export ANTHROPIC_BASE_URL=http://[::1]:9912\n" in done.stdout
    assert "export OPENAI_BASE_URL=http://[::1]:9912/v1\n" in done.stdout


@pytest.mark.parametrize("store", ["bogus:x", "dir:?ttl=soon"])
def test_a_bad_store_is_one_line_and_status_2(store: str) -> None:
    done = toolbudget("proxy", "--port", str(free_port()), "--store", store, timeout=30)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("toolbudget: error: "), done.stderr


@pytest.mark.parametrize("workers", ["1", "2"])
def test_an_address_in_use_is_one_line_and_status_2(workers: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = toolbudget("proxy", "--port", str(port), "--workers", workers, timeout=30)
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"toolbudget: error: cannot listen on 127.0.0.1:{port}: Address already in use\n"


def test_a_host_that_names_no_address_is_one_line_and_status_2() -> None:
    done = toolbudget("proxy", "--host", "no-such-host.invalid", "--port", str(free_port()), timeout=30)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("toolbudget: error: cannot listen on 'no-such-host.invalid'")


def test_the_command_serves_the_proxy(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    with upstream() as (up, url):
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "toolbudget",
                "proxy",
                "--port",
                str(port),
                "--upstream",
                url,
                "--store",
                f"dir:{tmp_path}",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            for _ in range(200):
                try:
                    if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.05)
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
            answer = httpx.post(
                base + "/v1/chat/completions", json=body, headers={"authorization": "Bearer k"}
            )
            assert (
                answer.status_code == 200
                and answer.json()["choices"][0]["message"]["content"] == "seen 1 messages"
            )
            assert up.received[-1].headers["authorization"] == "Bearer k"
        finally:
            process.terminate()
            try:
                _, err = process.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate()
                raise AssertionError("the proxy did not stop within 30 s of SIGTERM") from None
    assert process.returncode == 0
    logged = err.decode()
    assert '"api":"openai-chat"' in logged and "Bearer k" not in logged


def test_workers_share_the_port_and_stop_with_the_command(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    with upstream() as (_, url):
        command = [sys.executable, "-m", "toolbudget", "proxy", "--port", str(port), "--upstream", url]
        process = subprocess.Popen(
            [*command, "--store", f"dir:{tmp_path}", "--workers", "2"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            for _ in range(400):
                try:
                    if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.05)
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
            answers = [httpx.post(base + "/v1/chat/completions", json=body) for _ in range(6)]
            assert all(a.status_code == 200 for a in answers)
        finally:
            process.terminate()
            assert process.wait(timeout=60) == 0
    with pytest.raises(httpx.TransportError):
        httpx.get(base + "/healthz", timeout=2)  # no worker was left behind


def test_config_reads_the_settings_of_the_file_it_names(tmp_path: Path) -> None:
    from toolbudget.errors import InputError
    from toolbudget.proxy.config import policy_from_file as _policy

    own = tmp_path / "proxy.toml"
    own.write_text("result_max_chars = 4321\n", encoding="utf-8")
    assert _policy(str(own)).result_max_chars == 4321
    project = tmp_path / "pyproject.toml"
    project.write_text("[tool.toolbudget]\nresult_max_chars = 999\n", encoding="utf-8")
    assert _policy(str(project)).result_max_chars == 999
    with pytest.raises(InputError, match="--config"):
        _policy(str(tmp_path / "missing.toml"))
    (tmp_path / "bad.toml").write_text("= nope", encoding="utf-8")
    with pytest.raises(InputError, match="not TOML"):
        _policy(str(tmp_path / "bad.toml"))
