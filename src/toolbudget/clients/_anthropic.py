"""``anthropic.Anthropic`` and ``anthropic.AsyncAnthropic``: what each method of ``messages`` is.

``messages`` and ``beta.messages`` (and their ``with_raw_response`` and
``with_streaming_response`` views, on the resource or on the client) are
managed: ``create``, ``stream``, ``parse`` and ``count_tokens``. Refused, since
they send requests toolbudget cannot manage: ``batches.create`` (many
conversations in one upload), ``beta.messages.tool_runner`` (its own loop of
requests on the unwrapped client) and ``beta.messages.thread`` (a server-held
conversation fed through the unwrapped client).
"""

from __future__ import annotations

import importlib

from ._body import SDK_OPTIONS, CallArgs
from ._client import AsyncClientProxy, ClientProxy
from ._resource import Spec, Tree

__all__ = ["AnthropicClient", "AsyncAnthropicClient"]

API = "anthropic"
OPTIONS = SDK_OPTIONS | {"user_profile_id", "workspace_id"}

# The SDK refuses a non-streaming call it expects to take over ten minutes: more than
# 60 min * max_tokens / 128,000 > 10 min, that is max_tokens over 21,333 (or a lower
# per-model limit), unless the call sets a timeout. Escalation stays under it.
_NONSTREAMING_CAP = 21_333

# The per-model limits as anthropic 2.15 states them, for an SDK whose table cannot be read.
_KNOWN_NONSTREAMING_TOKENS: dict[str, int] = dict.fromkeys(
    (
        "claude-opus-4-20250514",
        "claude-opus-4-0",
        "claude-4-opus-20250514",
        "anthropic.claude-opus-4-20250514-v1:0",
        "claude-opus-4@20250514",
        "anthropic.claude-opus-4-1-20250805-v1:0",
        "claude-opus-4-1@20250805",
    ),
    8_192,
)


def sdk_nonstreaming_tokens() -> dict[str, int]:
    """The per-model ``max_tokens`` over which the installed SDK refuses a non-streaming call.

    The SDK offers no public way to read them: they are its private
    ``anthropic._constants.MODEL_NONSTREAMING_TOKENS``, which its own
    ``messages.create`` checks. Read defensively, since a private name may move
    or change shape in any release: when it is missing or not a table of
    model names to counts, the limits known when this was written are used, so
    escalation never asks for what the SDK would refuse today.
    """
    try:
        table = importlib.import_module("anthropic._constants").MODEL_NONSTREAMING_TOKENS
    except (ImportError, AttributeError):
        return _KNOWN_NONSTREAMING_TOKENS
    if not isinstance(table, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in table.items()
    ):
        return _KNOWN_NONSTREAMING_TOKENS
    return table


def _cap(args: CallArgs) -> int | None:
    if "timeout" in args.options:
        return None
    model = args.body.get("model")
    limit = sdk_nonstreaming_tokens().get(model) if isinstance(model, str) else None
    return min(_NONSTREAMING_CAP, limit) if limit else _NONSTREAMING_CAP


_BATCHES = Spec(
    API,
    "requests",
    "anthropic",
    dict.fromkeys(("retrieve", "list", "delete", "cancel", "results"), "pass"),
    refused={
        "create": "a batch sends many conversations in one upload; manage each request's params first "
        "with client.toolbudget.manage(params, api='anthropic') and batch the managed bodies",
    },
)

_METHODS = {"create": "create", "stream": "stream", "parse": "once", "count_tokens": "once"}

MESSAGES = Spec(API, "messages", "anthropic", _METHODS, subs={"batches": _BATCHES}, options=OPTIONS, cap=_cap)
BETA_MESSAGES = Spec(
    API,
    "messages",
    "anthropic",
    _METHODS,
    refused={
        "tool_runner": "it runs its own loop of requests on the unwrapped client; "
        "call beta.messages.create in your own loop",
        "thread": "a server-held thread sends each turn through the unwrapped client; "
        "send the history with beta.messages.create",
    },
    subs={"batches": _BATCHES},
    options=OPTIONS,
    cap=_cap,
)

TREE: Tree = {"messages": MESSAGES, "beta": {"messages": BETA_MESSAGES}}


class AnthropicClient(ClientProxy):
    """A managed ``anthropic.Anthropic`` (or another sync client of the SDK with ``messages``)."""

    tree = TREE


class AsyncAnthropicClient(AsyncClientProxy):
    """A managed ``anthropic.AsyncAnthropic``."""

    tree = TREE
