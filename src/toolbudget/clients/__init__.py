"""``toolbudget.wrap(client)``: the provider's own SDK client, with every history managed.

The wrapped client has the methods, arguments and return types of the one it
wraps; ``isinstance(wrapped, anthropic.Anthropic)`` holds. The calls that send
a conversation are intercepted:

=====================================  =========================================================
``anthropic.Anthropic`` / ``Async``    ``messages.create`` (also ``stream=True``), ``messages.stream``
``openai.OpenAI`` / ``Async`` / Azure  ``chat.completions.create``, ``responses.create`` (also streaming)
=====================================  =========================================================

For each, the keyword arguments are the request body (the SDK's own options,
``extra_headers``, ``extra_query``, ``extra_body``, ``timeout``, pass through
untouched), and the call runs:

1. **manage**: :meth:`Session.manage <toolbudget.Session.manage>` repairs the
   pairing and enforces the budgets on a copy; the caller's list is never
   changed;
2. **send and recover**: :func:`~toolbudget.recovery.call_with_recovery` sends
   it, and when the provider refuses the prompt as too long, sends smaller
   histories (levels 1 to 3). Any other error (rate limits, 5xx, timeouts,
   lost connections, a bad request) is raised unchanged at once, never retried
   by toolbudget (the SDK's own ``max_retries`` still applies). When the ladder
   runs out, the provider's original error is raised, carrying the call's
   :class:`CallReport` as ``toolbudget_report``;
3. **lengthen**: an answer cut off by ``max_tokens`` is asked again with
   ``max_tokens`` doubled, then continued, and the pieces merged into one
   answer of the SDK's own type (:mod:`toolbudget.recovery.output`). A
   truncated tool call is never returned as runnable: if it is still cut when
   nothing is left to try, it is removed and the answer keeps its cut-off stop
   reason. A follow-up that fails ends the follow-ups, and the best answer so
   far is returned (the report says why in ``followup_error``). An answer cut
   by the *context window* is treated as an overflow, so step 2 shrinks the
   history;
4. **report**: a :class:`CallReport` goes to ``on_report`` and onto the answer
   as ``toolbudget_report`` (an attribute outside the model's fields: it does
   not show in ``model_dump`` or ``to_json``).

**Streams** (``stream=True``, ``messages.stream``): the overflow error
arrives when the stream is opened, so recovery is complete before the first
byte reaches the caller. A stream is never escalated or continued: its bytes
were already delivered, and a second answer cannot be spliced into them. The
stream is the SDK's own object; toolbudget watches its events go by, and when
it ends (last event read, an error, or ``close`` before the end) the report
says whether the answer was cut off (``final_cutoff``, and whether a tool call
was cut) and whether its end was read (``stream_finished``); ``on_report`` is
called then, once. ``stream.toolbudget_report`` is set when the stream opens
and replaced at its end.

**Not managed** (passed through to the SDK as they are): ``with_raw_response``
and ``with_streaming_response``, ``beta``, ``messages.parse``,
``messages.count_tokens``, batches, ``chat.completions.parse`` and ``.stream``,
``responses.parse`` and ``.stream``, and everything else. ``with_options`` and
``copy`` return wrapped clients that share the session.

**Sessions**: a wrapped client has one :class:`~toolbudget.Session` (given, or
made on first use with the policy of the working directory, and closed with the
client). A session is one conversation's archive, so wrap one client per
conversation, or pass each conversation's own ``session=``.

**google-genai** is not wrapped: its ``generate_content`` takes ``contents`` in
a dozen Python forms that only its private converters turn into the wire
shape, its tools may be Python callables that have no wire form, and its
automatic function calling grows the history inside the SDK call, out of a
wrapper's reach. Use the toolbudget proxy at the HTTP level for Gemini; the
cut-off handling in :mod:`toolbudget.recovery.output` covers its wire format.

No SDK is imported here: a client is recognised by the module of its class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from ..errors import ToolbudgetError
from ..session import Session
from ._call import Wrapping
from ._proxy import AsyncClientProxy, ClientProxy
from ._report import CallReport

__all__ = ["CallReport", "UnsupportedClient", "wrap"]

C = TypeVar("C")


class UnsupportedClient(ToolbudgetError, TypeError):
    """``wrap`` was given an object that is not a client toolbudget knows how to manage."""


def _family(client: Any) -> str:
    module = type(client).__module__ or ""
    top = module.split(".", 1)[0]
    if module.startswith("google.genai"):
        raise UnsupportedClient(
            "google-genai clients are not wrapped: their contents, Python-callable tools and automatic "
            "function calling have no wire form a wrapper can manage; use the toolbudget proxy for Gemini"
        )
    if top in ("anthropic", "openai"):
        return top
    raise UnsupportedClient(
        f"cannot wrap a {type(client).__module__}.{type(client).__qualname__}: "
        "wrap an anthropic.Anthropic, anthropic.AsyncAnthropic, openai.OpenAI or openai.AsyncOpenAI client"
    )


def _is_async(client: Any) -> bool:
    return any(cls.__name__.startswith("Async") for cls in type(client).__mro__)


def wrap(
    client: C,
    *,
    session: Session | None = None,
    on_report: Callable[[CallReport], None] | None = None,
) -> C:
    """``client``, with each conversation it sends managed, recovered from overflow, and whole.

    ``session`` is the conversation's session (one is made on first use when
    left out); ``on_report`` hears each call's :class:`CallReport`.
    """
    inner: Any = client
    if isinstance(inner, (ClientProxy, AsyncClientProxy)):  # again: new settings, the same SDK client
        inner = object.__getattribute__(inner, "_inner")
    family = _family(inner)
    wrapping = Wrapping(session, on_report)
    proxy: ClientProxy | AsyncClientProxy
    if family == "anthropic":
        from ._anthropic import AnthropicClient, AsyncAnthropicClient

        proxy = (AsyncAnthropicClient if _is_async(inner) else AnthropicClient)(inner, wrapping)
    else:
        from ._openai import AsyncOpenAIClient, OpenAIClient

        proxy = (AsyncOpenAIClient if _is_async(inner) else OpenAIClient)(inner, wrapping)
    return cast(C, proxy)
