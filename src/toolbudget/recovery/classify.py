"""Tell a provider's "prompt too long" apart from every other failure of a call.

The recovery loop answers an overflow by sending a smaller history. That only
helps when the provider refused the prompt for its size in tokens, so the loop
must know exactly that, and nothing more:

* Rate limits and throttling are recognised **first**, because several of them
  also say "too large" or "too many tokens" (OpenAI's ``Request too large for
  gpt-4o ... on tokens per min (TPM)``, Bedrock's ``Too many tokens, please
  wait``). Shrinking the history for them throws context away for nothing;
  waiting is the cure.
* A body over a size limit in bytes (HTTP 413, Anthropic ``request_too_large``,
  Vertex ``Request payload size exceeds``) is :attr:`ErrorKind.PAYLOAD_TOO_LARGE`,
  not a token overflow: a bare 413 may come from any proxy on the way.
* ``max_tokens`` above the model's own output cap is :attr:`ErrorKind.OUTPUT_LIMIT`:
  lowering ``max_tokens`` fixes it, compaction cannot.
* Overflow is concluded only from a wording or an error code a provider is known
  to use (``reference/providers.md`` section 4.1). Anything else is
  :attr:`ErrorKind.OTHER`: a guessed overflow would make the loop destroy
  history on, say, an authentication error.
* Server errors (5xx), timeouts and lost connections are :attr:`ErrorKind.OTHER`,
  except llama.cpp's overflow, which some of its builds report as a 500.

:attr:`ErrorKind.CONTEXT_OVERFLOW` also covers "prompt + ``max_tokens`` over the
window" (Anthropic, vLLM, OpenAI's older wording). When the message gives the
numbers, ``prompt_tokens < limit`` tells the caller that the prompt alone fits
and a smaller ``max_tokens`` (``requested_output``) is the cheaper fix.

No provider SDK is imported, here or at call time: exceptions are read by their
attributes (``status_code``, ``body``, ``response``, ``code``, ``details``...),
so the SDKs stay optional and any version that keeps those names works.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import UpstreamError

__all__ = ["Classified", "ErrorKind", "classify"]


class ErrorKind(enum.Enum):
    """What a failed call means for the recovery loop."""

    CONTEXT_OVERFLOW = "context_overflow"
    """The prompt (or prompt + ``max_tokens``) does not fit the model's window: compact and retry."""
    OUTPUT_LIMIT = "output_limit"
    """``max_tokens`` is above what the model can ever produce: lower it and retry."""
    PAYLOAD_TOO_LARGE = "payload_too_large"
    """The request is over a size limit in bytes, not in tokens."""
    RATE_LIMITED = "rate_limited"
    """Throttled or over a rate limit or quota: wait, do not shrink."""
    OTHER = "other"
    """Anything else, including server errors, timeouts and lost connections."""


@dataclass(frozen=True, slots=True)
class Classified:
    """One failed call, as the recovery loop needs to see it.

    The numbers are those the provider's message states, never estimates: a
    field is ``None`` when the message does not say.
    """

    kind: ErrorKind
    prompt_tokens: int | None
    """How many input tokens were sent (for a rate limit: how many were requested)."""
    limit: int | None
    """The context window, the model's output cap (``OUTPUT_LIMIT``) or the rate limit."""
    status: int | None
    """The HTTP status, when one is known."""
    message: str
    """The provider's message text, as extracted from the error."""
    provider: str | None
    """Best guess of who answered: ``"openai"``, ``"anthropic"``, ``"llama.cpp"``, ``"bedrock"``..."""
    requested_output: int | None = None
    """The ``max_tokens`` the request asked for, when the message states it."""
    code: str | None = None
    """The provider's machine-readable code or type (``context_length_exceeded``, ``ValidationException``)."""


# --------------------------------------------------------------------------- wordings

_N = r"\d{1,3}(?:,\d{3})+|\d+"  # a count, with or without thousands separators
_APOS = "['\u2019]?"  # "model's", "model\u2019s" or "models"


def _n(name: str) -> str:
    return rf"(?P<{name}>{_N})"


@dataclass(frozen=True, slots=True)
class _Rule:
    """One known wording: what it means, and who is known to use it.

    Named groups carry the numbers: ``prompt``, ``limit``, ``output``,
    ``limit_excl`` (an exclusive upper bound) and ``total`` with ``parts``
    (OpenAI's "you requested N tokens (A in the messages, B in the completion)").
    """

    kind: ErrorKind
    pattern: re.Pattern[str]
    provider: str | None = None


