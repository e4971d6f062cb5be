"""What is known of each model: its context window, its output cap, and cache prices.

The facts are data, in one table read from the top: the first row whose
pattern is found in the model's name (lower-cased) and that states the fact
asked for gives it; a row that leaves a fact out (``None``) is passed over for
that fact. A policy's own value (``context_window_tokens``,
``max_output_tokens``) always comes first, since whoever runs the agent knows
the deployment better than any table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from .prices import ANTHROPIC_5M

if TYPE_CHECKING:
    from .policy import Policy

__all__ = [
    "CACHE_READ",
    "CACHE_WRITE",
    "DEFAULT_OUTPUT_CAP",
    "DEFAULT_WINDOW",
    "MODELS",
    "ModelFacts",
    "context_window",
    "output_cap",
    "window_of",
]

DEFAULT_WINDOW = 200_000
"""The context window (tokens) of a model the table does not know."""
DEFAULT_OUTPUT_CAP = 16_384
"""The output cap of a model the table does not know."""

# Prompt-cache prices relative to the base input price, for a provider the request does not
# name: Anthropic's 5-minute cache, the dearest common case of write-then-read caching. Each
# provider's own, and how one is chosen, are in :mod:`toolbudget.prices`.
CACHE_READ = ANTHROPIC_5M.read
CACHE_WRITE = ANTHROPIC_5M.write


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """One row of :data:`MODELS`: the models whose name ``pattern`` is found in."""

    pattern: re.Pattern[str]
    window: int | None = None
    """Context window in tokens (``None``: ask a later row)."""
    output_cap: int | None = None
    """The most output tokens one answer can have (``None``: ask a later row)."""


def _row(pattern: str, window: int | None, cap: int | None) -> ModelFacts:
    return ModelFacts(re.compile(pattern), window, cap)


# Sources: the providers' model pages (2026).
# Windows: Claude 200K; GPT-4.1 1,047,576; GPT-4o and GPT-4 Turbo 128K; GPT-5 400K;
# o1 / o3 / o4 200K; Gemini 1,048,576; DeepSeek 128K; Mistral 131,072; Llama 128K;
# Qwen 131,072.
# Output caps: Claude Opus 4.6+ / Sonnet 4.6+ and the Claude 5 family 128K; Sonnet 3.7 /
# 4 / 4.5, Haiku 4.5 and Opus 4.5 64K; Opus 4 and 4.1 32K; Claude 3.5 8K; Claude 3 4K.
# GPT-4o 16K, GPT-4.1 32K, GPT-5 128K, o-series 100K; Gemini 2.5+ 64K, Gemini 2.0 / 1.5 8K.
MODELS: tuple[ModelFacts, ...] = (
    _row(r"claude-(?:opus|sonnet)-4-[6-9]", 200_000, 128_000),
    _row(r"claude-(?:opus|sonnet|haiku)-4-5", 200_000, 64_000),
    _row(r"claude-opus-4(?:-[01])?(?:\b|-\d{8}|@)", 200_000, 32_000),
    _row(r"claude-(?:sonnet-4|3-7-sonnet)", 200_000, 64_000),
    _row(r"claude-3-5-", 200_000, 8_192),
    _row(r"claude-3-", 200_000, 4_096),
    _row(r"claude-(?:opus|sonnet|haiku|fable|mythos)-[5-9]", 200_000, 128_000),
    _row(r"claude", 200_000, 64_000),
    _row(r"gpt-4\.1", 1_047_576, 32_768),
    _row(r"gpt-4o", 128_000, 16_384),
    _row(r"gpt-4-turbo", 128_000, None),
    _row(r"gpt-5", 400_000, 128_000),
    # Windows by a bare "o1"/"o3"/"o4" anywhere in the name; output caps only for an
    # o-series name (at the start, or after a provider's "vendor/").
    _row(r"o1", 200_000, None),
    _row(r"o3", 200_000, None),
    _row(r"o4", 200_000, None),
    _row(r"(?:^|/)o[1-9](?:\b|-)", None, 100_000),
    _row(r"gemini-(?:1\.5|2\.0)", 1_048_576, 8_192),
    _row(r"gemini", 1_048_576, 65_536),
    _row(r"deepseek", 128_000, None),
    _row(r"mistral", 131_072, None),
    _row(r"llama", 128_000, None),
    _row(r"qwen", 131_072, None),
)


@lru_cache(maxsize=256)
def window_of(model: str | None) -> int:
    """The context window in tokens the table gives for ``model`` (asked at every request: a
    session's model is looked up once, not matched against the table each time)."""
    name = (model or "").lower()
    for row in MODELS:
        if row.window is not None and row.pattern.search(name):
            return row.window
    return DEFAULT_WINDOW


def context_window(policy: Policy, model: str | None) -> int:
    """The context window in tokens: the policy's, or the one known for the model's name."""
    if policy.context_window_tokens:
        return policy.context_window_tokens
    return window_of(model)


def output_cap(model: str | None, policy: Policy | None = None) -> int:
    """The most output tokens ``model`` can give: ``policy.max_output_tokens``, or the table."""
    if policy is not None and policy.max_output_tokens is not None:
        return policy.max_output_tokens
    name = (model or "").lower()
    for row in MODELS:
        if row.output_cap is not None and row.pattern.search(name):
            return row.output_cap
    return DEFAULT_OUTPUT_CAP
