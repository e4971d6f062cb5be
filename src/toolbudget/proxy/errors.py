"""Each API's own error body, for what the proxy itself refuses or cannot reach.

Clients match on the provider's envelope and wording (Claude Code retries
some rejections by their text), so an error the proxy makes is written the
way that API writes its own, with one line naming the problem. Errors the
upstream sent are never rewritten: they go back as they came.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["error_body"]

_ANTHROPIC_TYPES = {400: "invalid_request_error", 404: "not_found_error", 413: "request_too_large"}
_OPENAI_TYPES = {400: "invalid_request_error", 404: "invalid_request_error", 413: "invalid_request_error"}
_GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    404: "NOT_FOUND",
    413: "INVALID_ARGUMENT",
    426: "FAILED_PRECONDITION",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def error_body(family: str, status: int, message: str) -> bytes:
    """The JSON error body ``family``'s API would send with ``status`` and ``message``."""
    line = " ".join(message.split())  # one line, whatever the cause held
    body: dict[str, Any]
    if family == "anthropic":
        kind = _ANTHROPIC_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
        if status == 504:
            kind = "timeout_error"
        body = {"type": "error", "error": {"type": kind, "message": line}}
    elif family == "gemini":
        body = {"error": {"code": status, "message": line, "status": _GEMINI_STATUS.get(status, "UNKNOWN")}}
    else:
        kind = _OPENAI_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
        body = {"error": {"message": line, "type": kind, "param": None, "code": None}}
    return orjson.dumps(body)
