"""The exception tree: every public error in it, drawn where it derives, and the give-up and upstream errors.

The give-up is checked on the real SDKs' exceptions, raised by a real client
over ``httpx2.MockTransport`` answering each provider's documented overflow,
so the copy is made of exactly what the SDK builds from an HTTP response.
"""

from __future__ import annotations

import copy
import importlib
import json
import pickle
import pkgutil
import re
import traceback
from typing import Any

import anthropic
import httpx2
import openai
import pytest

import toolbudget
import toolbudget.errors as errors_module
import toolbudget.recovery
import toolbudget.recovery.output
from toolbudget import CallReport, Session
from toolbudget.errors import (
    ContextWindowFull,
    InputError,
    RecoveryExhausted,
    ToolbudgetError,
    UpstreamError,
    exhausted,
)
from toolbudget.recovery import ErrorKind, RecoveryReport, classify
from toolbudget.recovery.classify import Classified
from toolbudget.recovery.output import Cutoff

# --------------------------------------------------------------------------- the tree


def drawn_tree() -> dict[str, str | None]:
    """Each class the docstring of ``toolbudget.errors`` draws, with the class drawn above it."""
    doc = errors_module.__doc__ or ""
    block = doc.split("::", 1)[1].split("\n\n", 2)[1]
    parents: dict[str, str | None] = {}
    stack: list[str] = []
    for line in block.splitlines():
        match = re.match(r"^ {4}((?:│   | {4})*)(?:[├└]── )?([A-Z]\w+)", line)
        assert match, f"not a line of the tree: {line!r}"
        depth = len(match.group(1)) // 4 + (1 if "──" in line.split(match.group(2))[0] else 0)
        del stack[depth:]
        parents[match.group(2)] = stack[-1] if stack else None
        stack.append(match.group(2))
    return parents


def public_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class toolbudget or one of its packages offers in its ``__all__`` (warnings aside).

    A module's own ``__all__`` may list what its package uses inside (the
    ladder's "no rung left" signal, which the loop catches); a package's is
    what it offers.
    """
    found: dict[str, type[BaseException]] = {}
    modules = [toolbudget, errors_module]
    for info in pkgutil.walk_packages(toolbudget.__path__, "toolbudget."):
        if info.ispkg:
            modules.append(importlib.import_module(info.name))
    for module in modules:
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name)
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and not issubclass(value, Warning)
            ):
                found[f"{module.__name__}.{name}"] = value
    return found


def test_every_public_exception_is_a_toolbudget_error_drawn_under_its_base() -> None:
    tree = drawn_tree()
    assert tree["ToolbudgetError"] is None
    exceptions = public_exceptions()
    assert {
        "toolbudget.RecoveryExhausted",
        "toolbudget.UpstreamError",
        "toolbudget.ContextWindowFull",
    } <= set(exceptions)
    for where, cls in exceptions.items():
        assert issubclass(cls, ToolbudgetError), f"{where} is not a ToolbudgetError"
        assert cls.__module__ == "toolbudget.errors", f"{where} is defined in {cls.__module__}"
        assert cls.__name__ in tree, f"{where} is not in the drawing"
        if cls is not ToolbudgetError:
            drawn_parent = tree[cls.__name__]
            assert drawn_parent in {base.__name__ for base in cls.__bases__}, (cls, drawn_parent)
    for name in tree:
        assert name in errors_module.__all__, f"{name} is drawn but not exported by toolbudget.errors"
        assert getattr(toolbudget, name) is getattr(errors_module, name)


def test_context_window_full_lives_in_the_tree_and_at_its_old_places() -> None:
    assert toolbudget.recovery.output.ContextWindowFull is ContextWindowFull
    assert toolbudget.recovery.ContextWindowFull is ContextWindowFull
    full = ContextWindowFull(
        {"id": "msg"}, Cutoff("anthropic", "model_context_window_exceeded", output_tokens=7)
    )
    assert isinstance(full, ToolbudgetError)
    assert classify(full).kind is ErrorKind.CONTEXT_OVERFLOW


def test_the_ladders_signal_is_internal() -> None:
    assert "RecoveryFailed" not in toolbudget.recovery.__all__
    assert not hasattr(toolbudget, "RecoveryFailed")


# --------------------------------------------------------------------------- the give-up

ANTHROPIC_OVERFLOW = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "prompt is too long: 219898 tokens > 200000 maximum",
    },
}
CHAT_OVERFLOW = {
    "error": {
        "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in "
        "202868 tokens (202767 in the messages, 101 in the functions). Please reduce the length of the "
        "messages or functions.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}


def call_report(recovery: RecoveryReport) -> CallReport:
    """A call's report, as the flow makes one when it gives up."""
    with Session("errors", store="memory:") as session:
        body = {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}
        managed = session.manage(body, "anthropic")
    return CallReport("anthropic", managed.report, recovery)


