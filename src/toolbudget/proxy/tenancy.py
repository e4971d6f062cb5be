"""The namespace a request's sessions live in: a one-way hash of its credential.

A proxy shared by several people must not let one reach another's archived
outputs. Session ids come from headers and bodies a client writes, so they
cannot be trusted to keep people apart: a header may claim anyone's session,
and two people who start the same task derive the same conversation id. The
namespace therefore comes from what the provider itself trusts, the
credential. The proxy never stores or logs it; it keeps only this hash,
from which the credential cannot be found.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

__all__ = ["CREDENTIAL_HEADERS", "NO_CREDENTIAL", "tenant_of"]

CREDENTIAL_HEADERS = ("x-api-key", "authorization", "x-goog-api-key")
"""The headers a provider reads a caller's credential from (Anthropic, OpenAI, Gemini)."""

NO_CREDENTIAL = "anonymous"
"""The tenant of requests that carry no credential (a local server that takes none)."""


def tenant_of(headers: Mapping[str, str]) -> str:
    """The tenant of a request with these headers: 16 hex digits of a hash of its credentials."""
    lowered = {name.lower(): value for name, value in headers.items()}
    digest = hashlib.blake2b(digest_size=8, person=b"tb-tenant")
    found = False
    for name in CREDENTIAL_HEADERS:
        value = lowered.get(name)
        if value:
            found = True
            digest.update(name.encode() + b"\x00" + value.encode("utf-8", "surrogateescape") + b"\x00")
    return digest.hexdigest() if found else NO_CREDENTIAL
