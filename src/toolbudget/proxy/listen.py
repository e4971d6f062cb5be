"""Whether a server could listen on an address, asked before it starts, so a refusal is one line.

A server that finds its port taken only once it binds, deep inside its event loop, ends in a
traceback (the proxy's aiohttp, the MCP server's uvicorn); asking first gives the command one
line and status 2 instead. Nothing here needs the proxy's packages.
"""

from __future__ import annotations

import socket

from ..errors import InputError

__all__ = ["check_listen"]


def check_listen(host: str, port: int, *, reuse_port: bool) -> None:
    """Bind each address ``host`` names, as asyncio's server does, and let go at once."""
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise InputError(f"cannot listen on {host!r}: {exc.strerror}") from None
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if reuse_port:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
