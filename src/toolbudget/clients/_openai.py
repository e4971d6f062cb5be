"""``openai.OpenAI`` and ``openai.AsyncOpenAI``: what each method of ``chat.completions``, ``responses`` is.

Managed, on ``chat.completions`` and ``responses`` alike (and on ``beta.chat``,
``beta.responses`` and the ``with_raw_response`` and
``with_streaming_response`` views): ``create``, ``stream``, ``parse``; also
``responses.input_tokens.count`` and ``responses.compact``, which send the
input too, and ``decisions.create``, whose input is Responses items. Refused:
``responses.connect``, a WebSocket whose events carry the input past any
wrapper. Methods that send no conversation (``retrieve``, ``list``,
``delete``, ``cancel``, ``input_items``...) are the SDK's own, and so are the
APIs whose history the server holds (``conversations``, ``beta.threads``,
``beta.agents``): toolbudget manages what a request sends, and those send only
the items added, each on its own, with nothing to pair or budget against.
"""

from __future__ import annotations

from ._client import AsyncClientProxy, ClientProxy
from ._resource import Spec, Tree

__all__ = ["AsyncOpenAIClient", "OpenAIClient"]

CHAT = "openai-chat"
RESPONSES = "openai-responses"

COMPLETIONS = Spec(
    CHAT,
    "messages",
    "openai",
    {
        "create": "create",
        "stream": "stream",
        "parse": "once",
        **dict.fromkeys(("retrieve", "update", "list", "delete", "messages"), "pass"),
    },
)

_INPUT_TOKENS = Spec(RESPONSES, "input", "openai", {"count": "once"})

RESPONSES_SPEC = Spec(
    RESPONSES,
    "input",
    "openai",
    {
        "create": "create",
        "stream": "stream",
        "parse": "once",
        "compact": "once",
        **dict.fromkeys(("retrieve", "delete", "cancel", "input_items"), "pass"),
    },
    refused={
        "connect": "a WebSocket connection sends its events, input and all, past the wrapper; "
        "use responses.create or responses.stream",
    },
    subs={"input_tokens": _INPUT_TOKENS},
)

DECISIONS = Spec(RESPONSES, "input", "openai", {"create": "once"})
"""``decisions.create`` asks questions about an input of Responses items, calls and outputs included."""

TREE: Tree = {
    "chat": {"completions": COMPLETIONS},
    "responses": RESPONSES_SPEC,
    "decisions": DECISIONS,
    "beta": {"chat": {"completions": COMPLETIONS}, "responses": RESPONSES_SPEC},
}


class OpenAIClient(ClientProxy):
    """A managed ``openai.OpenAI`` (or ``AzureOpenAI``)."""

    tree = TREE


class AsyncOpenAIClient(AsyncClientProxy):
    """A managed ``openai.AsyncOpenAI`` (or ``AsyncAzureOpenAI``)."""

    tree = TREE