REPORT = call_report(RecoveryReport(recovered=False))


def refusing(body: dict[str, Any]) -> httpx2.Client:
    return httpx2.Client(transport=httpx2.MockTransport(lambda _request: httpx2.Response(400, json=body)))


def anthropic_error() -> anthropic.BadRequestError:
    client = anthropic.Anthropic(
        api_key="k", base_url="http://upstream", http_client=refusing(ANTHROPIC_OVERFLOW), max_retries=0
    )
    try:
        client.messages.create(
            model="claude-sonnet-4-6", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    except anthropic.BadRequestError as error:
        return error
    raise AssertionError("the refusal was not raised")


def openai_error() -> openai.BadRequestError:
    client = openai.OpenAI(
        api_key="k", base_url="http://upstream/v1", http_client=refusing(CHAT_OVERFLOW), max_retries=0
    )
    try:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    except openai.BadRequestError as error:
        return error
    raise AssertionError("the refusal was not raised")


@pytest.mark.parametrize("make", [anthropic_error, openai_error], ids=["anthropic", "openai"])
def test_the_give_up_is_the_sdks_error_and_ours(make: Any) -> None:
    error = make()
    original: Any = error  # the SDK's attributes, read without narrowing
    sdk_class = type(error)
    before = dict(vars(error))
    made = exhausted(error, REPORT, "the attempts ran out")
    assert made.__traceback__ is error.__traceback__ is not None  # where the SDK raised it

    with pytest.raises(sdk_class) as caught:  # code that catches the SDK's own class still does
        raise made
    assert caught.value is made
    assert isinstance(made, RecoveryExhausted) and isinstance(made, ToolbudgetError)
    assert type(made).__name__ == f"RecoveryExhausted[{sdk_class.__name__}]"
    assert made.error is error and made.report is REPORT and made.reason == "the attempts ran out"
    assert made.toolbudget_report is REPORT  # the name callers read before
    # What the SDK built from the response is all there.
    sdk_view: Any = made
    assert sdk_view.status_code == original.status_code == 400
    assert sdk_view.body == original.body and sdk_view.response is original.response
    assert sdk_view.request is original.request
    assert sdk_view.message == original.message and str(made) == str(error) and made.args == error.args
    assert (
        caught.value.__traceback__ is not None and caught.value.__traceback__.tb_next is error.__traceback__
    )
    assert classify(made) == classify(error)
    assert classify(made).kind is ErrorKind.CONTEXT_OVERFLOW
    assert "toolbudget: recovery gave up: the attempts ran out" in "".join(traceback.format_exception(made))
    # The provider's error itself is left as it was.
    assert type(error) is sdk_class and vars(error) == before
    assert not hasattr(error, "toolbudget_report") and not getattr(error, "__notes__", None)
    # One class per provider class.
    assert type(exhausted(make(), REPORT)) is type(made)


def test_a_give_up_seen_again_keeps_its_class() -> None:
    first = exhausted(anthropic_error(), REPORT)
    later = call_report(RecoveryReport(recovered=False, remembered=True))
    again = exhausted(first, later)
    assert type(again) is type(first) and again.error is first and again.report is later
    assert isinstance(again, anthropic.BadRequestError)


def test_the_give_up_copies_slots_and_keeps_the_cause_and_context() -> None:
    class Slotted(Exception):
        __slots__ = ("__secret", "detail", "unset")

        def __init__(self, detail: str) -> None:
            super().__init__(f"slotted: {detail}")
            self.detail = detail
            self.__secret = detail.upper()

        def secret(self) -> str:
            return self.__secret

    cause, context = ValueError("cause"), KeyError("context")
    error = Slotted("d")
    error.__cause__, error.__context__ = cause, context
    made = exhausted(error, REPORT)
    assert isinstance(made, Slotted) and isinstance(made, RecoveryExhausted)
    assert made.detail == "d" and made.secret() == "D" and not hasattr(made, "unset")
    assert made.__cause__ is cause and made.__context__ is context and made.__suppress_context__
    assert str(made) == "slotted: d" and made.error is error


class Sealed(Exception):
    """A class that refuses subclasses, as final classes do."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        raise TypeError("Sealed cannot be subclassed")


class Picky(Exception):
    """A class whose ``__new__`` wants arguments its ``args`` do not hold."""

    def __new__(cls, *args: Any, token: str) -> Picky:
        return super().__new__(cls, *args)

    def __init__(self, *args: Any, token: str) -> None:
        super().__init__(*args)
        self.token = token


@pytest.mark.parametrize(
    "error",
    [Sealed("sealed"), Picky("picky", token="t"), OSError(2, "No such file"), StopIteration(5)],
    ids=["final", "new-refuses", "oserror-fields", "c-fields"],
)
def test_the_give_up_falls_back_to_a_plain_one_raised_from_the_error(error: Exception) -> None:
    made = exhausted(error, REPORT, "nothing smaller fits")
    assert type(made) is RecoveryExhausted
    assert not isinstance(made, type(error))
    assert made.__cause__ is error and made.error is error and made.report is REPORT
    assert made.toolbudget_report is REPORT
    assert str(made) == (
        f"recovery from the context overflow gave up (nothing smaller fits): {type(error).__name__}: {error}"
    )
    assert "toolbudget_report" not in vars(error)


def test_the_plain_give_up_is_classified_by_its_cause() -> None:
    error = UpstreamError(400, (), json.dumps(ANTHROPIC_OVERFLOW).encode())
    plain = exhausted(Sealed("x"), REPORT)
    plain.__cause__ = error
    assert classify(plain).kind is ErrorKind.CONTEXT_OVERFLOW


class Plain(Exception):
    pass


@pytest.mark.parametrize("error", [Plain("plain"), Sealed("sealed")], ids=["subclassed", "fallback"])
def test_a_give_up_can_be_copied_and_pickled(error: Exception) -> None:
    made = exhausted(error, REPORT, "why")
    made.toolbudget_report = "a call report"
    duplicate = copy.copy(made)
    assert type(duplicate) is type(made) and duplicate.error is error and duplicate.report is REPORT
    assert duplicate.toolbudget_report == "a call report" and str(duplicate) == str(made)
    again = pickle.loads(pickle.dumps(made))
    assert type(again) is type(made) and type(again.error) is type(error) and again.report == REPORT
    assert again.reason == "why" and str(again) == str(made)


# --------------------------------------------------------------------------- upstream errors

# providers.md 4.1, each in its provider's envelope: (status, headers, body, prompt tokens, limit).
UPSTREAM = {
    "anthropic": (400, (), ANTHROPIC_OVERFLOW, 219898, 200000),
    "anthropic-max": (
        400,
        (),
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "input length and `max_tokens` exceed context limit: 199759 + 8192 > 200000, "
                "decrease input length or `max_tokens` and try again",
            },
        },
        199759,
        200000,
    ),
    "openai-chat": (400, (), CHAT_OVERFLOW, 202868, 128000),
    "openai-responses": (
        400,
        (),
        {
            "error": {
                "message": "Your input exceeds the context window of this model. "
                "Please adjust your input and try again.",
                "type": "invalid_request_error",
                "param": "input",
                "code": "context_length_exceeded",
            }
        },
        None,
        None,
    ),
    "gemini": (
        400,
        (),
        {
            "error": {
                "code": 400,
                "message": "The input token count (1200293) exceeds the maximum number of tokens allowed "
                "(1048576).",
                "errors": [{"message": "...", "domain": "global", "reason": "badRequest"}],
                "status": "INVALID_ARGUMENT",
            }
        },
        1200293,
        1048576,
    ),
    "bedrock": (
        400,
        (("x-amzn-errortype", "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"),),
        {
            "message": "The model returned the following errors: prompt is too long: 200049 tokens > 200000 "
            "maximum"
        },
        200049,
        200000,
    ),
    "llama.cpp": (
        400,
        (),
        {
            "error": {
                "code": 400,
                "message": "request (4390 tokens) exceeds the available context size (4096 tokens), try "
                "increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 4390,
                "n_ctx": 4096,
            }
        },
        4390,
        4096,
    ),
}


@pytest.mark.parametrize("name", UPSTREAM)
def test_an_upstream_error_is_classified_like_the_response_it_was(name: str) -> None:
    status, headers, body, prompt, limit = UPSTREAM[name]
    raw = json.dumps(body).encode()
    error = UpstreamError(status, headers, raw)
    response = httpx2.Response(status, headers=list(headers), content=raw)
    got = classify(error)
    assert got.kind is ErrorKind.CONTEXT_OVERFLOW
    assert (got.status, got.prompt_tokens, got.limit) == (status, prompt, limit)
    assert got == classify(response)  # the same reading as the HTTP response itself
    assert isinstance(error, ToolbudgetError)


def test_bedrocks_error_type_header_is_read() -> None:
    throttled = UpstreamError(
        400,
        {
            "x-amzn-errortype": "ThrottlingException:http://internal.amazon.com/coral/com.amazon.coral.availability/"
        },
        b'{"message":"Too many tokens, please wait before trying again."}',
    )
    got: Classified = classify(throttled)
    assert got.kind is ErrorKind.RATE_LIMITED
    assert got.code == "ThrottlingException" and got.provider == "bedrock"


def test_an_upstream_error_keeps_status_headers_and_body_exactly() -> None:
    raw = b'{"error": {"message": "caf\xc3\xa9",   "code": 1}}\n'
    pairs = [("Set-Cookie", "a=1"), ("content-type", "application/json"), ("set-cookie", "b=2")]
    assert UpstreamError(429, pairs, raw).headers == tuple(pairs)
    headers = httpx2.Response(429, headers=pairs, content=raw).headers
    error = UpstreamError(429, headers, raw)
    assert error.status == 429 and error.body == raw and isinstance(error.body, bytes)
    assert error.headers == (*pairs, ("Content-Length", str(len(raw))))  # as the response holds them
    assert error.header("SET-COOKIE") == "a=1" and error.header("x-missing") is None
    assert str(error) == 'the upstream answered HTTP 429: {"error": {"message": "café", "code": 1}}'
    assert UpstreamError(502, {}, bytearray(b"")).body == b"" and str(UpstreamError(502)) == (
        "the upstream answered HTTP 502"
    )
    long = UpstreamError(500, (), b"x" * 5000)
    assert len(str(long)) < 400 and long.body == b"x" * 5000


@pytest.mark.parametrize(
    ("status", "headers", "body"),
    [
        (99, (), b""),
        (True, (), b""),
        ("400", (), b""),
        (400, (), "text"),
        (400, [("a", 1)], b""),
        (400, ["ab"], b""),
    ],
)
def test_a_malformed_upstream_error_is_an_input_error(status: Any, headers: Any, body: Any) -> None:
    with pytest.raises(InputError):
        UpstreamError(status, headers, body)


@pytest.mark.parametrize("kind", [{"a": 1}, [1], None, 3])
def test_an_anthropic_block_type_that_is_not_a_string_is_a_shape_error(kind: object) -> None:
    from toolbudget import wire
    from toolbudget.errors import ShapeError

    body = {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": [{"type": kind}]}]}
    with pytest.raises(ShapeError, match=r"messages\.0\.content\.0\.type: unknown content block type"):
        wire.parse(body, "anthropic")