def _rule(kind: ErrorKind, pattern: str, provider: str | None = None) -> _Rule:
    return _Rule(kind, re.compile(pattern, re.IGNORECASE), provider)


_RATE = ErrorKind.RATE_LIMITED
_PAYLOAD = ErrorKind.PAYLOAD_TOO_LARGE
_OUTPUT = ErrorKind.OUTPUT_LIMIT
_OVERFLOW = ErrorKind.CONTEXT_OVERFLOW

_RATE_RULES = (
    _rule(
        _RATE,
        rf"on tokens per min(?:ute)? \(TPM\): Limit {_n('limit')}, Requested {_n('prompt')}",
        "openai",
    ),
    _rule(_RATE, r"too many tokens,? please wait", "bedrock"),
    _rule(_RATE, r"\brate[ _-]?limit"),
    _rule(_RATE, r"\b(?:tokens|requests) per (?:sec|second|min|minute|hour|day)\b"),
    _rule(_RATE, r"\((?:[IO]?TPM|RPM|TPD|RPD)\)"),
    _rule(_RATE, r"too many requests"),
    _rule(_RATE, r"please wait before trying again"),
    _rule(_RATE, r"throttl"),
    _rule(_RATE, r"resource (?:has been )?exhausted"),
)

_PAYLOAD_RULES = (
    _rule(_PAYLOAD, r"request exceeds the maximum (?:allowed )?size", "anthropic"),
    _rule(_PAYLOAD, r"request payload size exceeds", "gemini"),
    _rule(_PAYLOAD, r"string too long\. Expected a string with maximum length", "openai"),
    _rule(_PAYLOAD, r"payload too large|request entity too large|content too large"),
)

_OUTPUT_RULES = (
    _rule(
        _OUTPUT,
        rf"max_tokens:\s*{_n('output')}\s*>\s*{_n('limit')},? which is the maximum allowed number of output"
        r" tokens",
        "anthropic",
    ),
    _rule(
        _OUTPUT,
        rf"max_(?:completion_)?tokens is too large:\s*{_n('output')}\.?\s*"
        rf"This model supports at most {_n('limit')} completion tokens",
        "openai",
    ),
    _rule(
        _OUTPUT,
        rf"maxOutputTokens value of {_n('output')} but the supported range is from \d+ \(inclusive\)"
        rf" to {_n('limit_excl')} \(exclusive\)",
        "gemini",
    ),
    _rule(_OUTPUT, rf"maximum tokens you requested exceeds? the model limit of {_n('limit')}", "bedrock"),
    _rule(_OUTPUT, rf"`?max_tokens`? must be less than or equal to `?{_n('limit')}`?", "groq"),
)

