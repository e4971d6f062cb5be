"""toolbudget: keep an agent's tool-call history valid and inside its context budget.

The public surface is this module; everything else is private and may change.

- :func:`validate` and :func:`repair` check and fix tool-call pairing in a
  request body, to each provider's rules.
- :func:`load_transcript` reads the session files agents leave on disk and
  :func:`to_request` turns a conversation into the body an agent would send
  (what ``toolbudget convert`` writes).
- :func:`detect_api`, :func:`parse` and :func:`render` move between wire bodies
  and the canonical, frozen model; :func:`adapt` lays a parsed request out for
  another API.
- :class:`Session` manages each request: repair, then the budgets of its
  :class:`Policy`, with every cut archived and recallable through
  :func:`recall_tool` and :meth:`Session.handle_recall`.
- :class:`ManagedCall` is the whole policy of one provider call (manage, send,
  recover from overflow, lengthen a cut-off answer, report) as a flow that does
  no I/O; :func:`drive` and :func:`adrive` run it with any sender.
- :func:`wrap` wraps an ``anthropic`` or ``openai`` client so every call runs
  that flow; :func:`classify` tells any provider's errors apart.
"""

from __future__ import annotations

from .budget import Cut, Unreachable
from .callreport import CallReport
from .clients import UnsupportedClient, wrap
from .convert import to_request
from .errors import (
    ContextWindowFull,
    EncodingError,
    InputError,
    InvalidJSON,
    NotFoundError,
    RecoveryExhausted,
    ShapeError,
    StoreConfigError,
    StoreError,
    ToolbudgetError,
    TranscriptError,
    UnknownAPIError,
    UpstreamError,
)
from .flow import ManagedCall, Outcome, adrive, drive
from .marker import MARKER_RE, RECALL_TOOL
from .model import (
    Conversation,
    Data,
    Media,
    Message,
    Opaque,
    Request,
    Text,
    Thinking,
    ToolCall,
    ToolDef,
    ToolResult,
)
from .pairing import SYNTHETIC_TEXT, Repair, Repaired, Violation, repair, validate
from .policy import Policy
from .recall import recall_tool
from .recovery import Classified, ErrorKind, RecoveryReport, classify
from .recovery.output import Cutoff
from .session import Managed, Report, Session
from .sessions import Sessions
from .transcripts import Transcript, load_transcript
from .wire import APIS, adapt, detect_api, parse, render

__all__ = [
    "APIS",
    "MARKER_RE",
    "RECALL_TOOL",
    "SYNTHETIC_TEXT",
    "CallReport",
    "Classified",
    "ContextWindowFull",
    "Conversation",
    "Cut",
    "Cutoff",
    "Data",
    "EncodingError",
    "ErrorKind",
    "InputError",
    "InvalidJSON",
    "Managed",
    "ManagedCall",
    "Media",
    "Message",
    "NotFoundError",
    "Opaque",
    "Outcome",
    "Policy",
    "RecoveryExhausted",
    "RecoveryReport",
    "Repair",
    "Repaired",
    "Report",
    "Request",
    "Session",
    "Sessions",
    "ShapeError",
    "StoreConfigError",
    "StoreError",
    "Text",
    "Thinking",
    "ToolCall",
    "ToolDef",
    "ToolResult",
    "ToolbudgetError",
    "Transcript",
    "TranscriptError",
    "UnknownAPIError",
    "Unreachable",
    "UnsupportedClient",
    "UpstreamError",
    "Violation",
    "adapt",
    "adrive",
    "classify",
    "detect_api",
    "drive",
    "load_transcript",
    "parse",
    "recall_tool",
    "render",
    "repair",
    "to_request",
    "validate",
    "wrap",
]

__version__ = "0.1.0"
