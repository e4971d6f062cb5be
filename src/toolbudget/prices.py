"""What a provider's prompt cache charges, as data: one price model per provider and cache mode.

Every price is relative to the model's base input price. A request's tokens
are either read from the cache (the prefix it shares with what the provider
holds) or not; those that are not are billed at the *write* price, since a
caching provider stores them for the next request. A cache lives ``ttl``
seconds without a request; after a longer gap the next request reads nothing.

The compaction schedule weighs each rewrite with the price model of the
request, ``toolbudget replay`` and ``bench/cache.py`` bill with it, so all three
agree on what a rewrite costs. Which model applies is chosen from the
request's API and model name, and the request's own ``cache_control`` for
Anthropic's one-hour cache; ``Policy.cache_price`` overrides the choice (a
negotiated price, a self-hosted server, or ``none``: no cache at all, so
every compaction is pure saving).

Sources (checked 2026):

- Anthropic, "Prompt caching" (platform.claude.com/en/docs/build-with-claude/prompt-caching):
  a 5-minute cache write costs 1.25x base input, a 1-hour write (``cache_control.ttl: "1h"``)
  2x, a read 0.1x whatever the TTL; at most 4 breakpoints; a minimum cacheable prefix of
  1024 or 2048 tokens by model. The cache's lifetime is refreshed by each hit.
- OpenAI, "Prompt caching" (platform.openai.com/docs/guides/prompt-caching): automatic from
  1024 tokens, no write fee on the gpt-5 family (reads 0.1x; older models 0.25x to 0.5x, set
  them with a file), in-memory retention cleared after 5 to 10 minutes of inactivity.
- Google, "Context caching" (ai.google.dev/gemini-api/docs/caching): implicit caching on 2.5
  and newer models from 2048 or 4096 tokens, no write fee, cached tokens discounted (0.25x
  is the discount the 2.5 models were launched with; newer pages state up to 90% off, which
  a file can set); the implicit cache is kept only a short while, taken here as 5 minutes.
- Bedrock: cache points priced like the model's own provider (Anthropic's for Claude).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from .errors import InputError

if TYPE_CHECKING:
    from .model import Message, Request
    from .policy import Policy

__all__ = [
    "ANTHROPIC_1H",
    "ANTHROPIC_5M",
    "GEMINI",
    "NAMED",
    "NONE",
    "OPENAI",
    "PriceModel",
    "asks_one_hour",
    "load_price",
    "marks_one_hour",
    "price_for",
]


@dataclass(frozen=True, slots=True)
class PriceModel:
    """How a provider bills input under prefix caching, relative to its base input price."""

    name: str
    write: float
    """Each token not read from the cache (the cache stores it for the next request)."""
    read: float
    """Each token read from the cache."""
    ttl: float | None
    """Seconds the cache survives without a request; ``None``: there is no cache."""

    def __post_init__(self) -> None:
        for label, value in (("write", self.write), ("read", self.read)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1e6:
                raise InputError(f"price model {self.name!r}: {label} must be a non-negative number")
        if self.ttl is not None and (
            isinstance(self.ttl, bool) or not isinstance(self.ttl, (int, float)) or not self.ttl > 0
        ):
            raise InputError(f"price model {self.name!r}: ttl must be a positive number of seconds")

    @property
    def cached(self) -> bool:
        """Whether the provider caches at all."""
        return self.ttl is not None

    def bill(self, prefix: float, total: float) -> float:
        """One request of ``total`` tokens whose first ``prefix`` are read from the cache."""
        if self.ttl is None:  # not ``cached``: a property costs a call on every request point
            return self.write * total
        return self.read * prefix + self.write * (total - prefix)

    def cold_after(self, gap: float | None) -> bool:
        """Whether a request ``gap`` seconds after the previous one finds the cache gone."""
        return gap is not None and self.ttl is not None and gap > self.ttl


ANTHROPIC_5M = PriceModel("anthropic-5m", 1.25, 0.1, 300.0)
ANTHROPIC_1H = PriceModel("anthropic-1h", 2.0, 0.1, 3600.0)
OPENAI = PriceModel("openai", 1.0, 0.1, 300.0)
GEMINI = PriceModel("gemini", 1.0, 0.25, 300.0)
NONE = PriceModel("none", 1.0, 1.0, None)
NAMED: Mapping[str, PriceModel] = {p.name: p for p in (ANTHROPIC_5M, ANTHROPIC_1H, OPENAI, GEMINI, NONE)}
"""The named price models, by the name ``Policy.cache_price`` and ``replay --price`` take."""


def load_price(spec: str) -> PriceModel:
    """A named price model, or one read from a JSON file ``{"write": .., "read": .., "ttl": ..}``.

    ``ttl`` (seconds) may be ``null`` for a server without a cache; left out it is 300.
    Raises :class:`~toolbudget.errors.InputError` for an unknown name or a bad file.
    """
    named = NAMED.get(spec)
    if named is not None:
        return named
    path = Path(spec)
    if not path.is_file():
        raise InputError(f"price model must be one of {', '.join(NAMED)} or a JSON file, not {spec!r}")
    return _from_file(str(path.resolve()), path.stat().st_mtime_ns)


@lru_cache(maxsize=32)
def _from_file(path: str, _mtime: int) -> PriceModel:
    try:
        value: Any = orjson.loads(Path(path).read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a readable JSON price model ({exc})") from None
    if not isinstance(value, dict) or not {"write", "read"} <= value.keys():
        raise InputError(f'{path}: a price model is {{"write": .., "read": .., "ttl": ..}}')
    unknown = set(value) - {"name", "write", "read", "ttl"}
    if unknown:
        raise InputError(f"{path}: unknown field(s) {', '.join(sorted(unknown))} in a price model")
    name = value.get("name", Path(path).stem)
    return PriceModel(str(name), value["write"], value["read"], value.get("ttl", 300.0))


def _marked(extra: Mapping[str, Any]) -> bool:
    control = extra.get("cache_control")
    # Most parts say nothing of the cache: told without the (slow) check against the ABC.
    return control is not None and isinstance(control, Mapping) and control.get("ttl") == "1h"


def marks_one_hour(messages: Sequence[Message], begin: int = 0) -> bool:
    """Whether a part of ``messages[begin:]`` asks for the one-hour cache: a history that only
    grew is checked on its new messages alone (see :func:`asks_one_hour`)."""
    for message in messages[begin:]:
        for part in message.parts:
            extra = getattr(part, "extra", None)
            if extra and _marked(extra):
                return True
    return False


def asks_one_hour(request: Request, in_messages: bool | None = None) -> bool:
    """Whether an Anthropic request asks for the one-hour cache (``cache_control.ttl == "1h"``).

    ``in_messages`` is what :func:`marks_one_hour` says of its messages, when
    the caller knows it already; ``None`` checks them all.
    """
    if _marked(request.extra) or any(_marked(getattr(p, "extra", {}) or {}) for p in request.system):
        return True
    if any(_marked(t.extra) for t in request.tools):
        return True
    return marks_one_hour(request.messages) if in_messages is None else in_messages


def price_for(
    policy: Policy,
    api: str | None,
    model: str | None,
    request: Request | None = None,
    *,
    hour_in_messages: bool | None = None,
) -> PriceModel:
    """The price model of a request: the policy's ``cache_price``, else the provider's own.

    Anthropic's is the 5-minute cache unless the request asks for the 1-hour
    one; Bedrock bills Claude like Anthropic. A request of unknown provider
    gets Anthropic's 5-minute prices, the dearest common case of write-then-read.
    """
    if policy.cache_price is not None:
        return load_price(policy.cache_price)
    name = (model or "").lower()
    if api in ("openai-chat", "openai-responses"):
        return OPENAI
    if api == "gemini":
        return GEMINI
    if api == "anthropic" or (api == "bedrock-converse" and ("claude" in name or "anthropic" in name)):
        return (
            ANTHROPIC_1H if request is not None and asks_one_hour(request, hour_in_messages) else ANTHROPIC_5M
        )
    return ANTHROPIC_5M