_OVERFLOW_RULES = (
    # Specific wordings first: they carry the numbers and name the provider.
    _rule(
        _OVERFLOW,
        rf"input length and `?max_tokens`? exceed context limit"
        rf"(?::\s*{_n('prompt')}\s*\+\s*{_n('output')}\s*>\s*{_n('limit')})?",
        "anthropic",
    ),
    _rule(_OVERFLOW, rf"prompt is too long:\s*{_n('prompt')} tokens?\s*>\s*{_n('limit')}", "anthropic"),
    _rule(
        _OVERFLOW,
        rf"is too large:\s*{_n('output')}\.\s*This model{_APOS}s? maximum context length is {_n('limit')}"
        rf" tokens and your request has {_n('prompt')} input tokens",
        "vllm",
    ),
    _rule(
        _OVERFLOW,
        rf"maximum context length is {_n('limit')} tokens[.,]?\s*However,? you requested {_n('output')}"
        rf" output tokens and your prompt contains (?:at least )?{_n('prompt')} input tokens",
        "vllm",
    ),
    _rule(
        _OVERFLOW,
        rf"this endpoint{_APOS}s? maximum context length is {_n('limit')} tokens?[.,]?\s*However,?"
        rf" you requested (?:about )?{_n('total')} tokens?(?:\s*\((?P<parts>[^)]*)\))?",
        "openrouter",
    ),
    _rule(
        _OVERFLOW,
        rf"maximum context length is {_n('limit')} tokens?[.,]?\s*However,?"
        r" (?:your messages resulted in|you requested|your request has|your prompt contains)"
        rf"(?: about| at least)? {_n('total')}(?: input)? tokens?(?:\s*\((?P<parts>[^)]*)\))?",
    ),
    _rule(
        _OVERFLOW,
        rf"input token count(?: \({_n('prompt')}\))? exceeds the maximum number of tokens allowed"
        rf"(?: \({_n('limit')}\))?",
        "gemini",
    ),
    _rule(
        _OVERFLOW,
        rf"input token count is {_n('prompt')} but (?:the )?model only supports up to {_n('limit')}",
        "gemini",
    ),
    _rule(
        _OVERFLOW,
        rf"prompt contains {_n('prompt')} tokens(?: and \d+ [a-z ]+?)?,? too large for model with"
        rf" {_n('limit')} maximum context length",
        "mistral",
    ),
    _rule(
        _OVERFLOW,
        rf"maximum prompt length is {_n('limit')} but the request contains {_n('prompt')} tokens",
        "xai",
    ),
    _rule(
        _OVERFLOW,
        rf"input \({_n('prompt')} tokens\) is longer than the model{_APOS}s? context length"
        rf" \({_n('limit')} tokens\)",
        "together",
    ),
    _rule(_OVERFLOW, rf"current length is {_n('prompt')} while limit is {_n('limit')}", "cerebras"),
    _rule(
        _OVERFLOW,
        rf"request \({_n('prompt')} tokens\) exceeds the available context size \({_n('limit')} tokens\)",
        "llama.cpp",
    ),
    _rule(_OVERFLOW, r"exceeds the available context size", "llama.cpp"),
    _rule(_OVERFLOW, r"context size has been exceeded", "llama.cpp"),
    _rule(
        _OVERFLOW,
        rf"requested tokens(?: \({_n('prompt')}\))? exceed context window of {_n('limit')}",
        "llama-cpp-python",
    ),
    _rule(_OVERFLOW, r"prompt too long; exceeded (?:max )?context length", "ollama"),
    _rule(_OVERFLOW, r"input length exceeds the context length", "ollama"),
    _rule(
        _OVERFLOW, r"tokens to keep from the initial prompt is greater than the context length", "lmstudio"
    ),
    _rule(_OVERFLOW, r"your input exceeds the context window of this model", "openai"),
    _rule(_OVERFLOW, r"input is too long for requested model", "bedrock"),
    _rule(_OVERFLOW, r"too many input tokens", "bedrock"),
    _rule(_OVERFLOW, r"too many total text bytes", "bedrock"),
    # vLLM, when a client computed max_tokens = window - prompt and got below 1. Zero or a
    # positive number is a plain client mistake, not an overflow.
    _rule(_OVERFLOW, r"max_tokens must be at least 1, got -\d+", "vllm"),
    # Generic wordings, used by several providers; still never a guess.
    _rule(_OVERFLOW, r"please reduce the length of the messages or completion"),
    _rule(_OVERFLOW, r"\bprompt (?:is )?too long\b"),
    _rule(_OVERFLOW, r"context[ _-](?:length|window)[ _-]exceeded"),
    _rule(_OVERFLOW, r"maximum context length"),
    _rule(
        _OVERFLOW,
        rf"exceeds? (?:the |this )?(?:model{_APOS}s? )?(?:maximum )?context (?:length|window|size|limit)",
    ),
)

_LLAMA_CPP_OVERFLOW_RULES = tuple(rule for rule in _OVERFLOW_RULES if rule.provider == "llama.cpp")

# Codes and types, compared lowercased.
_RATE_CODES = frozenset(
    {
        "rate_limit_exceeded",
        "rate_limit_error",
        "throttlingexception",
        "toomanyrequestsexception",
        "resource_exhausted",
        "too_many_requests",
    }
)
_PAYLOAD_CODES = frozenset(
    {
        "request_too_large",
        "payload_too_large",
        "request_entity_too_large",
        "content_too_large",
        "string_above_max_length",
    }
)
_OVERFLOW_CODES = frozenset(
    {"context_length_exceeded", "exceed_context_size_error", "model_context_window_exceeded"}
)
_KNOWN_CODES = _RATE_CODES | _PAYLOAD_CODES | _OVERFLOW_CODES

