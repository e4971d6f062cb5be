"""A transparent HTTP proxy that manages the requests of agents it did not write.

Claude Code, Codex, Aider, OpenHands and any OpenAI-compatible client can be
pointed at a base URL. On that URL, :func:`create_app` serves the provider
APIs (Anthropic Messages, OpenAI Chat and Responses, Gemini) and gives each
request the whole pipeline: the body goes through the one managed call
(:class:`toolbudget.ManagedCall`, driven by :func:`toolbudget.adrive`) with
its session from :class:`toolbudget.Sessions`, and the answer goes back as
the upstream sent it. The proxy holds no call policy of its own: HTTP becomes
dicts (or the very bytes) at its edge, and that is all it adds.

Modules, each small:

- :mod:`.config`: what a proxy is started with;
- :mod:`.routes`: which path is managed, counted or passed through;
- :mod:`.upstream`: the headers that travel, and the upstream's URL;
- :mod:`.bodies`: compressed request bodies;
- :mod:`.streaming`: the bounded side copy that reads a stream's usage;
- :mod:`.errors`: each API's own error body, for what the proxy refuses;
- :mod:`.tenancy`: the namespace a credential's sessions live in;
- :mod:`.metrics`: the Prometheus counters;
- :mod:`.app`: the handlers;
- :mod:`.server`: running it (the command, or a thread for tests);
- :mod:`.listen`: whether an address can be listened on, asked before a server starts;
- :mod:`.setup`: the lines that point each agent here.

It needs the ``proxy`` extra: ``pip install 'toolbudget[proxy]'`` (aiohttp,
prometheus-client, zstandard, brotli).
"""

from __future__ import annotations

from .config import ProxyConfig

__all__ = ["ProxyConfig", "create_app"]


def __getattr__(name: str) -> object:
    # The app needs aiohttp: imported only when asked for, so the config is usable without it.
    if name == "create_app":
        from .app import create_app

        return create_app
    raise AttributeError(name)
