"""``toolbudget mcp``: recall over MCP, for agents that take their tools from MCP servers.

Coding agents (Claude Code, Codex, Gemini CLI) register tools through MCP,
not through a tool list a library can extend. This server gives them the
recall tool, answering from the same store the library and the proxy write
to, so a marker's key is recalled whichever of them made the cut.

Two tools, whose definitions never change: a tool list that grew with the
archive's keys would change the prompt's tool section on every cut and so
break the provider's prompt cache.

- ``recall(key, lines, grep, chars)``: a page of an archived original, with
  the same grammar, pages and cap as :meth:`toolbudget.Session.handle_recall`.
- ``stats(session)``: what a session's archive holds: its cut originals and
  their characters, in all and per tool. Each cut's record (kept beside its
  original, see :func:`toolbudget.budget.cut_record`) says the tool it came
  from; an original without one (archived before records were kept, or its
  record lost) is counted under ``(unknown)``, and folded turns, which are no
  one tool's, under ``(folded turns)``.

Which entries a key reaches (the security property, stated in the README): a
key is a hash of the archived text keyed by the id of the session that cut
it, so only someone who saw its marker can name it, and it names one entry.
Without ``session`` or ``tenant`` the server answers a key from any session
of its store: the store is one user's own, like any
file they can read. With ``tenant`` (the proxy's namespace of one credential)
it answers only from that tenant's sessions, and with ``session`` only from
that session: a key of another answers "not found", exactly as for a key that
never existed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

import orjson
from pydantic import Field, WithJsonSchema

from .budget import CUT_PREFIX, FORM_PREFIX
from .errors import InputError, NotFoundError
from .policy import Policy
from .recall import RECALL_DESCRIPTION, RECALL_PARAMETERS, answer, valid_key
from .store import Store

try:
    # At module level: the SDK reads the tool's annotations from this module's names.
    from mcp.server.mcpserver import Context
except ImportError:  # pragma: no cover - build_server says which extra to install
    Context = Any  # type: ignore[misc,assignment]

__all__ = ["RecallServer", "build_server"]

RECALL = "recall"
"""The recall tool's name on this server: what its answers tell the model to call for the next page.