_AZURE_PREFIX = re.compile(r"^\((?P<code>[A-Za-z][\w.]*)\)\s+")
_BEDROCK_PREFIX = re.compile(r"the model returned the following errors:", re.IGNORECASE)
_PARTS = re.compile(rf"({_N})\s+(?:in|of)\s+(?:the\s+)?([a-z][a-z ]*)", re.IGNORECASE)

# --------------------------------------------------------------------------- reading the error

# Keys whose string value is a human message; keys that hold more of the error.
# Nothing else is read: a 422 that echoes the request ("input": ...) must not
# turn the user's own words into an overflow.
_MESSAGE_KEYS = frozenset({"message", "msg", "detail", "error", "raw", "errormessage", "error_message"})
_CONTAINER_KEYS = frozenset({"errors", "metadata", "response"})
_CODE_KEYS = frozenset({"code", "type", "status", "__type", "error_code", "errortype"})
_MAX_DEPTH = 8

# Exceptions that mean "no answer came back": never an overflow, whatever their text says.
_TRANSPORT_ERRORS = frozenset(
    {
        "APIConnectionError",
        "APITimeoutError",
        "ConnectionError",  # requests' own, which is not the builtin one
        "Timeout",
        "TransportError",
        "TimeoutException",
        "NetworkError",
        "ConnectError",
        "ConnectTimeout",
        "ReadTimeout",
        "WriteTimeout",
        "PoolTimeout",
        "ReadError",
        "WriteError",
        "RemoteProtocolError",
        "HTTPClientError",
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ReadTimeoutError",
        "ConnectionClosedError",
    }
)

# The provider an SDK's exception implies. Those in _STRONG_SDKS talk to one
# provider only; the OpenAI and Anthropic SDKs are pointed at many compatible
# servers, so the message's wording outranks them.
_SDK_PROVIDERS = {
    "anthropic": "anthropic",
    "openai": "openai",
    "google.genai": "gemini",
    "botocore": "bedrock",
    "boto3": "bedrock",
    "mistralai": "mistral",
    "groq": "groq",
    "cerebras": "cerebras",
    "together": "together",
    "ollama": "ollama",
    "azure": "azure",
    "llama_cpp": "llama-cpp-python",
}
_STRONG_SDKS = frozenset({"gemini", "bedrock", "mistral", "groq", "cerebras", "together", "ollama", "azure"})


@dataclass(slots=True)
class _Evidence:
    """Everything read from one error, before any decision."""

    status: int | None = None
    body_status: int | None = None
    messages: list[str] = field(default_factory=list)
    codes: list[str] = field(default_factory=list)
    prompt_field: int | None = None
    limit_field: int | None = None
    shape: str | None = None  # a provider the wire shape proves
    weak_shape: str | None = None  # a provider the wire shape suggests
    sdk: str | None = None
    transport: bool = False
    fallback: str = ""

    @property
    def text(self) -> str:
        return "\n".join(self.messages) if self.messages else self.fallback


def classify(error: object) -> Classified:
    """Classify a failed provider call for the recovery loop.

    ``error`` may be an SDK exception (anthropic, openai, google-genai,
    botocore ``ClientError`` / ``EventStreamError``, or anything with
    ``status_code`` and ``body`` / ``message``), a
    :class:`~toolbudget.errors.UpstreamError`, an HTTP response object
    (``httpx.Response`` and look-alikes), a ``(status, body)`` pair whose body
    is a dict, str or bytes, or a bare body or typed SDK event (a streamed
    ``error`` event).
    Classification never raises: it runs inside an error handler, where a
    second exception would hide the first.

    An exception that wraps another on purpose (``raise X from err``) is
    classified by its cause when it says nothing itself.
    """
    current: object = error
    result = _classify_one(current)
    for _ in range(4):
        if result.kind is not ErrorKind.OTHER or not isinstance(current, BaseException):
            break
        cause = current.__cause__
        if cause is None:
            break
        inner = _classify_one(cause)
        if inner.kind is not ErrorKind.OTHER:
            return inner
        current = cause
    return result


def _classify_one(error: object) -> Classified:
    try:
        ev = _gather(error)
    except Exception:
        # Reading a foreign object can fail in ways no duck typing foresees (a
        # property that raises, a __str__ that raises). The caller is already
        # handling an error; answering OTHER beats replacing it with ours.
        ev = _Evidence(fallback=f"unreadable {type(error).__name__}")
    return _decide(ev)


