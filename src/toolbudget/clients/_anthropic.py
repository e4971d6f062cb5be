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


def _cap(args: CallArgs) -> int | None:
    if "timeout" in args.options:
        return None
    model = args.body.get("model")
    try:
        per_model: dict[str, int] = importlib.import_module("anthropic._constants").MODEL_NONSTREAMING_TOKENS
    except (ImportError, AttributeError):
        per_model = {}
    limit = per_model.get(model) if isinstance(model, str) else None
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
