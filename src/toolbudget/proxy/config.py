"""What a proxy is started with: where each API's upstream is, the store, the policy."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

from ..errors import InputError
from ..policy import Policy

__all__ = ["DEFAULT_UPSTREAMS", "FAMILIES", "OFFLOADS", "ProxyConfig", "policy_from_file", "upstreams_of"]

OFFLOADS = ("auto", "always", "never")
"""Where a proxy may manage its bodies (:attr:`ProxyConfig.offload`)."""

FAMILIES = ("anthropic", "openai", "gemini")
"""The upstreams a proxy knows: one per provider, each serving its own APIs."""

DEFAULT_UPSTREAMS: Mapping[str, str] = MappingProxyType(
    {
        "anthropic": "https://api.anthropic.com",
        "openai": "https://api.openai.com",
        "gemini": "https://generativelanguage.googleapis.com",
        "chatgpt": "https://chatgpt.com",
    }
)
"""The providers' public endpoints; a request's path is put after them as it came. ``chatgpt`` is
the backend Codex talks to when logged in with ChatGPT (``/backend-api/codex/responses``): the
same Responses API on another host, reached through ``--upstream`` or this default."""


def _checked(url: str, flag: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise InputError(
            f"{flag} must be an http(s) URL with no query, like http://127.0.0.1:8080, not {url!r}"
        )
    return url.rstrip("/")


def upstreams_of(
    upstream: str | None = None,
    *,
    anthropic: str | None = None,
    openai: str | None = None,
    gemini: str | None = None,
) -> dict[str, str]:
    """Each family's upstream: its own flag, else ``upstream`` (all at once), else the public endpoint."""
    given = {"anthropic": anthropic, "openai": openai, "gemini": gemini}
    out = {}
    for family in FAMILIES:
        own = given[family]
        if own is not None:
            out[family] = _checked(own, f"--{family}-upstream")
        elif upstream is not None:
            out[family] = _checked(upstream, "--upstream")
        else:
            out[family] = DEFAULT_UPSTREAMS[family]
    out["chatgpt"] = (
        _checked(upstream, "--upstream") if upstream is not None else DEFAULT_UPSTREAMS["chatgpt"]
    )
    return out


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    """A proxy's settings; everything about a call's policy is in ``policy``.

    ``store`` is the archive store URL; ``None`` takes the policy's, and when
    that is unset too, ``dir:`` (files in the user's cache directory, which an
    agent on this machine reads with its own file tool; entries expire by the
    store's TTL). ``report_headers`` adds ``x-toolbudget-*`` headers to the
    answers (off: some clients are strict about headers). ``read_timeout`` is
    the longest wait for the upstream's next byte: at least as long as the
    clients' own (Claude Code waits up to 600 s). ``offload`` says where a
    body is managed (:mod:`toolbudget.proxy.offload`): ``auto`` on the event
    loop while the store answers quickly and on a thread beside it once the
    store is slow, so a store that takes its time holds up only the request
    that writes to it; ``always`` on that thread; ``never`` on the loop.
    ``trim_seconds`` is how often, at most, the proxy hands the allocator's
    free pages back to the system after sessions were dropped
    (:mod:`toolbudget.proxy.memory`), so resident memory follows what the
    sessions hold; ``None`` never does.
    """

    upstreams: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_UPSTREAMS))
    store: str | None = None
    policy: Policy | None = None
    report_headers: bool = False
    read_timeout: float = 600.0
    connect_timeout: float = 30.0
    max_body_bytes: int = 512 * 1024 * 1024
    max_sessions: int = 1024
    max_held_bytes: int = 64 * 1024 * 1024
    idle_seconds: float = 3600.0
    offload: str = "auto"
    trim_seconds: float | None = 10.0

    def upstream(self, family: str) -> str:
        """The upstream of ``family``: the one given, else its public endpoint (a config made
        before the ChatGPT backend had a family names none for it)."""
        return self.upstreams.get(family) or DEFAULT_UPSTREAMS[family]

    def __post_init__(self) -> None:
        missing = [family for family in FAMILIES if family not in self.upstreams]
        if missing:
            raise InputError(f"no upstream for {', '.join(missing)}")
        if not self.read_timeout > 0 or not self.connect_timeout > 0:
            raise InputError("the proxy's timeouts must be positive numbers of seconds")
        if self.trim_seconds is not None and not self.trim_seconds > 0:
            raise InputError(
                f"trim_seconds is a positive number of seconds or None, not {self.trim_seconds!r}"
            )
        if self.offload not in OFFLOADS:
            raise InputError(f"offload is one of {', '.join(OFFLOADS)}, not {self.offload!r}")


def policy_from_file(config: str | None) -> Policy:
    """The policy with the settings of ``config`` (``--config``): a ``toolbudget.toml``-style file,
    or a ``pyproject.toml``'s ``[tool.toolbudget]``; the environment still wins over it.
    ``None``: the usual layers, searched from the working directory."""
    if config is None:
        return Policy.load()
    path = Path(config)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"--config {config}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"--config {config}: not TOML: {exc}") from None
    table: Any = data.get("tool", {}).get("toolbudget", data) if path.name == "pyproject.toml" else data
    table = table.get("toolbudget", table) if isinstance(table, dict) else table
    if not isinstance(table, dict):
        raise InputError(f"--config {config}: the settings must be a table")
    return Policy.load(**table)