def _gather(error: object) -> _Evidence:
    ev = _Evidence()
    if isinstance(error, BaseException):
        ev.sdk = _sdk_provider(type(error))
        if _is_transport_failure(error):
            ev.transport = True
            ev.fallback = str(error) or type(error).__name__
            return ev
        if isinstance(error, UpstreamError):
            _read_upstream(error, ev)
        else:
            _read_exception(error, ev)
    elif isinstance(error, tuple) and len(error) == 2 and (error[0] is None or _status(error[0])):
        ev.status = _status(error[0])
        _read_body(error[1], ev, 0)
    elif _looks_like_response(error):
        _read_response(error, ev)
    else:
        _read_body(_plain(error), ev, 0)
    if ev.status is None:
        ev.status = ev.body_status
    return ev


def _plain(value: object) -> object:
    """A typed SDK event (a pydantic model, e.g. a streamed Responses ``error`` event) as its dict."""
    if isinstance(value, (Mapping, str, bytes, bytearray, memoryview, list, tuple)):
        return value
    dump = _attr(value, "model_dump")
    if callable(dump):
        try:
            return dump()
        except Exception:
            return None
    return value


def _sdk_provider(cls: type) -> str | None:
    module = getattr(cls, "__module__", "") or ""
    for prefix, provider in _SDK_PROVIDERS.items():
        if module == prefix or module.startswith(prefix + "."):
            return provider
    return None


def _is_transport_failure(error: BaseException) -> bool:
    if isinstance(error, (TimeoutError, ConnectionError)):
        return True
    return any(cls.__name__ in _TRANSPORT_ERRORS for cls in type(error).__mro__)


def _status(value: object) -> int | None:
    """``value`` if it is an HTTP status code, else ``None``."""
    if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
        return value
    return None


def _attr(obj: object, name: str) -> object:
    """``getattr`` that cannot raise: a property may fail (an unread stream's ``content``)."""
    try:
        return getattr(obj, name, None)
    except Exception:
        return None


def _looks_like_response(value: object) -> bool:
    """An HTTP response object (httpx, httpx2, requests): a status and a body, not an exception.

    The body attributes are looked up on the class, because reading them on an
    unread streamed response raises.
    """
    return (
        not isinstance(value, BaseException)
        and _status(_attr(value, "status_code")) is not None
        and (hasattr(type(value), "content") or hasattr(type(value), "text"))
    )


def _read_exception(error: BaseException, ev: _Evidence) -> None:
    response = _attr(error, "response")
    if isinstance(response, Mapping) and isinstance(response.get("Error"), Mapping):
        _read_botocore(response, ev)
        return

    for name in ("status_code", "http_status", "code", "status"):
        ev.status = _status(_attr(error, name))
        if ev.status is not None:
            break
    for name in ("code", "type", "status", "error_code"):
        value = _attr(error, name)
        if isinstance(value, str) and value:
            _add_code(ev, value)

    _read_body(_attr(error, "body"), ev, 0)
    details = _attr(error, "details")  # google-genai keeps the response JSON here
    if isinstance(details, (Mapping, list)):
        _read_body(details, ev, 0)
    if not ev.messages and _looks_like_response(response):
        _read_response(response, ev)
    if not ev.messages:
        message = _attr(error, "message")
        if isinstance(message, str) and message.strip():
            _add_message(ev, message, 0)
    if not ev.messages:
        ev.fallback = str(error)


def _read_botocore(response: Mapping[object, object], ev: _Evidence) -> None:
    """botocore's ``ClientError.response``: ``Error.Code``/``Message`` and the HTTP status."""
    error = response.get("Error")
    if isinstance(error, Mapping):
        code = error.get("Code")
        if isinstance(code, str) and code:
            _add_code(ev, code)
        message = error.get("Message")
        if isinstance(message, str) and message:
            _add_message(ev, message, 0)
    metadata = response.get("ResponseMetadata")
    if isinstance(metadata, Mapping):
        ev.status = _status(metadata.get("HTTPStatusCode"))
    ev.shape = ev.shape or "bedrock"


