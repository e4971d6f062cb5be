"""A conversation of Bash runs whose outputs are all of one size: the cache schedule's test case.

Results just over the compaction minimum make a history where, at Anthropic's
write price, no rewrite pays for a while, so what compacts them early is an
idle gap (a cold cache) or the price model, which is what these tests look at.
"""

from __future__ import annotations

from toolbudget.model import Conversation, Message, Text, ToolCall, ToolResult


def bash_history(turns: int, size: int, *, call_prefix: str = "call_", tool: str = "Bash") -> Conversation:
    """``turns`` calls of ``tool``, each answered by about ``size`` characters of output."""
    messages = [Message("user", (Text("fix the bug"),))]
    for t in range(turns):
        call = ToolCall(f"{call_prefix}{t}", tool, {"command": f"pytest tests/test_{t}.py"})
        messages.append(Message("assistant", (Text(f"step {t}"), call)))
        body = "".join(f"line {n} of output {t}\n" for n in range(size // 20))
        messages.append(Message("tool", (ToolResult(call.id, (Text(body),), False, tool),)))
    return Conversation("c", "test", tuple(messages))
