"""``toolbudget.wrap(client)``: the provider's own SDK client, with every history managed.

The wrapped client has the methods, arguments and return types of the one it
wraps; ``isinstance(wrapped, anthropic.Anthropic)`` holds. Every way the SDK
offers to send a conversation is managed (:mod:`._resource` says how each is):

=====================================  =========================================================
``anthropic.Anthropic`` / ``Async``    ``messages`` and ``beta.messages``: ``create`` (also
                                       ``stream=True``), ``stream``, ``parse``, ``count_tokens``
``openai.OpenAI`` / ``Async`` / Azure  ``chat.completions`` and ``responses`` (also under
                                       ``beta``): ``create``, ``stream``, ``parse``;
                                       ``responses.input_tokens.count``, ``responses.compact``,
                                       ``decisions.create``
``google.genai.Client`` (and ``.aio``)  ``models``: ``generate_content`` (and ``_stream``),
                                       ``count_tokens``, ``compute_tokens``
``boto3.client("bedrock-runtime")``    ``converse``, ``converse_stream``, ``count_tokens``
                                       (:mod:`._bedrock`; its answers are dicts, so the report
                                       reaches only ``on_report``)
=====================================  =========================================================

and so is each of them through ``with_raw_response`` and
``with_streaming_response`` (on the resource or on the client), on the async
client, and on the clients ``with_options``, ``copy`` and ``with_middleware``
return. What cannot be managed raises :class:`~toolbudget.errors.UnsupportedClient`
naming it, instead of sending the history as given: ``messages.batches.create``,
``beta.messages.tool_runner`` and ``.thread``, ``responses.connect``, the
low-level ``client.post`` to a conversation endpoint, and any method of those
resources that this module does not know (a newer SDK's). Methods that send no
conversation (``retrieve``, ``list``, ``delete``, ``models``, ``files``...) are
the SDK's own, and so are the APIs whose history the server keeps
(``conversations``, ``beta.threads``, ``beta.agents``), which send only the
items added.

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

**Raw and parsed answers** (``with_raw_response``, ``with_streaming_response``,
``parse``, token counting) are managed and recovered from overflow, but never
lengthened: the caller reads them in its own way, so a second answer cannot be
merged into them. Their report is on the object returned (the raw response, the
parsed answer) and goes to ``on_report``.

**Arguments** given as ``None``, ``NOT_GIVEN`` or ``omit`` (``tools=None``,
``system=None``) are absent, as the SDKs treat them.

**Sessions**: a wrapped client has one :class:`~toolbudget.Session` (given, or
made on first use with the policy of the working directory), exposed as
``client.toolbudget``. It is closed with the client (``close()``, or leaving
``with wrap(...) as client:``, which never raises for the session). A session
is one conversation's archive, so wrap one client per conversation, or pass
each conversation's own ``session=``.

**Recall**: ``wrap(client, recall=True)`` adds the recall tool's definition
(:func:`toolbudget.recall_tool`) to every request that does not define it, so
the model can ask for what was cut; answer its calls with
``client.toolbudget.handle_recall(call_arguments)``.

**google-genai** (:mod:`._gemini`): ``models.generate_content`` and its
stream and token counts are managed when ``contents`` is a list of turns, the
only form that holds a conversation; ``chats`` and ``live`` keep or send the
history out of a wrapper's reach and are refused, and so is automatic function
calling over Python-callable tools (turn it off and run the tools yourself).

No SDK is imported here: a client is recognised by the module of its class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from ..callreport import CallReport
from ..errors import UnsupportedClient
from ..session import Session
from ._call import Wrapping
from ._client import AsyncClientProxy, ClientProxy
from ._proxy import Proxy
from ._resource import is_async

__all__ = ["CallReport", "UnsupportedClient", "wrap"]

C = TypeVar("C")


def _family(client: Any) -> str:
    module = type(client).__module__ or ""
    top = module.split(".", 1)[0]
    if module.startswith("google.genai") and type(client).__name__ == "Client":
        return "gemini"
    if top in ("anthropic", "openai"):
        return top
    if top == "botocore":
        from ._bedrock import is_bedrock

        if is_bedrock(client):
            return "bedrock"
    raise UnsupportedClient(
        f"cannot wrap a {type(client).__module__}.{type(client).__qualname__}: wrap an anthropic.Anthropic, "
        "openai.OpenAI (or their Async twins), google.genai.Client or boto3.client('bedrock-runtime') client"
    )


def wrap(
    client: C,
    *,
    session: Session | None = None,
    on_report: Callable[[CallReport], None] | None = None,
    recall: bool = False,
) -> C:
    """``client``, with each conversation it sends managed, recovered from overflow, and whole.

    ``session`` is the conversation's session (one is made on first use when
    left out), and is ``client.toolbudget`` on the wrapped client; ``on_report``
    hears each call's :class:`CallReport`; ``recall=True`` adds the recall
    tool's definition to every request that lacks it.
    """
    inner: Any = client
    if isinstance(inner, Proxy):  # again: new settings, the same SDK client
        inner = object.__getattribute__(inner, "_inner")
    family = _family(inner)
    wrapping = Wrapping(session, on_report, recall)
    proxy: ClientProxy | AsyncClientProxy
    if family == "gemini":
        from ._gemini import GeminiClient

        return cast(C, GeminiClient(inner, wrapping))
    if family == "bedrock":
        from ._bedrock import BedrockClient

        return cast(C, BedrockClient(inner, wrapping))
    if family == "anthropic":
        from ._anthropic import AnthropicClient, AsyncAnthropicClient

        proxy = (AsyncAnthropicClient if is_async(inner) else AnthropicClient)(inner, wrapping)
    else:
        from ._openai import AsyncOpenAIClient, OpenAIClient

        proxy = (AsyncOpenAIClient if is_async(inner) else OpenAIClient)(inner, wrapping)
    return cast(C, proxy)
