"""Two proxy processes sharing one Redis store serve one conversation; a Redis that dies costs recall only."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from proxy_upstream import ScriptedUpstream, upstream
from redis_server import MISSING_REASON, RedisServer, free_port, redis_server_binary, start_redis_server
from toolbudget import MARKER_RE

SRC = Path(__file__).resolve().parents[1] / "src"
pytestmark = pytest.mark.slow


def _missing(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI must run the Redis tests")
    pytest.skip(reason)


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    if redis_server_binary() is None:
        _missing(MISSING_REASON)
    try:
        import redis  # noqa: F401
    except ImportError:
        _missing("the redis package is not installed (pip install 'toolbudget[redis]')")
    server = start_redis_server(tmp_path / "redis")
    yield server
    server.stop()


class ProxyProcess:
    def __init__(self, upstream_url: str, store: str, cwd: Path) -> None:
        self.port = free_port()
        env = {**os.environ, "PYTHONPATH": str(SRC), "TOOLBUDGET_STORE_TIMEOUT": "2"}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "toolbudget",
                "proxy",
                "--port",
                str(self.port),
                "--upstream",
                upstream_url,
                "--store",
                store,
                "--report-headers",
            ],
            env=env,
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise
                time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


@pytest.fixture
def replicas(
    redis: RedisServer, tmp_path: Path
) -> Iterator[tuple[ScriptedUpstream, list[ProxyProcess], RedisServer]]:
    with upstream() as (up, url):
        started = [ProxyProcess(url, redis.url, tmp_path) for _ in range(2)]
        try:
            yield up, started, redis
        finally:
            for proxy in started:
                proxy.stop()


def history(turns: int) -> dict[str, Any]:
    messages: list[Any] = [{"role": "user", "content": "fix the failing tests"}]
    for turn in range(turns):
        output = "".join(
            f"turn {turn} test {i:05d} FAILED with a long assertion message\n" for i in range(6_000)
        )
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": f"toolu_{turn}",
                        "name": "Bash",
                        "input": {"command": f"pytest -k t{turn}"},
                    }
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"toolu_{turn}", "content": output}],
            }
        )
    tools = [{"name": "Bash", "description": "Run a command.", "input_schema": {"type": "object"}}]
    return {"model": "claude-sonnet-4-5", "max_tokens": 100, "tools": tools, "messages": messages}


HEADERS = {"content-type": "application/json", "x-api-key": "sk-shared"}


def test_requests_alternating_between_replicas_give_the_same_bytes_and_recall_each_others_keys(
    replicas: tuple[ScriptedUpstream, list[ProxyProcess], RedisServer],
) -> None:
    up, (a, b), _ = replicas
    session = None
    for turns in range(1, 7):
        body = orjson.dumps(history(turns))
        first, second = (a, b) if turns % 2 else (b, a)
        answer = httpx.post(first.url + "/v1/messages", content=body, headers=HEADERS, timeout=60)
        assert answer.status_code == 200
        sent = up.received[-1].body
        again = httpx.post(second.url + "/v1/messages", content=body, headers=HEADERS, timeout=60)
        assert again.status_code == 200
        assert up.received[-1].body == sent  # the schedule is a pure function of the history
        session = answer.headers["x-toolbudget-session"]
        assert again.headers["x-toolbudget-session"] == session
    keys = [m["key"] for m in MARKER_RE.finditer(up.received[-1].body.decode()) if m["key"]]
    assert len(keys) >= 5
    for key in keys:
        for proxy in (a, b):
            found = httpx.get(f"{proxy.url}/toolbudget/recall/{session}/{key}", headers=HEADERS)
            assert found.status_code == 200 and "FAILED with a long assertion message" in found.text
    stranger = httpx.get(f"{b.url}/toolbudget/recall/{session}/{keys[0]}", headers={"x-api-key": "sk-other"})
    assert stranger.status_code == 404


def test_a_redis_that_dies_still_lets_requests_through_with_the_could_not_be_kept_marker(
    replicas: tuple[ScriptedUpstream, list[ProxyProcess], RedisServer],
) -> None:
    up, (a, _), redis = replicas
    assert (
        httpx.post(
            a.url + "/v1/messages", content=orjson.dumps(history(1)), headers=HEADERS, timeout=60
        ).status_code
        == 200
    )
    redis.stop()
    answer = httpx.post(a.url + "/v1/messages", content=orjson.dumps(history(2)), headers=HEADERS, timeout=60)
    assert answer.status_code == 200
    lost = [m for m in MARKER_RE.finditer(up.received[-1].body.decode()) if m["lost"]]
    assert lost, "the new cut says its original could not be kept"
    metrics = httpx.get(a.url + "/metrics").text
    fallbacks = next(
        line for line in metrics.splitlines() if line.startswith("toolbudget_store_fallbacks_total")
    )
    assert float(fallbacks.split()[-1]) >= 1
    assert httpx.get(a.url + "/healthz").status_code == 200
