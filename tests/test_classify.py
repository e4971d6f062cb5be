"""classify() against every provider wording we know, and against the real SDKs' exceptions.

The catalogue below is reference/providers.md section 4.1, one realistic wire
answer per message, plus the look-alikes that must NOT count as an overflow
(rate limits that say "too large", bare 413s, 5xx, timeouts). The SDK tests
build each SDK's own exception the way it builds it in production: a real
client over ``MockTransport``, a real botocore client behind its ``Stubber``,
google-genai's own ``raise_for_response``.

The optional SDKs are imported by name: without them a test skips with the
install line, except under ``CI``, where it fails so that a missing SDK can
never leave its path untested unnoticed.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import EllipsisType, ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolbudget.recovery import Classified, ErrorKind, classify

OVERFLOW = ErrorKind.CONTEXT_OVERFLOW
OUTPUT = ErrorKind.OUTPUT_LIMIT
PAYLOAD = ErrorKind.PAYLOAD_TOO_LARGE
RATE = ErrorKind.RATE_LIMITED
OTHER = ErrorKind.OTHER

INSTALL = {"google.genai.errors": "google-genai", "botocore.session": "botocore", "botocore.stub": "botocore"}


def sdk(name: str) -> ModuleType:
    """Import an optional SDK; skip without it, but fail under CI."""
    try:
        return importlib.import_module(name)
    except ImportError:
        reason = f"{name} is not installed (pip install {INSTALL.get(name, name.partition('.')[0])})"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must test classify() against the real SDK")
        pytest.skip(reason)


def sdk_http(client_sdk: ModuleType) -> ModuleType:
    """The HTTP library an SDK is built on: httpx2 in current releases, httpx in older ones."""
    base = importlib.import_module(f"{client_sdk.__name__}._base_client")
    http = getattr(base, "httpx2", None) or base.httpx
    assert isinstance(http, ModuleType)
    return http


# --------------------------------------------------------------------------- wire bodies

CLE = "context_length_exceeded"


def oai(message: str, code: str | None = CLE, param: str | None = "messages") -> dict[str, Any]:
    """OpenAI's error body (also Azure, Groq, DeepSeek, Together, OpenRouter...)."""
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def ant(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    """Anthropic's error body."""
    return {"type": "error", "error": {"type": kind, "message": message}}


def gem(message: str, code: int = 400, status: str = "INVALID_ARGUMENT") -> dict[str, Any]:
    """Gemini's error body (AI Studio and Vertex)."""
    error = {"message": message, "domain": "global", "reason": "badRequest"}
    return {"error": {"code": code, "message": message, "errors": [error], "status": status}}


def vllm(message: str) -> dict[str, Any]:
    """vLLM's (and Mistral's) flat error body."""
    return {"object": "error", "message": message, "type": "BadRequestError", "param": None, "code": 400}


def llama(message: str, status: int, prompt: int | None = None, n_ctx: int | None = None) -> dict[str, Any]:
    """llama.cpp's error body: ``exceed_context_size_error`` with its two numbers as fields."""
    error: dict[str, Any] = {"code": status, "message": message, "type": "exceed_context_size_error"}
    if prompt is not None:
        error |= {"n_prompt_tokens": prompt, "n_ctx": n_ctx}
    return {"error": error}


# Every message text, as providers.md and the providers' own threads quote it.
M = {
    "openai-chat": "This model's maximum context length is 128000 tokens. However, your messages resulted in"
    " 202868 tokens (202767 in the messages, 101 in the functions). Please reduce the length of the messages"
    " or functions.",
    "openai-old": "This model's maximum context length is 4097 tokens. However, you requested 4268 tokens"
    " (4012 in the messages, 256 in the completion). Please reduce the length of the messages or completion.",
    "openai-responses": "Your input exceeds the context window of this model. Please adjust your input and"
    " try again.",
    "azure": "(context_length_exceeded) This model's maximum context length is 32768 tokens. However, you"
    " requested 35969 tokens (9969 in the messages, 26000 in the completion). Please reduce the length of"
    " the messages or completion.",
    "anthropic": "prompt is too long: 219898 tokens > 200000 maximum",
    "anthropic-max": "input length and `max_tokens` exceed context limit: 199759 + 8192 > 200000, decrease"
    " input length or `max_tokens` and try again",
    "gemini": "The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).",
    "gemini-no-count": "The input token count exceeds the maximum number of tokens allowed (1048576).",
    "bedrock-claude": "The model returned the following errors: prompt is too long: 200049 tokens > 200000"
    " maximum",
    "bedrock-prefixed": "The model returned the following errors: Input is too long for requested model.",
    "bedrock-bare": "Input is too long for requested model.",
    "bedrock-max": "input length and `max_tokens` exceed context limit",
    "bedrock-bytes": "too many total text bytes",
    "bedrock-input": "Too many input tokens",
    "mistral": "Prompt contains 300000 tokens, too large for model with 131072 maximum context length",
    "mistral-images": "Prompt contains 300000 tokens and 0 images too large for model with 131072 maximum"
    " context length",
    "groq": "Please reduce the length of the messages or completion.",
    "vllm": "This model's maximum context length is 16384 tokens. However, you requested 122946 tokens"
    " (112946 in the messages, 10000 in the completion). Please reduce the length of the messages or"
    " completion.",
    "vllm-request-has": "'max_tokens' or 'max_completion_tokens' is too large: 64000. This model's maximum"
    " context length is 64001 tokens and your request has 24235 input tokens (64000 > 64001 - 24235).",
    "vllm-at-least": "This model's maximum context length is 128000 tokens. However, you requested 65535"
    " output tokens and your prompt contains at least 62466 input tokens, for a total of at least 128001"
    " tokens.",
    "vllm-negative": "max_tokens must be at least 1, got -186.",
    "llama.cpp-new": "request (4390 tokens) exceeds the available context size (4096 tokens), try increasing"
    " it",
    "llama.cpp-old": "the request exceeds the available context size. try increasing the context size or"
    " enable context shift",
    "llama.cpp-server-error": "Context size has been exceeded.",
    "llama-cpp-python": "Requested tokens (2285) exceed context window of 2048",
    "ollama": "prompt too long; exceeded max context length by 4 tokens",
    "ollama-embed": "the input length exceeds the context length",
    "openrouter": "This endpoint's maximum context length is 32768 tokens. However, you requested about 42832"
    ' tokens (…). Please reduce the length of either one, or use the "middle-out" transform to compress your'
    " prompt automatically.",
    "xai": "This model's maximum prompt length is 131072 but the request contains 537812 tokens.",
    "together": "The input (40000 tokens) is longer than the model's context length (32768 tokens).",
    "cerebras": "Please reduce the length of the messages or completion. Current length is 42328 while limit"
    " is 40000",
    "lm-studio": "The number of tokens to keep from the initial prompt is greater than the context length."
    " Try to load the model with a larger context length, or provide a shorter input",
    "deepseek": "This model's maximum context length is 65536 tokens. However, you requested 70000 tokens"
    " (70000 in the messages, 0 in the completion). Please reduce the length of the messages or completion.",
    # Look-alikes.
    "openai-tpm": "Request too large for gpt-4o in organization org-a1b2c3 on tokens per min (TPM): Limit"
    " 30000, Requested 52310. The input or output tokens must be reduced in order to run successfully. Visit"
    " https://platform.openai.com/account/rate-limits to learn more.",
    "bedrock-throttle": "Too many tokens, please wait before trying again.",
    "anthropic-rate": "This request would exceed the rate limit for your organization of 30,000 input tokens"
    " per minute.",
    "gemini-quota": "Resource has been exhausted (e.g. check quota).",
    "anthropic-413": "Request exceeds the maximum size",
    "vertex-payload": "Request payload size exceeds the limit: 10485760 bytes.",
    "openai-string": "Invalid 'messages[1].content': string too long. Expected a string with maximum length"
    " 10485760, but got a string with length 12000000 instead.",
    "anthropic-output": "max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens for"
    " claude-sonnet-4-20250514",
    "openai-output": "max_tokens is too large: 100000. This model supports at most 16384 completion tokens,"
    " whereas you provided 100000.",
    "openai-output-completion": "max_completion_tokens is too large: 200000. This model supports at most"
    " 100000 completion tokens, whereas you provided 200000.",
    "bedrock-output": "The maximum tokens you requested exceeds the model limit of 4096. Try again with a"
    " maximum tokens value that is lower than 4096.",
    "vertex-output": "Unable to submit request because it has a maxOutputTokens value of 100000 but the"
    " supported range is from 1 (inclusive) to 65537 (exclusive). Update the value and try again.",
    "anthropic-pairing": "messages.22: `tool_use` ids were found without `tool_result` blocks immediately"
    " after: toolu_01. Each `tool_use` block must have a corresponding `tool_result` block in the next"
    " message.",
}


# --------------------------------------------------------------------------- the catalogue


@dataclass(frozen=True)
class Case:
    id: str
    error: object
    kind: ErrorKind
    prompt: int | None = None
    limit: int | None = None
    output: int | None = None
    provider: str | EllipsisType | None = ...  # ... = not checked

    def check(self, result: Classified) -> None:
        assert result.kind is self.kind, result
        assert result.prompt_tokens == self.prompt, result
        assert result.limit == self.limit, result
        assert result.requested_output == self.output, result
        if self.provider is not ...:
            assert result.provider == self.provider, result


def failed_event(message: str) -> dict[str, Any]:
    """A streamed Responses ``response.failed`` event."""
    return {
        "type": "response.failed",
        "response": {"status": "failed", "error": {"code": CLE, "message": message}},
    }


def stream_event(message: str) -> dict[str, Any]:
    """A streamed Responses ``error`` event."""
    return {"type": "error", "code": CLE, "message": message, "param": "input", "sequence_number": 3}


OPENROUTER_PARTS = M["openrouter"].replace("(…)", "(34640 of text input, 8192 in the output)")
AZURE_WIRE = M["azure"].split(") ", 1)[1]
GEMINI_AS_TEXT = json.dumps(gem(M["gemini"]), indent=2)  # a proxy passing the upstream body on as a string

CATALOGUE = [
    # OpenAI Chat Completions: both wordings; the older one splits prompt and completion.
    Case("openai-chat", (400, oai(M["openai-chat"])), OVERFLOW, 202868, 128000, provider="openai"),
    Case("openai-chat-old", (400, oai(M["openai-old"])), OVERFLOW, 4012, 4097, 256, "openai"),
    Case(
        "openai-lowercase",
        (400, oai(M["openai-old"].replace(". However", ", however"))),
        OVERFLOW,
        4012,
        4097,
        256,
    ),
    # OpenAI Responses: the 400, and the same error streamed.
    Case("openai-responses", (400, oai(M["openai-responses"], param="input")), OVERFLOW, provider="openai"),
    Case("responses-error-event", stream_event(M["openai-responses"]), OVERFLOW, provider="openai"),
    Case("responses-failed-event", failed_event(M["openai-responses"]), OVERFLOW),
    # Azure OpenAI: the wire body, and the Azure SDK's "(code) message" text.
    Case("azure-wire", (400, oai(AZURE_WIRE)), OVERFLOW, 9969, 32768, 26000),
    Case("azure-sdk-text", M["azure"], OVERFLOW, 9969, 32768, 26000, "azure"),
    Case("azure-sdk-text-bytes", (400, M["azure"].encode()), OVERFLOW, 9969, 32768, 26000, "azure"),
    # Anthropic; also as bytes.
    Case("anthropic", (400, ant(M["anthropic"])), OVERFLOW, 219898, 200000, provider="anthropic"),
    Case("anthropic-max", (400, ant(M["anthropic-max"])), OVERFLOW, 199759, 200000, 8192, "anthropic"),
    Case("anthropic-bytes", (400, json.dumps(ant(M["anthropic"])).encode()), OVERFLOW, 219898, 200000),
    # Gemini; also list-wrapped, without the count, and as JSON inside a proxy's string.
    Case("gemini", (400, gem(M["gemini"])), OVERFLOW, 1200293, 1048576, provider="gemini"),
    Case("gemini-list", (400, [gem(M["gemini"])]), OVERFLOW, 1200293, 1048576, provider="gemini"),
    Case("gemini-no-count", (400, gem(M["gemini-no-count"])), OVERFLOW, None, 1048576, provider="gemini"),
    Case(
        "gemini-json-in-text",
        (400, {"error": {"message": GEMINI_AS_TEXT, "code": 400}}),
        OVERFLOW,
        1200293,
        1048576,
    ),
    # Bedrock, with and without "The model returned the following errors:".
    Case(
        "bedrock-claude",
        (400, {"message": M["bedrock-claude"]}),
        OVERFLOW,
        200049,
        200000,
        provider="bedrock",
    ),
    Case("bedrock-prefixed", (400, {"message": M["bedrock-prefixed"]}), OVERFLOW, provider="bedrock"),
    Case("bedrock-bare", (400, {"message": M["bedrock-bare"]}), OVERFLOW, provider="bedrock"),
    Case("bedrock-max", (400, {"message": M["bedrock-max"]}), OVERFLOW),
    Case("bedrock-bytes", (400, {"message": M["bedrock-bytes"]}), OVERFLOW),
    Case("bedrock-input", (400, {"message": M["bedrock-input"]}), OVERFLOW),
    # Mistral, both wordings.
    Case("mistral", (400, vllm(M["mistral"])), OVERFLOW, 300000, 131072, provider="mistral"),
    Case("mistral-images", (400, vllm(M["mistral-images"])), OVERFLOW, 300000, 131072, provider="mistral"),
    # Groq: only the code and a generic sentence.
    Case("groq", (400, oai(M["groq"])), OVERFLOW),
    # vLLM: the classic wording, two newer ones, and a window too small for any max_tokens.
    Case("vllm", (400, vllm(M["vllm"])), OVERFLOW, 112946, 16384, 10000, "vllm"),
    Case("vllm-request-has", (400, vllm(M["vllm-request-has"])), OVERFLOW, 24235, 64001, 64000, "vllm"),
    Case("vllm-at-least", (400, vllm(M["vllm-at-least"])), OVERFLOW, 62466, 128000, 65535, "vllm"),
    Case("vllm-negative", (400, vllm(M["vllm-negative"])), OVERFLOW, provider="vllm"),
    # llama.cpp: the new 400, the old 500 (same type), the server_error 500; llama-cpp-python in process.
    Case(
        "llama.cpp-400",
        (400, llama(M["llama.cpp-new"], 400, 4390, 4096)),
        OVERFLOW,
        4390,
        4096,
        provider="llama.cpp",
    ),
    Case(
        "llama.cpp-500",
        (500, llama(M["llama.cpp-old"], 500, 5000, 4096)),
        OVERFLOW,
        5000,
        4096,
        provider="llama.cpp",
    ),
    Case("llama.cpp-500-type", (500, llama("", 500)), OVERFLOW, provider="llama.cpp"),
    Case(
        "llama.cpp-server-error",
        (500, {"error": {"code": 500, "message": M["llama.cpp-server-error"], "type": "server_error"}}),
        OVERFLOW,
        provider="llama.cpp",
    ),
    Case("llama.cpp-text", (400, M["llama.cpp-new"]), OVERFLOW, 4390, 4096, provider="llama.cpp"),
    Case(
        "llama-cpp-python",
        ValueError(M["llama-cpp-python"]),
        OVERFLOW,
        2285,
        2048,
        provider="llama-cpp-python",
    ),
    Case("llama-cpp-python-wire", (400, oai(M["llama-cpp-python"], None)), OVERFLOW, 2285, 2048),
    # Ollama's refusal (neither number is given) and its embeddings wording.
    Case("ollama", (400, {"error": M["ollama"]}), OVERFLOW, provider="ollama"),
    Case("ollama-embed", (400, {"error": M["ollama-embed"]}), OVERFLOW, provider="ollama"),
    # OpenRouter, with the breakdown elided and readable.
    Case("openrouter", (400, {"error": {"message": M["openrouter"], "code": 400}}), OVERFLOW, 42832, 32768),
    Case("openrouter-parts", (400, oai(OPENROUTER_PARTS, None)), OVERFLOW, 34640, 32768, 8192, "openrouter"),
    # The others.
    Case(
        "xai",
        (400, {"code": "Client specified an invalid argument", "error": M["xai"]}),
        OVERFLOW,
        537812,
        131072,
    ),
    Case("together", (400, oai(M["together"], None)), OVERFLOW, 40000, 32768, provider="together"),
    Case("cerebras", (400, oai(M["cerebras"])["error"]), OVERFLOW, 42328, 40000, provider="cerebras"),
    Case("lm-studio", (400, {"error": M["lm-studio"]}), OVERFLOW, provider="lmstudio"),
    Case("deepseek", (400, oai(M["deepseek"], "invalid_request_error", None)), OVERFLOW, 70000, 65536, 0),
    Case(
        "thousands-separators",
        "prompt is too long: 219,898 tokens > 200,000 maximum",
        OVERFLOW,
        219898,
        200000,
    ),
]

ECHOED_PROMPT = {  # a 422 that echoes the request: the user's words are not the provider's
    "detail": [
        {
            "type": "missing",
            "loc": ["body", "model"],
            "msg": "Field required",
            "input": {"messages": [{"role": "user", "content": "why is the prompt too long?"}]},
        }
    ]
}
TPM = {"error": {"message": M["openai-tpm"], "type": "tokens", "param": None, "code": "rate_limit_exceeded"}}

LOOK_ALIKES = [
    # Rate limits come first, even when they say "too large" or "too many tokens".
    Case("openai-tpm", (429, TPM), RATE, 52310, 30000, provider="openai"),
    Case("openai-tpm-text", M["openai-tpm"], RATE, 52310, 30000),
    Case("bedrock-throttle", (429, {"message": M["bedrock-throttle"]}), RATE, provider="bedrock"),
    Case("bedrock-throttle-text", M["bedrock-throttle"], RATE),
    Case("anthropic-rate", (429, ant(M["anthropic-rate"], "rate_limit_error")), RATE),
    Case(
        "anthropic-rate-in-stream", (200, ant("Rate limited", "rate_limit_error")), RATE
    ),  # SSE error on a 200
    Case("gemini-quota", (429, gem(M["gemini-quota"], 429, "RESOURCE_EXHAUSTED")), RATE, provider="gemini"),
    Case("bare-429", (429, ""), RATE),
    Case("429-saying-overflow", (429, ant(M["anthropic"])), RATE),
    # Too large in bytes is not a token overflow.
    Case("anthropic-413", (413, ant(M["anthropic-413"], "request_too_large")), PAYLOAD, provider="anthropic"),
    Case("anthropic-413-flat", (413, {"type": "request_too_large", "message": M["anthropic-413"]}), PAYLOAD),
    Case("bare-413", (413, b""), PAYLOAD),
    Case("proxy-413-html", (413, "<html><h1>413 Request Entity Too Large</h1></html>"), PAYLOAD),
    Case("vertex-payload", (400, gem(M["vertex-payload"])), PAYLOAD, provider="gemini"),
    Case("vertex-payload-text", "400 Request payload size exceeds the limit", PAYLOAD),
    Case("openai-string", (400, oai(M["openai-string"], "string_above_max_length")), PAYLOAD),
    # max_tokens above the model's own output cap.
    Case("anthropic-output", (400, ant(M["anthropic-output"])), OUTPUT, None, 64000, 100000, "anthropic"),
    Case(
        "openai-output",
        (400, oai(M["openai-output"], None, "max_tokens")),
        OUTPUT,
        None,
        16384,
        100000,
        "openai",
    ),
    Case("openai-output-completion", M["openai-output-completion"], OUTPUT, None, 100000, 200000),
    Case("bedrock-output", (400, {"message": M["bedrock-output"]}), OUTPUT, None, 4096, provider="bedrock"),
    Case("vertex-output", (400, gem(M["vertex-output"])), OUTPUT, None, 65536, 100000, "gemini"),
    # Upstream failures, whatever their body says (llama.cpp's overflow 500s are above).
    Case("anthropic-500", (500, ant("Internal server error", "api_error")), OTHER),
    Case("anthropic-529", (529, ant("Overloaded", "overloaded_error")), OTHER),
    Case("anthropic-overloaded-in-stream", (200, ant("Overloaded", "overloaded_error")), OTHER),
    Case("gateway-502", (502, "<html><body>Bad Gateway</body></html>"), OTHER),
    Case("gateway-504", (504, b"upstream request timeout"), OTHER),
    Case("proxy-502-quoting-overflow", (502, ant(M["anthropic"])), OTHER),
    Case(
        "503-please-wait", (503, {"message": "Too many connections, please wait before trying again."}), OTHER
    ),
    # Unrecognised: never a guess.
    Case("bad-param", (400, oai("Invalid value for 'temperature'.", "invalid_value")), OTHER),
    Case("anthropic-401", (401, ant("invalid x-api-key", "authentication_error")), OTHER),
    Case("model-not-found", (404, oai("The model `gpt-9` does not exist", "model_not_found")), OTHER),
    Case("pairing-error", (400, ant(M["anthropic-pairing"])), OTHER),
    Case("vllm-zero-max-tokens", (400, vllm("max_tokens must be at least 1, got 0.")), OTHER),
    Case("422-echoing-the-prompt", (422, ECHOED_PROMPT), OTHER),
    Case("empty-400", (400, b""), OTHER),
    Case("not-utf8", (400, b"\xff\xfe not utf-8 {"), OTHER),
    Case("none", None, OTHER),
    Case("an-int", 42, OTHER),
    Case("plain-exception", RuntimeError("something broke"), OTHER),
]


@pytest.mark.parametrize("case", CATALOGUE, ids=lambda case: case.id)
def test_every_overflow_wording_in_the_catalogue(case: Case) -> None:
    case.check(classify(case.error))


@pytest.mark.parametrize("case", LOOK_ALIKES, ids=lambda case: case.id)
def test_look_alikes_and_unknowns(case: Case) -> None:
    case.check(classify(case.error))


def test_message_status_and_code_are_extracted() -> None:
    result = classify((400, oai(M["openai-chat"])))
    assert (result.message, result.status, result.code) == (M["openai-chat"], 400, CLE)
    assert classify((None, ant(M["anthropic"]))).status is None
    assert classify(gem(M["gemini"])).status == 400  # from the body's own code
    throttled = classify((429, {"message": M["bedrock-throttle"]}))
    assert (throttled.message, throttled.code) == (M["bedrock-throttle"], None)
    assert classify((400, llama(M["llama.cpp-new"], 400, 4390, 4096))).code == "exceed_context_size_error"


def test_a_wrapper_raised_from_an_sdk_error_is_classified_by_its_cause() -> None:
    try:
        try:
            raise ValueError(M["llama-cpp-python"])
        except ValueError as err:
            raise RuntimeError("the agent step failed") from err
    except RuntimeError as wrapper:
        assert classify(wrapper).kind is OVERFLOW
    # An error merely raised while another was handled says nothing about it.
    try:
        try:
            raise ValueError(M["llama-cpp-python"])
        except ValueError:
            raise KeyError("a bug in the handler") from None
    except KeyError as unrelated:
        assert classify(unrelated).kind is OTHER


def test_importing_the_classifier_imports_no_sdk() -> None:
    code = (
        "import sys, toolbudget.recovery as r; r.classify((400, {'error': {'message': 'x'}}));"
        "print(sorted(m for m in ('anthropic', 'openai', 'google.genai', 'botocore', 'httpx', 'httpx2')"
        " if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------- transport failures


def test_builtin_timeouts_and_connection_errors_are_other_whatever_they_say() -> None:
    for error in (TimeoutError(M["anthropic"]), ConnectionResetError("reset"), BrokenPipeError()):
        result = classify(error)
        assert (result.kind, result.prompt_tokens) == (OTHER, None)


@pytest.mark.parametrize("name", ["httpx", "httpx2"])
def test_httpx_timeouts_and_connect_errors_are_other(name: str) -> None:
    http = sdk(name) if name == "httpx" else sdk_http(sdk("openai"))
    request = http.Request("POST", "https://api.example.test/v1/chat/completions")
    for error in (
        http.TimeoutException("timed out", request=request),
        http.ReadTimeout("read timed out", request=request),
        http.ConnectError("[Errno 111] Connection refused", request=request),
        http.RemoteProtocolError("Server disconnected without sending a response.", request=request),
    ):
        assert classify(error).kind is OTHER, error


@pytest.mark.parametrize("name", ["anthropic", "openai"])
def test_sdk_timeout_and_connection_exceptions_are_other(name: str) -> None:
    client_sdk = sdk(name)
    request = sdk_http(client_sdk).Request("POST", "https://api.example.test/v1/messages")
    for error in (
        client_sdk.APITimeoutError(request=request),
        client_sdk.APIConnectionError(request=request),
    ):
        result = classify(error)
        assert (result.kind, result.provider) == (OTHER, name)


@pytest.mark.parametrize("name", ["anthropic", "openai"])
@pytest.mark.parametrize("failure", ["ConnectError", "ReadTimeout"])
def test_real_sdk_transport_failures_are_other(name: str, failure: str) -> None:
    client_sdk = sdk(name)
    http = sdk_http(client_sdk)

    def handler(request: Any) -> Any:
        raise getattr(http, failure)("simulated", request=request)

    with pytest.raises(client_sdk.APIConnectionError) as info:
        call(client_sdk, http, handler, "chat" if name == "openai" else "messages")
    assert classify(info.value).kind is OTHER


# --------------------------------------------------------------------------- real SDK exceptions


def call(client_sdk: ModuleType, http: ModuleType, handler: Callable[[Any], Any], endpoint: str) -> None:
    """One real SDK call over a mock transport; the SDK raises what the answer makes it raise."""
    openai = client_sdk.__name__ == "openai"
    client = (client_sdk.OpenAI if openai else client_sdk.Anthropic)(
        api_key="test-key",
        base_url="https://api.example.test" + ("/v1" if openai else ""),
        max_retries=0,
        http_client=http.Client(transport=http.MockTransport(handler)),
    )
    messages = [{"role": "user", "content": "hi"}]
    try:
        if endpoint == "messages":
            client.messages.create(model="test-model", max_tokens=1024, messages=messages)
        elif endpoint == "messages-stream":
            for _event in client.messages.create(
                model="test-model", max_tokens=1024, messages=messages, stream=True
            ):
                pass
        elif endpoint == "chat":
            client.chat.completions.create(model="test-model", messages=messages)
        elif endpoint == "chat-stream":
            for _chunk in client.chat.completions.create(model="test-model", messages=messages, stream=True):
                pass
        else:
            client.responses.create(model="test-model", input="hi")
    finally:
        client.close()


def answer(http: ModuleType, status: int, body: object) -> Callable[[Any], Any]:
    def handler(request: Any) -> Any:
        if isinstance(body, (dict, list)):
            return http.Response(status, json=body, request=request)
        content = body.encode() if isinstance(body, str) else body
        return http.Response(status, content=content, request=request)

    return handler


def sse(http: ModuleType, event: str | None, data: dict[str, Any]) -> Callable[[Any], Any]:
    """A 200 event stream whose only event is an error."""
    text = (f"event: {event}\n" if event else "") + f"data: {json.dumps(data)}\n\n"

    def handler(request: Any) -> Any:
        headers = {"content-type": "text/event-stream"}
        return http.Response(200, content=text.encode(), headers=headers, request=request)

    return handler


LLAMA_400 = llama(M["llama.cpp-new"], 400, 4390, 4096)
LLAMA_500 = llama(M["llama.cpp-old"], 500, 5000, 4096)
HTML_413 = "<html><h1>413 Request Entity Too Large</h1></html>"

SDK_CASES = [
    # sdk, endpoint, status, body, then the expected kind, prompt, limit, output and provider
    ("anthropic", "messages", 400, ant(M["anthropic"]), OVERFLOW, 219898, 200000, None, "anthropic"),
    ("anthropic", "messages", 400, ant(M["anthropic-max"]), OVERFLOW, 199759, 200000, 8192, "anthropic"),
    ("anthropic", "messages", 400, ant(M["anthropic-output"]), OUTPUT, None, 64000, 100000, "anthropic"),
    (
        "anthropic",
        "messages",
        413,
        ant(M["anthropic-413"], "request_too_large"),
        PAYLOAD,
        None,
        None,
        None,
        "anthropic",
    ),
    (
        "anthropic",
        "messages",
        429,
        ant("Rate limited", "rate_limit_error"),
        RATE,
        None,
        None,
        None,
        "anthropic",
    ),
    (
        "anthropic",
        "messages",
        529,
        ant("Overloaded", "overloaded_error"),
        OTHER,
        None,
        None,
        None,
        "anthropic",
    ),
    ("anthropic", "messages", 400, LLAMA_400, OVERFLOW, 4390, 4096, None, "llama.cpp"),
    (
        "anthropic",
        "messages",
        400,
        {"message": M["bedrock-claude"]},
        OVERFLOW,
        200049,
        200000,
        None,
        "bedrock",
    ),
    ("openai", "chat", 400, oai(M["openai-chat"]), OVERFLOW, 202868, 128000, None, "openai"),
    ("openai", "chat", 400, vllm(M["vllm"]), OVERFLOW, 112946, 16384, 10000, "vllm"),
    ("openai", "chat", 400, vllm(M["mistral"]), OVERFLOW, 300000, 131072, None, "mistral"),
    ("openai", "chat", 429, TPM, RATE, 52310, 30000, None, "openai"),
    (
        "openai",
        "chat",
        400,
        oai(M["openai-output"], None, "max_tokens"),
        OUTPUT,
        None,
        16384,
        100000,
        "openai",
    ),
    ("openai", "chat", 413, HTML_413, PAYLOAD, None, None, None, "openai"),
    ("openai", "chat", 500, oai("The server had an error", None), OTHER, None, None, None, "openai"),
    ("openai", "chat", 500, LLAMA_500, OVERFLOW, 5000, 4096, None, "llama.cpp"),
    (
        "openai",
        "responses",
        400,
        oai(M["openai-responses"], param="input"),
        OVERFLOW,
        None,
        None,
        None,
        "openai",
    ),
    ("openai", "responses", 400, M["azure"], OVERFLOW, 9969, 32768, 26000, "azure"),
]


@pytest.mark.parametrize(
    ("name", "endpoint", "status", "body", "kind", "prompt", "limit", "output", "provider"),
    SDK_CASES,
    ids=[f"{case[0]}-{case[1]}-{case[2]}-{case[4].name.lower()}-{i}" for i, case in enumerate(SDK_CASES)],
)
def test_real_sdk_exceptions(
    name: str,
    endpoint: str,
    status: int,
    body: object,
    kind: ErrorKind,
    prompt: int | None,
    limit: int | None,
    output: int | None,
    provider: str,
) -> None:
    client_sdk = sdk(name)
    http = sdk_http(client_sdk)
    with pytest.raises(client_sdk.APIStatusError) as info:
        call(client_sdk, http, answer(http, status, body), endpoint)
    result = classify(info.value)
    Case("sdk", info.value, kind, prompt, limit, output, provider).check(result)
    assert result.status == status
    # The raw answer classifies the same as the SDK's exception built from it.
    raw = classify((status, body))
    assert (raw.kind, raw.prompt_tokens, raw.limit, raw.requested_output) == (kind, prompt, limit, output)


def test_openai_mid_stream_error_is_classified() -> None:
    openai = sdk("openai")
    http = sdk_http(openai)
    with pytest.raises(openai.APIError) as info:
        call(openai, http, sse(http, None, oai(M["openai-responses"])), "chat-stream")
    result = classify(info.value)
    assert (result.kind, result.code, result.status) == (OVERFLOW, CLE, None)


def test_openai_responses_stream_error_event_object_is_classified() -> None:
    openai = sdk("openai")
    event = openai.types.responses.ResponseErrorEvent.model_validate(stream_event(M["openai-responses"]))
    result = classify(event)
    assert (result.kind, result.provider) == (OVERFLOW, "openai")


@pytest.mark.parametrize(("error_type", "kind"), [("overloaded_error", OTHER), ("rate_limit_error", RATE)])
def test_anthropic_mid_stream_error_event(error_type: str, kind: ErrorKind) -> None:
    anthropic = sdk("anthropic")
    http = sdk_http(anthropic)
    with pytest.raises(anthropic.APIStatusError) as info:
        call(anthropic, http, sse(http, "error", ant("stream failed", error_type)), "messages-stream")
    result = classify(info.value)
    assert (result.kind, result.code) == (kind, error_type)


# --------------------------------------------------------------------------- httpx responses


def test_httpx_responses_classify_like_their_pair() -> None:
    httpx = sdk("httpx")
    request = httpx.Request("POST", "https://api.example.test/v1/messages")
    response = httpx.Response(400, json=ant(M["anthropic"]), request=request)
    assert classify(response) == classify((400, ant(M["anthropic"])))
    # raise_for_status() wraps it; the wrapper is read through its response.
    with pytest.raises(httpx.HTTPStatusError) as info:
        response.raise_for_status()
    assert classify(info.value).prompt_tokens == 219898
    # A streamed answer nobody has read yet is read, not refused.
    unread = httpx.Response(400, stream=httpx.ByteStream(json.dumps({"error": M["ollama"]}).encode()))
    assert classify(unread).kind is OVERFLOW
    assert classify(httpx.Response(429, text="slow down")).kind is RATE
    assert classify(httpx.Response(413)).kind is PAYLOAD


def test_bedrock_raw_http_names_the_exception_in_a_header() -> None:
    httpx = sdk("httpx")
    suffix = ":http://internal.amazon.com/coral/com.amazon.bedrock/"
    throttled = classify(
        httpx.Response(
            400, headers={"x-amzn-errortype": "ThrottlingException" + suffix}, json={"message": "x"}
        )
    )
    assert (throttled.kind, throttled.code, throttled.provider) == (RATE, "ThrottlingException", "bedrock")
    overflow = classify(
        httpx.Response(
            400,
            headers={"x-amzn-errortype": "ValidationException" + suffix},
            json={"message": M["bedrock-bare"]},
        )
    )
    assert (overflow.kind, overflow.code, overflow.provider) == (OVERFLOW, "ValidationException", "bedrock")


# --------------------------------------------------------------------------- google-genai

GENAI_CASES = [
    # status, body, then the expected kind, prompt, limit and output
    (400, gem(M["gemini"]), OVERFLOW, 1200293, 1048576, None),
    (429, gem(M["gemini-quota"], 429, "RESOURCE_EXHAUSTED"), RATE, None, None, None),
    (400, gem(M["vertex-payload"]), PAYLOAD, None, None, None),
    (400, gem(M["vertex-output"]), OUTPUT, None, 65536, 100000),
    (500, gem("Internal error encountered.", 500, "INTERNAL"), OTHER, None, None, None),
    (
        503,
        gem("The model is overloaded. Please try again later.", 503, "UNAVAILABLE"),
        OTHER,
        None,
        None,
        None,
    ),
]


@pytest.mark.parametrize(("status", "body", "kind", "prompt", "limit", "output"), GENAI_CASES)
def test_google_genai_errors(
    status: int,
    body: dict[str, Any],
    kind: ErrorKind,
    prompt: int | None,
    limit: int | None,
    output: int | None,
) -> None:
    errors = sdk("google.genai.errors")
    http = sdk_http(sdk("openai")) if importlib.util.find_spec("httpx2") else sdk("httpx")
    # The SDK's own path from an HTTP answer to its exception, also for a list-wrapped body.
    for payload in (body, [body]):
        with pytest.raises(errors.APIError) as info:
            errors.APIError.raise_for_response(http.Response(status, json=payload))
        result = classify(info.value)
        Case("genai", info.value, kind, prompt, limit, output, "gemini").check(result)
        assert (result.status, result.code) == (status, body["error"]["status"])
    direct = (errors.ClientError if status < 500 else errors.ServerError)(status, body)
    assert classify(direct).kind is kind


# --------------------------------------------------------------------------- botocore


@pytest.fixture(scope="module")
def bedrock_client() -> Iterator[Any]:
    """A real bedrock-runtime client; no network, every call is answered by a Stubber."""
    session = sdk("botocore.session").get_session()
    client = session.create_client(
        "bedrock-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    yield client
    client.close()


BOTO_CASES = [
    ("ValidationException", 400, M["bedrock-claude"], OVERFLOW, 200049, 200000),
    ("ValidationException", 400, M["bedrock-prefixed"], OVERFLOW, None, None),
    ("ValidationException", 400, M["bedrock-bare"], OVERFLOW, None, None),
    ("ValidationException", 400, M["bedrock-max"], OVERFLOW, None, None),
    ("ValidationException", 400, M["bedrock-bytes"], OVERFLOW, None, None),
    ("ValidationException", 400, M["bedrock-input"], OVERFLOW, None, None),
    ("ValidationException", 400, M["bedrock-output"], OUTPUT, None, 4096),
    ("ThrottlingException", 429, M["bedrock-throttle"], RATE, None, None),
    ("ThrottlingException", 400, "Rate exceeded", RATE, None, None),
    ("ServiceUnavailableException", 503, "Bedrock is unable to process your request.", OTHER, None, None),
    (
        "ModelErrorException",
        424,
        "The system encountered an unexpected error during processing.",
        OTHER,
        None,
        None,
    ),
    (
        "AccessDeniedException",
        403,
        "You don't have access to the model with the specified model ID.",
        OTHER,
        None,
        None,
    ),
]


@pytest.mark.parametrize(("code", "status", "message", "kind", "prompt", "limit"), BOTO_CASES)
def test_botocore_client_errors(
    bedrock_client: Any,
    code: str,
    status: int,
    message: str,
    kind: ErrorKind,
    prompt: int | None,
    limit: int | None,
) -> None:
    stubber = sdk("botocore.stub").Stubber(bedrock_client)
    stubber.add_client_error(
        "converse", service_error_code=code, service_message=message, http_status_code=status
    )
    messages = [{"role": "user", "content": [{"text": "hi"}]}]
    with stubber, pytest.raises(bedrock_client.exceptions.ClientError) as info:
        bedrock_client.converse(modelId="anthropic.claude-sonnet-4", messages=messages)
    result = classify(info.value)
    Case("botocore", info.value, kind, prompt, limit, provider="bedrock").check(result)
    assert (result.status, result.code, result.message) == (status, code, message)


@pytest.mark.parametrize(
    ("code", "message", "kind"),
    [
        ("validationException", M["bedrock-claude"], OVERFLOW),
        ("throttlingException", M["bedrock-throttle"], RATE),
        ("modelStreamErrorException", "The model stream failed.", OTHER),
        ("serviceUnavailableException", "Bedrock is unable to process your request.", OTHER),
    ],
)
def test_botocore_event_stream_errors(code: str, message: str, kind: ErrorKind) -> None:
    exceptions = sdk("botocore.exceptions")
    error = exceptions.EventStreamError({"Error": {"Code": code, "Message": message}}, "ConverseStream")
    result = classify(error)
    assert (result.kind, result.status, result.provider, result.code) == (kind, None, "bedrock", code)


# --------------------------------------------------------------------------- properties

_KEYS = st.sampled_from(
    ["error", "message", "code", "type", "status", "detail", "n_ctx", "n_prompt_tokens", "raw"]
)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(_KEYS | st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=16,
)


@settings(max_examples=300, deadline=None)
@given(status=st.none() | st.integers(100, 599), body=_JSON | st.binary(max_size=64))
def test_classify_never_raises_and_obeys_the_status(status: int | None, body: object) -> None:
    result = classify((status, body))
    assert isinstance(result, Classified)
    if status == 429:
        assert result.kind is RATE
    if status == 413:
        assert result.kind is PAYLOAD


@settings(max_examples=200, deadline=None)
@given(status=st.integers(500, 599), body=_JSON)
def test_server_errors_are_never_a_guessed_overflow(status: int, body: object) -> None:
    result = classify((status, body))
    assert result.kind is OTHER or result.provider == "llama.cpp"