def _read_upstream(error: UpstreamError, ev: _Evidence) -> None:
    """An HTTP error a proxy passes on: read as the response it was."""
    ev.status = error.status
    _read_error_type(error.header("x-amzn-errortype"), ev)
    _read_body(error.body, ev, 0)
    if not ev.messages:
        ev.fallback = str(error)


def _read_error_type(amzn: object, ev: _Evidence) -> None:
    # Bedrock's raw HTTP answers name the exception in a header, not in the body.
    if isinstance(amzn, str) and amzn:
        _add_code(ev, amzn.split(":", 1)[0])
        ev.shape = ev.shape or "bedrock"


def _read_response(response: object, ev: _Evidence) -> None:
    ev.status = _status(_attr(response, "status_code"))
    get = _attr(_attr(response, "headers"), "get")
    if callable(get):
        _read_error_type(get("x-amzn-errortype"), ev)
    content = _attr(response, "content")
    if content is None:  # an unread stream: read it, or give up on the body
        read = _attr(response, "read")
        try:
            content = read() if callable(read) else None
        except Exception:
            content = None
    if content is None:
        content = _attr(response, "text")
    _read_body(content, ev, 0)


def _read_body(body: object, ev: _Evidence, depth: int) -> None:
    if body is None or depth > _MAX_DEPTH:
        return
    if isinstance(body, (bytes, bytearray, memoryview)):
        body = bytes(body).decode("utf-8", errors="replace")
    if isinstance(body, str):
        _add_message(ev, body, depth)
    elif isinstance(body, Mapping):
        _read_mapping(body, ev, depth)
    elif isinstance(body, (list, tuple)):
        for item in body[:8]:
            _read_body(item, ev, depth + 1)


def _read_mapping(body: Mapping[object, object], ev: _Evidence, depth: int) -> None:
    if depth == 0 and body.get("type") == "error" and isinstance(body.get("error"), Mapping):
        ev.weak_shape = ev.weak_shape or "anthropic"
    if body.get("object") == "error":
        ev.weak_shape = ev.weak_shape or "vllm"
    if "param" in body and "message" in body:
        ev.weak_shape = ev.weak_shape or "openai"
    for key, value in body.items():
        name = str(key).lower()
        if name in _MESSAGE_KEYS:
            _read_body(value, ev, depth + 1)
        elif name in _CONTAINER_KEYS:
            _read_body(value, ev, depth + 1)
        elif name in _CODE_KEYS:
            if isinstance(value, str) and value and value != "error":
                _add_code(ev, value)
                if name == "status" and re.fullmatch(r"[A-Z][A-Z_]+", value):
                    ev.weak_shape = ev.weak_shape or "gemini"
            elif ev.body_status is None:
                ev.body_status = _status(value)
        elif name == "n_prompt_tokens" and isinstance(value, int):
            ev.prompt_field = value
        elif name == "n_ctx" and isinstance(value, int):
            ev.limit_field = value
            ev.shape = "llama.cpp"


def _add_message(ev: _Evidence, text: str, depth: int) -> None:
    text = text.strip()
    if not text:
        return
    if text[0] in "{[":
        # JSON inside a string: a proxy passing the upstream body on as text.
        try:
            parsed = json.loads(text)
        except ValueError:
            pass
        else:
            if isinstance(parsed, (Mapping, list)):
                _read_body(parsed, ev, depth + 1)
                return
    if text in ev.messages:
        return
    ev.messages.append(text)
    azure = _AZURE_PREFIX.match(text)
    if azure:
        _add_code(ev, azure["code"])
        ev.shape = ev.shape or "azure"
    if _BEDROCK_PREFIX.search(text):
        ev.shape = ev.shape or "bedrock"


def _add_code(ev: _Evidence, code: str) -> None:
    if code not in ev.codes:
        ev.codes.append(code)
    lowered = code.lower()
    if lowered == "exceed_context_size_error":
        ev.shape = "llama.cpp"
    elif lowered.endswith("exception"):
        ev.weak_shape = ev.weak_shape or "bedrock"


# --------------------------------------------------------------------------- deciding


@dataclass(frozen=True, slots=True)
class _Numbers:
    prompt: int | None = None
    limit: int | None = None
    output: int | None = None


