"""The example behind ``toolbudget demo``: a real session, recorded here and now.

Nothing in it is canned. The session runs real commands on the repository it
is started in (git, grep, the test runner, a JSON dump, a file read), writes
them down in Claude Code's session format, and lets one command be killed by a
timeout, which leaves a call with no result: the most common way a real
history breaks. The demo then reads that file back like any user's session,
converts it to every wire API, validates and repairs it.

Part of the command line, so, like :mod:`toolbudget.cli`, it needs the ``cli``
extra (``rich`` draws its tables); only that command imports it, and the
library never does.
"""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from . import wire
from .convert import to_request
from .errors import ToolbudgetError
from .jsonio import dumps
from .marker import find_markers
from .model import Conversation, ToolCall, ToolResult
from .pairing import check_request, repair_request
from .policy import Policy
from .session import Session
from .transcripts import discover_sessions, load_transcript

__all__ = ["record_session", "run_demo"]

_NAMESPACE = uuid.UUID("6f1d3f1e-8f0c-4c7b-9a55-0d5b7f1c2a10")


@dataclass(frozen=True, slots=True)
class Step:
    """One thing the recorded agent does: say something, then maybe run a command."""

    say: str
    command: str | None = None
    tool: str = "Bash"
    timeout: float = 120.0


def _steps(repo: Path) -> list[Step]:
    git = (repo / ".git").exists() and shutil.which("git") is not None
    python = sys.executable
    test_runner = (
        f"{python} -m pytest --collect-only -q tests"
        if _has_module("pytest")
        else f"{python} -m unittest discover -s tests -p 'test_*.py' -v"
    )
    return [
        Step(
            "I'll start with the recent history of this repository.",
            "git log --stat -n 15" if git else "ls -laR src",
        ),
        Step("Let me look at the latest change in full.", "git show HEAD" if git else "cat pyproject.toml"),
        Step("Where are the public functions defined?", "grep -rn 'def ' src"),
        Step("Which tests does the suite hold?", test_runner, timeout=300),
        Step("And what exactly is installed, as JSON.", f"{python} -m pip inspect"),
        Step("Let me read the README.", "README.md", tool="Read"),
        Step("Now a slow check; this one may not finish.", "sleep 30", timeout=1.0),
    ]


