"""classify() against a real llama.cpp server's real refusals, through the real SDKs.

One server (SmolLM2-135M, an ``N_CTX``-token window, no context shift) serves
the whole session. An oversized prompt is refused right after tokenisation,
before any prompt processing, so those tests are fast; the few that generate
keep their prompts tiny.

What the server does here (xllamacpp 2026.10, asserted below):

* an oversized prompt on ``/v1/chat/completions``, ``/v1/messages`` and
  ``/v1/responses`` (streaming or not) gets the same HTTP 400
  ``{"error": {"code": 400, "message": "request (N tokens) exceeds the available
  context size (N_CTX tokens), try increasing it", "type":
  "exceed_context_size_error", "n_prompt_tokens": N, "n_ctx": N_CTX}}``;
* ``max_tokens=5`` ends a chat with ``finish_reason == "length"`` and a
  message with ``stop_reason == "max_tokens"``;
* a prompt that fits but leaves less room than ``max_tokens`` is NOT refused:
  generation stops when the window is full, reported as ``"length"``.

The server helper is importable by any test file; see ``tests/llama_server.py``.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from llama_server import llama_server, require_llama_server
from toolbudget.recovery import Classified, ErrorKind, classify

N_CTX = 512
OVERSIZED = "hello world " * 400  # about 800 tokens with the chat template
MODEL = "smollm2"  # the server serves one model whatever the name

pytestmark = pytest.mark.slow


def client_library(name: str) -> ModuleType:
    """An SDK the test needs; skip without it, but fail under CI."""
    try:
        return importlib.import_module(name)
    except ImportError:
        reason = f"{name} is not installed (pip install {name})"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must run the real llama.cpp tests")
        pytest.skip(reason)


@pytest.fixture(scope="session")
def llama_url() -> Iterator[str]:
    """One real llama.cpp server for the session (skipped without it, failed under CI)."""
    require_llama_server()
    with llama_server(n_ctx=N_CTX) as url:
        yield url


def openai_client(url: str) -> Any:
    return client_library("openai").OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)


def anthropic_client(url: str) -> Any:
    return client_library("anthropic").Anthropic(base_url=url, api_key="x", max_retries=0)


def assert_real_overflow(result: Classified, body: object) -> None:
    assert result.kind is ErrorKind.CONTEXT_OVERFLOW, result
    assert result.limit == N_CTX
    assert result.prompt_tokens is not None
    assert result.prompt_tokens > N_CTX
    assert (result.status, result.provider, result.code) == (400, "llama.cpp", "exceed_context_size_error")
    assert result.message.startswith(
        f"request ({result.prompt_tokens} tokens) exceeds the available context size"
    )
    # The numbers are the server's own fields, not a re-parse of something else.
    error = body.get("error", body) if isinstance(body, dict) else None
    assert isinstance(error, dict)
    assert (error["n_prompt_tokens"], error["n_ctx"]) == (result.prompt_tokens, N_CTX)


@pytest.mark.parametrize("stream", [False, True])
def test_openai_chat_overflow(llama_url: str, stream: bool) -> None:
    openai = client_library("openai")
    with openai_client(llama_url) as client, pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": OVERSIZED}], max_tokens=16, stream=stream
        )
    assert_real_overflow(classify(info.value), info.value.body)


def test_openai_responses_overflow(llama_url: str) -> None:
    openai = client_library("openai")
    with openai_client(llama_url) as client, pytest.raises(openai.BadRequestError) as info:
        client.responses.create(model=MODEL, input=OVERSIZED, max_output_tokens=16)
    assert_real_overflow(classify(info.value), info.value.body)


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_messages_overflow(llama_url: str, stream: bool) -> None:
    anthropic = client_library("anthropic")
    with anthropic_client(llama_url) as client, pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(
            model=MODEL, max_tokens=16, messages=[{"role": "user", "content": OVERSIZED}], stream=stream
        )
    assert_real_overflow(classify(info.value), info.value.body)


ENDPOINTS = {
    "/v1/chat/completions": {"model": MODEL, "messages": [{"role": "user", "content": OVERSIZED}]},
    "/v1/messages": {"model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": OVERSIZED}]},
    "/v1/responses": {"model": MODEL, "input": OVERSIZED},
}


@pytest.mark.parametrize("path", list(ENDPOINTS))
def test_raw_httpx_overflow_classifies_like_the_sdk(llama_url: str, path: str) -> None:
    httpx = client_library("httpx")
    response = httpx.post(f"{llama_url}{path}", json=ENDPOINTS[path], timeout=30)
    assert response.status_code == 400
    raw = classify(response)
    assert_real_overflow(raw, response.json())
    # Exactly what the SDK's exception for the same answer gives.
    openai = client_library("openai")
    with openai_client(llama_url) as client, pytest.raises(openai.BadRequestError) as info:
        client.post(f"{llama_url}{path}", body=ENDPOINTS[path], cast_to=object)
    assert classify(info.value) == raw
    assert classify((response.status_code, response.content)) == raw


def test_max_tokens_cut_on_chat(llama_url: str) -> None:
    with openai_client(llama_url) as client:
        completion = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "Tell me a long story."}], max_tokens=5
        )
    assert completion.choices[0].finish_reason == "length"
    assert completion.usage is not None
    assert completion.usage.completion_tokens == 5


def test_max_tokens_cut_on_messages(llama_url: str) -> None:
    with anthropic_client(llama_url) as client:
        # Greedy, so the answer is the same every run: sampled, a five-token answer may end on its own.
        message = client.messages.create(
            model=MODEL,
            max_tokens=5,
            messages=[{"role": "user", "content": "Tell me a long story."}],
            extra_body={"temperature": 0},  # this SDK's create() no longer takes it as an argument
        )
    assert message.stop_reason == "max_tokens"
    assert message.usage.output_tokens == 5


def test_max_output_tokens_on_responses(llama_url: str) -> None:
    """llama.cpp stops at ``max_output_tokens`` but (in this build) still says ``"completed"``,
    not ``"incomplete"``: a caller cannot rely on ``incomplete_details`` from it."""
    with openai_client(llama_url) as client:
        response = client.responses.create(
            model=MODEL, input="Tell me a long story.", max_output_tokens=5, temperature=0
        )
    assert response.usage is not None
    assert response.usage.output_tokens == 5
    assert response.status in {"completed", "incomplete"}


def test_prompt_that_fits_with_too_large_max_tokens_is_cut_at_the_window(llama_url: str) -> None:
    """Unlike Anthropic or vLLM, llama.cpp does not refuse prompt + max_tokens > n_ctx: it
    generates until the window is full. No error to classify, only a "length" finish."""
    prompt = "hello world " * 225  # about 480 tokens: fits, with 30 tokens of room (processing is the cost)
    with openai_client(llama_url) as client:
        completion = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": prompt}], max_tokens=N_CTX, temperature=0
        )
    assert completion.choices[0].finish_reason == "length"
    assert completion.usage is not None
    assert completion.usage.completion_tokens < N_CTX
    assert completion.usage.prompt_tokens + completion.usage.completion_tokens <= N_CTX