def _decide(ev: _Evidence) -> Classified:
    text = ev.text
    codes = {code.lower() for code in ev.codes}

    if ev.transport:
        return _result(ev, ErrorKind.OTHER, _Numbers(), None)

    if ev.status is not None and ev.status >= 500:
        # Upstream failures are not about the prompt, except llama.cpp's overflow
        # (a 500 in the builds that introduced exceed_context_size_error).
        found = _first(_LLAMA_CPP_OVERFLOW_RULES, text)
        if found is not None:
            return _result(ev, _OVERFLOW, _numbers(found[1], ev), found[0].provider)
        if "exceed_context_size_error" in codes:
            return _result(ev, _OVERFLOW, _numbers(None, ev), "llama.cpp")
        return _result(ev, ErrorKind.OTHER, _Numbers(), None)

    found = _first(_RATE_RULES, text)
    if ev.status == 429 or codes & _RATE_CODES or found is not None:
        numbers = _numbers(found[1], ev) if found else _Numbers()
        return _result(ev, _RATE, numbers, found[0].provider if found else None)

    found = _first(_PAYLOAD_RULES, text)
    if ev.status == 413 or codes & _PAYLOAD_CODES or found is not None:
        return _result(ev, _PAYLOAD, _Numbers(), found[0].provider if found else None)

    for rules in (_OUTPUT_RULES, _OVERFLOW_RULES):
        found = _first(rules, text)
        if found is not None:
            rule, match = found
            return _result(ev, rule.kind, _numbers(match, ev), rule.provider)

    if codes & _OVERFLOW_CODES:
        return _result(ev, _OVERFLOW, _numbers(None, ev), None)
    return _result(ev, ErrorKind.OTHER, _Numbers(), None)


def _first(rules: tuple[_Rule, ...], text: str) -> tuple[_Rule, re.Match[str]] | None:
    if not text:
        return None
    for rule in rules:
        match = rule.pattern.search(text)
        if match is not None:
            return rule, match
    return None


def _int(value: str | None) -> int | None:
    return int(value.replace(",", "")) if value else None


def _numbers(match: re.Match[str] | None, ev: _Evidence) -> _Numbers:
    """The numbers a wording states; llama.cpp's JSON fields win over its text."""
    prompt = limit = output = None
    if match is not None:
        groups = match.groupdict()
        prompt = _int(groups.get("prompt"))
        limit = _int(groups.get("limit"))
        output = _int(groups.get("output"))
        exclusive = _int(groups.get("limit_excl"))
        if exclusive is not None:
            limit = exclusive - 1
        total = _int(groups.get("total"))
        if total is not None:
            prompt, output = _split_total(total, groups.get("parts") or "")
    if ev.prompt_field is not None:
        prompt = ev.prompt_field
    if ev.limit_field is not None:
        limit = ev.limit_field
    return _Numbers(prompt, limit, output)


def _split_total(total: int, parts: str) -> tuple[int, int | None]:
    """Split "N tokens (A in the messages, B in the functions, C in the completion)".

    The input is everything but the completion; without a readable breakdown
    the whole total is taken as input.
    """
    prompt: int | None = None
    output: int | None = None
    for number, name in _PARTS.findall(parts):
        count = int(number.replace(",", ""))
        if "completion" in name.lower() or "output" in name.lower():
            output = (output or 0) + count
        else:
            prompt = (prompt or 0) + count
    if prompt is None:
        prompt = total - (output or 0)
    return prompt, output


def _result(ev: _Evidence, kind: ErrorKind, numbers: _Numbers, rule_provider: str | None) -> Classified:
    return Classified(
        kind=kind,
        prompt_tokens=numbers.prompt,
        limit=numbers.limit,
        status=ev.status,
        message=ev.messages[0] if ev.messages else ev.fallback,
        provider=_provider(ev, rule_provider),
        requested_output=numbers.output,
        code=_main_code(ev.codes),
    )


def _provider(ev: _Evidence, rule_provider: str | None) -> str | None:
    """The most certain guess first: a wire shape that proves it, a one-provider SDK, the
    wording, a wire shape that suggests it, and last the SDK (pointed at many servers)."""
    if ev.shape:
        return ev.shape
    if ev.sdk in _STRONG_SDKS:
        return ev.sdk
    return rule_provider or ev.weak_shape or ev.sdk


def _main_code(codes: list[str]) -> str | None:
    for code in codes:
        if code.lower() in _KNOWN_CODES:
            return code
    return codes[0] if codes else None