Clients show it with their own prefix (Claude Code and Codex ``mcp__toolbudget__recall``), but
``toolbudget_recall``, the library's own tool, is no tool of an agent that reached this server.
"""

INSTRUCTIONS = (
    "Tool results that were too long for the context were cut; each cut ends with a marker naming a "
    "key (<<tb:KEY>>). Call recall with that key to read what was cut, a page at a time."
)


def _said(name: str) -> str:
    description: str = RECALL_PARAMETERS["properties"][name]["description"]
    return description


# The tools show the model the library's schema (strings), but take any JSON value, as
# ``Session.handle_recall`` does: a whole number or ``[A, B]`` for a range is the same grammar,
# and anything else gets the same one-line reason, never a validation error of the SDK's.
_TEXT = WithJsonSchema({"type": "string"})
_TEXT_OR_NULL = WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "null"}]})
Key = Annotated[Any, _TEXT, Field(description=_said("key"))]
Lines = Annotated[Any, _TEXT_OR_NULL, Field(description=_said("lines"))]
Grep = Annotated[Any, _TEXT_OR_NULL, Field(description=_said("grep"))]
Chars = Annotated[Any, _TEXT_OR_NULL, Field(description=_said("chars"))]

UNKNOWN_TOOL = "(unknown)"
"""Where ``stats`` counts an original whose cut has no record of its tool."""
FOLDED_TURNS = "(folded turns)"
"""Where ``stats`` counts the archived text of turns compaction folded away."""

_CUT = CUT_PREFIX.encode()
_OWN = FORM_PREFIX.encode()[: len("\x00toolbudget: ")]
"""What every record a session keeps of its own begins with (that a text was sent as a cut, what
a preview was made from, a cut's tool, the arrivals and cold points of the cache schedule): none
of them is an original, so recall never answers one and ``stats`` counts none as an entry."""
_BATCH = 64
"""Entries ``stats`` reads in one round trip: few trips, and never the whole archive in memory."""


class RecallServer:
    """The answers of the MCP tools, over one store: kept apart from MCP so any transport can use them."""

    def __init__(
        self,
        store: Store,
        *,
        policy: Policy | None = None,
        session: str | None = None,
        tenant: str | None = None,
    ) -> None:
        self.store = store
        self.policy = policy or Policy()
        self.tenant = tenant
        self.session = None if session is None else self._in_tenant(session)

    def _in_tenant(self, session: str) -> str:
        if self.tenant is None or session.startswith(f"{self.tenant}-"):
            return session
        return f"{self.tenant}-{session}"

    def original(self, key: str) -> str:
        """The original under ``key``, from the sessions this server may read."""
        if not valid_key(key):
            raise NotFoundError(f"not found: {key[:80]!r} is not a toolbudget key")
        if self.session is not None:
            data = self.store.get(self.session, key)
        else:
            data = self.store.find(key, "" if self.tenant is None else f"{self.tenant}-")
        if data is None or data.startswith(_OWN):
            raise NotFoundError(f"not found: no archived output has key {key}")
        return data.decode("utf-8", "surrogatepass")

    def recall(self, arguments: dict[str, Any]) -> str:
        return answer(arguments, self.original, self.policy.recall_max_chars, tool=RECALL)

    def stats(self, session: str | None) -> str:
        """A session's archive, as one JSON line: its cut originals and characters, in all and per tool."""
        if self.session is not None:
            if session is not None and self._in_tenant(session) != self.session:
                raise InputError(f"this server answers only for session {self.session}")
            name = self.session
        elif session is None:
            raise InputError("stats needs a session id (this server was started without --session)")
        else:
            name = self._in_tenant(session)
        originals: dict[str, int] = {}
        made: dict[str, str] = {}  # an original's key: where its record counts it
        keys = self.store.keys(name)
        for start in range(0, len(keys), _BATCH):
            for key, data in self.store.get_many(name, keys[start : start + _BATCH]).items():
                if data.startswith(_CUT):
                    about = _cut_of(data)
                    if about is not None:
                        made[about[0]] = about[1]
                elif not data.startswith(_OWN):  # not another record the session keeps of its own
                    originals[key] = len(data.decode("utf-8", "surrogatepass"))
        tools: dict[str, dict[str, int]] = {}
        for key, chars in originals.items():
            tally = tools.setdefault(made.get(key, UNKNOWN_TOOL), {"entries": 0, "chars": 0})
            tally["entries"] += 1
            tally["chars"] += chars
        answer = {
            "session": name,
            "entries": len(originals),
            "chars": sum(originals.values()),
            "tools": dict(sorted(tools.items())),
        }
        try:
            return orjson.dumps(answer).decode()
        except TypeError:  # a tool name with a lone surrogate: escaped, as orjson will not
            return json.dumps(answer, separators=(",", ":"))


def _cut_of(data: bytes) -> tuple[str, str] | None:
    """The original a cut's record is about, and the name ``stats`` counts it under (``None``: unreadable)."""
    try:
        fields = json.loads(data[len(_CUT) :].decode("utf-8", "surrogatepass"))
    except ValueError:
        return None
    if not isinstance(fields, dict) or not isinstance(fields.get("key"), str):
        return None
    tool = fields.get("tool")
    if isinstance(tool, str) and tool:
        return fields["key"], tool
    return fields["key"], FOLDED_TURNS if fields.get("kind") == "turns" else UNKNOWN_TOOL


def _arguments_of(ctx: Any) -> dict[str, Any] | None:
    """The ``arguments`` of the tool call ``ctx`` serves, as sent; ``None`` when it does not say."""
    try:
        params = ctx.request_context.params
    except (AttributeError, ValueError):
        return None  # no request behind the call (called in-process)
    arguments = params.get("arguments") if isinstance(params, Mapping) else None
    return dict(arguments) if isinstance(arguments, Mapping) else None


def build_server(answers: RecallServer) -> Any:
    """The MCP server (``mcp.server.mcpserver.MCPServer``) with ``recall`` and ``stats``."""
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.types import ToolAnnotations
    except ImportError as exc:  # pragma: no cover - the extra's own check
        raise InputError("the MCP server needs the mcp package: pip install 'toolbudget[mcp]'") from exc

    server = MCPServer(name="toolbudget", instructions=INSTRUCTIONS)
    read_only = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
    # Claude Code caps an MCP tool's text below a recall page unless the tool says how much it sends.
    meta = {"anthropic/maxResultSizeChars": answers.policy.recall_max_chars}
    # Both answer plain text, never structured output: a client handed structured content gives
    # the model ``{"result": "..."}`` instead, every line break and quote escaped, which makes a
    # full recall page longer than the size above and has Claude Code set it aside in a file.

    @server.tool(
        name=RECALL,
        description=RECALL_DESCRIPTION,
        annotations=read_only,
        meta=meta,
        structured_output=False,
    )
    def recall(ctx: Context, key: Key, lines: Lines = None, grep: Grep = None, chars: Chars = None) -> str:
        # The arguments as the model sent them, when the request has them: the SDK's argument
        # model drops a name it does not know, and a model that wrote ``line`` for ``lines``
        # must be told so, as Session.handle_recall tells it, not answered the first page.
        sent = _arguments_of(ctx)
        if sent is not None:
            return answers.recall(sent)
        given = {"key": key, "lines": lines, "grep": grep, "chars": chars}
        return answers.recall({k: v for k, v in given.items() if v is not None})

    @server.tool(
        name="stats",
        description=(
            "What toolbudget archived for a session: the number of cut outputs and their characters, "
            "in all and per tool."
        ),
        annotations=read_only,
        structured_output=False,
    )
    def stats(session: str | None = None) -> str:
        try:
            return answers.stats(session)
        except InputError as exc:
            return f"stats: {exc}"

    return server