def _has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def record_session(repo: Path, out: Path) -> Path:
    """Run the steps on ``repo`` and write them as a Claude Code session file at ``out``."""
    session = str(uuid.uuid5(_NAMESPACE, str(repo.resolve())))
    writer = _Writer(session, str(repo.resolve()))
    writer.user("Get to know this repository: its history, code, tests and dependencies. Then report.")
    for n, step in enumerate(_steps(repo)):
        call_id = f"toolu_{n:02d}_{uuid.uuid5(_NAMESPACE, session + str(n)).hex[:16]}"
        writer.assistant_text(step.say)
        if step.command is None:
            continue
        tool_input = (
            {"file_path": str(repo / step.command)} if step.tool == "Read" else {"command": step.command}
        )
        writer.tool_use(call_id, step.tool, tool_input)
        outcome = _run(step, repo)
        if outcome is None:
            # Interrupted: no result was ever written, as when an agent is killed mid-call.
            break
        text, is_error = outcome
        writer.tool_result(call_id, text, is_error)
    writer.user("That command hung, so I stopped it. Please summarise what you found so far.")
    writer.assistant_text(
        "Summary: the history, the code layout, the test suite and the dependencies are above."
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(b"\n".join(dumps(line) for line in writer.lines) + b"\n")
    return out


def _run(step: Step, repo: Path) -> tuple[str, bool] | None:
    if step.tool == "Read":
        path = repo / (step.command or "")
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            return f"<tool_use_error>{exc}</tool_use_error>", True
        return "\n".join(f"{n:>6}\u2192{line}" for n, line in enumerate(lines, 1)), False
    try:
        done = subprocess.run(
            step.command or "",
            shell=True,
            cwd=repo,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=step.timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None
    text = done.stdout + (("\n" + done.stderr) if done.stderr.strip() else "")
    return text.rstrip("\n") or "(no output)", done.returncode != 0


class _Writer:
    """Writes lines in the shape Claude Code gives its session files."""

    def __init__(self, session: str, cwd: str) -> None:
        self.session = session
        self.cwd = cwd
        self.lines: list[dict[str, Any]] = []
        self.parent: str | None = None
        self.count = 0

    def _line(self, kind: str, message: dict[str, Any], **more: Any) -> None:
        self.count += 1
        line_id = str(uuid.uuid5(_NAMESPACE, f"{self.session}/{self.count}"))
        self.lines.append(
            {
                "parentUuid": self.parent,
                "isSidechain": False,
                "userType": "external",
                "cwd": self.cwd,
                "sessionId": self.session,
                "version": "toolbudget-demo",
                "type": kind,
                "message": message,
                "uuid": line_id,
                "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
                **more,
            }
        )
        self.parent = line_id

    def user(self, text: str) -> None:
        self._line("user", {"role": "user", "content": text})

    def assistant_text(self, text: str) -> None:
        self._assistant({"type": "text", "text": text})

    def tool_use(self, call_id: str, name: str, tool_input: dict[str, Any]) -> None:
        self._assistant({"type": "tool_use", "id": call_id, "name": name, "input": tool_input})

    def _assistant(self, block: dict[str, Any]) -> None:
        message = {
            "id": f"msg_demo_{self.count:04d}",
            "type": "message",
            "role": "assistant",
            "model": "recorded-by-toolbudget-demo",
            "content": [block],
            "stop_reason": "tool_use" if block["type"] == "tool_use" else "end_turn",
        }
        self._line("assistant", message)

    def tool_result(self, call_id: str, text: str, is_error: bool) -> None:
        block: dict[str, Any] = {"tool_use_id": call_id, "type": "tool_result", "content": text}
        if is_error:
            block["is_error"] = True
        self._line("user", {"role": "user", "content": [block]}, toolUseResult={"stdout": text, "stderr": ""})


def _counts(conversation: Conversation) -> tuple[int, int]:
    calls = sum(isinstance(p, ToolCall) for m in conversation.messages for p in m.parts)
    results = sum(isinstance(p, ToolResult) for m in conversation.messages for p in m.parts)
    return calls, results


def _process(
    conversation: Conversation,
    *,
    label: str,
    out_dir: Path,
    apis: tuple[str, ...],
    table: Table,
    examples: list[str],
) -> None:
    calls, results = _counts(conversation)
    for api in apis:
        body = to_request(conversation, api)
        (out_dir / f"{label}.{api}.request.json").write_bytes(dumps(body, indent=True))
        request = wire.parse(body, api)
        before = check_request(request)
        fixed, repairs = repair_request(request)
        after = check_request(fixed)
        (out_dir / f"{label}.{api}.repaired.json").write_bytes(dumps(wire.render(fixed), indent=True))
        kinds = sorted({r.kind for r in repairs})
        table.add_row(
            label,
            api,
            str(len(request.messages)),
            f"{calls}/{results}",
            str(len(before)),
            "\n".join(f"{k} x{sum(r.kind == k for r in repairs)}" for k in kinds) or "-",
            str(len(after)),
        )
        if api == apis[0]:
            for violation in before:
                examples.append(f"{label} as {api}: {violation}")


def _own_sessions() -> Iterator[Path]:
    yield from discover_sessions()[:1]


def run_demo(out_dir: Path, *, include_own: bool = True) -> None:
    console = Console(width=max(Console().width, 110))
    repo = Path.cwd()
    out_dir.mkdir(parents=True, exist_ok=True)
    console.print(f"Recording a real session on [bold]{repo}[/bold] as {getpass.getuser()} ...")
    session_file = record_session(repo, out_dir / "session.jsonl")
    console.print(f"Wrote {session_file} ({session_file.stat().st_size:,} bytes)")
    table = Table(title="convert, validate, repair")
    for column in ("session", "api", "messages", "calls/results", "violations", "repairs", "after"):
        table.add_column(column)
    examples: list[str] = []
    recorded = load_transcript(session_file).conversations[0]
    _process(recorded, label="recorded", out_dir=out_dir, apis=wire.APIS, table=table, examples=examples)
    if include_own:
        for path in _own_sessions():
            try:
                own = [c for c in load_transcript(path).conversations if not c.sidechain]
            except ToolbudgetError as exc:  # a user's own file may be in a format we do not read
                console.print(f"Skipped your session {path}: {exc}")
                continue
            if own:
                console.print(f"Also processing your newest session: {path}")
                _process(
                    own[-1],
                    label="own",
                    out_dir=out_dir,
                    apis=("anthropic", "openai-chat"),
                    table=table,
                    examples=examples,
                )
    console.print(table)
    for line in examples:
        console.print(f"what the provider would have said, {line}", markup=False, highlight=False)
    _compact(recorded, out_dir, console)
    console.print(f"Bodies before and after repair and compaction are in {out_dir}{os.sep}")


def _compact(conversation: Conversation, out_dir: Path, console: Console) -> None:
    """Budget the recorded session, show what was cut, and recall one cut byte for byte."""
    body = to_request(conversation, "anthropic", model="recorded-by-toolbudget-demo")
    policy = Policy.load()
    store = f"dir:{(out_dir / 'store').resolve()}"
    with Session("demo", store=store, policy=policy) as session:
        managed = session.manage(body, "anthropic")
        report = managed.report
        (out_dir / "recorded.anthropic.managed.json").write_bytes(dumps(managed.body, indent=True))
        table = Table(title="compaction (anthropic): results over their cap become previews")
        for column in ("tool", "kind", "chars before", "chars after", "key"):
            table.add_column(column)
        for cut in report.cuts:
            table.add_row(cut.tool or "?", cut.kind, f"{cut.before:,}", f"{cut.after:,}", cut.key or "(lost)")
        console.print(table)
        console.print(
            f"whole request: {report.chars_before:,} -> {report.chars_after:,} chars, "
            f"~{report.tokens_before:,} -> ~{report.tokens_after:,} tokens; "
            f"{report.results_cut} of {report.results_seen} results cut, {len(report.repairs)} repair(s)"
        )
        kept = [c for c in report.cuts if c.key]
        if not kept:
            return
        cut = max(kept, key=lambda c: c.before)
        shown = _shown_result(managed.body, cut.key or "")
        console.rule(f"what the model sees of the {cut.tool} result ({cut.kind}, {cut.after:,} chars)")
        console.print(_excerpt(shown), markup=False, highlight=False)
        console.rule(f"toolbudget_recall(key={cut.key!r}, lines='1:8')")
        console.print(session.recall(cut.key or "", lines=(1, 8)), markup=False, highlight=False)
        original = session.original(cut.key or "")
        exact = original in _original_results(body)
        console.print(
            f"recalled original: {len(original):,} chars, byte for byte equal to the tool's output: {exact}"
        )


def _result_blocks(body: dict[str, Any]) -> list[str]:
    """The text of every tool_result block of an Anthropic body."""
    out = []
    for message in body["messages"]:
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            if block.get("type") == "tool_result":
                inner = block.get("content") or ""
                out.append(inner if isinstance(inner, str) else "".join(b.get("text", "") for b in inner))
    return out


def _shown_result(body: dict[str, Any], key: str) -> str:
    return next((text for text in _result_blocks(body) if key in text), "")


def _original_results(body: dict[str, Any]) -> set[str]:
    return set(_result_blocks(body))


def _excerpt(text: str, room: int = 2400) -> str:
    """Enough of a preview to see its shape on a terminal: its start, its marker, its end.

    Each piece is shown where it is in the text, and a piece that overlaps
    another is merged with it, so the marker appears once, in its place (at
    the top of a JSON preview, for one), as the model reads it; ``⋮`` stands
    for what the terminal leaves out, never for a cut.
    """
    if len(text) <= room:
        return text
    third = room // 3
    spans = [(0, third), (len(text) - third, len(text))]
    found = find_markers(text)
    if found:
        spans.append((max(0, found[0].start - third // 4), min(len(text), found[0].end + third // 4)))
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return "\n   ⋮\n".join(text[start:end] for start, end in merged)
