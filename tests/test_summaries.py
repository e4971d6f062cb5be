"""What a one-line summary tells the model must be true.

The summary of an old result is all the model keeps of it, so each of its
parts is checked against real results: the exit status only where an agent
states one for a command, error lines only from an error, a log or a test
run, paths shortened in the middle, the content kind (a labelled set of real
results from the shared trajectories), and a command's last line of output.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from conftest import trajectories_dir
from toolbudget import load_transcript, to_request
from toolbudget.compaction import (
    _ERROR_LINE,
    error_lines,
    exit_status,
    key_argument,
    last_line,
    result_kind,
    summarize,
)
from toolbudget.marker import MARKER_RE, find_markers, marker_line
from toolbudget.model import Conversation, Message, Text, ToolCall, ToolResult, text_of
from toolbudget.policy import Policy
from toolbudget.previews import detect
from toolbudget.session import Session

EAGER = Policy(compaction="eager")

CC = "claude-code/tests/integration/session/fixtures/"
CC_A = CC + "session-196820da.jsonl", "196820da-1026-4b6f-a513-a6aae42da1a6"
CC_B = CC + "session-624a4a58.jsonl", "624a4a58-b34c-462d-a70d-13421c8125a8"
CC_SUB = CC + "claude/incremental-subagents/turn-2/subagents/agent-a485154.jsonl", "agent-a485154"
CX = (
    "codex-cli/src/agents/plugins/codex/__tests__/fixtures/"
    "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl",
    "019e1625-789d-76c0-80ab-3724b5ddb799",
)
GM = (
    "gemini-cli/tests/integration/metrics/fixtures/gemini/session-2025-12-01T21-45-5b959dae.json",
    "5b959dae-8655-4cd1-b10f-720b8c336ea2",
)
OH = "openhands/evaluation/benchmarks/multi_swe_bench/examples/output.jsonl"
MS = "mini-swe-agent/swebench_results/20251118_gemini-3-pro-74pct/trajs/"
TAU = "tau-bench/historical_trajectories/gpt-4o-airline.json"
TAU2 = "tau2-bench/results/whissle/airline_run1.json", "task-20-trial-0"


def ms(instance: str) -> tuple[str, str]:
    return f"{MS}{instance}/{instance}.traj.json", instance


# (file, conversation) + call id -> the kind a person reading the result gives it.
LABELLED: tuple[tuple[tuple[str, str], str, str], ...] = (
    # Claude Code
    (CC_A, "toolu_bdrk_01438ErHkrDjbdkZCVqT1iCj", "grep"),  # grep -n in one file: hits, not a view
    (CC_A, "toolu_bdrk_019QMPtsqC9pKoEZe7gpzzJm", "file-listing"),  # ls -la
    (CC_A, "toolu_bdrk_01EVb8Dk3J64yxbVgGMVKMY8", "file-listing"),  # find
    (CC_A, "toolu_bdrk_01Dj7Qb47emTzGNVJBhmMWTN", "file-view"),  # Read of CLAUDE.md, numbered
    (CC_A, "toolu_bdrk_01V1evZn7McWSwxtJHAegsJ9", "file-listing"),  # Grep, files_with_matches
    (CC_B, "toolu_bdrk_014VzRLMz4RS35XdgWxBiS52", "file-view"),  # Read of a .ts file
    (CC_B, "toolu_bdrk_01QLDaU4KVfNkF8FbPdJUaow", "file-view"),  # Edit: the edited snippet
    (CC_B, "toolu_bdrk_019vUunR6hKw43LAwHkPqfbB", "grep"),  # Grep -C in one file: N- and N: lines
    (
        (CC + "session-9eda1058.jsonl", "9eda1058-9706-484a-b992-d03f9cfa2546"),
        "toolu_bdrk_0173E8p3RpvZR9nGfxQ29YBN",
        "markdown",  # a sub-agent's report
    ),
    (
        (CC + "claude/incremental-subagents/turn-2.jsonl", "e9fb405b-169f-40eb-9396-7e75076f045d"),
        "toolu_bdrk_019PUUtqzQg8U5ogfuyQ7yLV",
        "text",  # a two-line sub-agent report
    ),
    (CC_SUB, "toolu_bdrk_01MwvTGkXqo5ygyTJCjq2gjK", "text"),  # <tool_use_error>: an error message
    # <persisted-output> preview of `grep -A 5` over package.json files, no names or numbers
    (CC_SUB, "toolu_bdrk_01CaTZ658VzFpoM9YptVLjGg", "text"),
    (CC_SUB, "toolu_bdrk_01JiJRqvrzrWM67HdyS2fyWz", "grep"),  # Grep, content mode
    # Codex
    (CX, "call_QazIeAavKevvIILVQkrDdKKT", "markdown"),  # sed -n of a SKILL.md
    (CX, "call_6YhDEiPvTJjMNdn6h89qlZOC", "text"),  # rg: No such file or directory
    (CX, "call_HLGfWf9aBTsd55NyJbYsVKD9", "grep"),  # rg -n hits
    (CX, "call_Z2ilb7DXdFn3Rxj2BOpCxlv5", "typescript"),  # sed -n of a .ts file
    (CX, "call_hxHUTWaQIHRyU83xxcpBVh3f", "diff"),  # git diff
    (CX, "call_eEYTuvEgNs0NburlP4VStrmz", "json"),  # cat package.json
    (CX, "call_PV1xTCr0mE6w98HWoGy5bB3X", "file-view"),  # nl -ba | sed -n
    # Gemini CLI
    (GM, "read_file-1764625560264-22036414d7d65", "markdown"),  # a .txt written in Markdown
    (GM, "list_directory-1764625554423-6b5d2c6179cc4", "file-listing"),
    # OpenHands
    ((OH, "ponylang__ponyc-4595"), "toolu_01", "file-listing"),  # ls -l
    ((OH, "ponylang__ponyc-4595"), "toolu_02", "file-listing"),  # ls -l of folders only
    ((OH, "ponylang__ponyc-4595"), "toolu_17", "text"),  # make: a failed build
    ((OH, "ponylang__ponyc-4593"), "toolu_02", "text"),  # ls: cannot access
    ((OH, "ponylang__ponyc-4593"), "toolu_17", "grep"),  # grep -r
    ((OH, "ponylang__ponyc-4588"), "toolu_17", "file-view"),  # str_replace_editor view
    # mini-swe-agent: scripts' stdout, which reads as `Name: value` lines
    (ms("psf__requests-1142"), "call_0004", "text"),
    (ms("pylint-dev__pylint-6528"), "call_0020", "text"),
    (ms("pylint-dev__pylint-6386"), "call_0002", "text"),
    (ms("django__django-13837"), "call_0014", "text"),
    (ms("sympy__sympy-13551"), "call_0017", "text"),  # bash: pytest: command not found
    (ms("django__django-13810"), "call_0013", "text"),
    # mini-swe-agent: files, hits and runs
    (ms("django__django-13809"), "call_0007", "python"),  # sed -n of a .py file
    (ms("sphinx-doc__sphinx-8269"), "call_0003", "python"),  # cat conf.py (comments only at the top)
    (ms("django__django-12406"), "call_0011", "grep"),  # grep -n in one file
    (ms("astropy__astropy-13033"), "call_0024", "grep"),  # grep -n in one file
    (ms("sphinx-doc__sphinx-9673"), "call_0009", "html"),  # cat index.html
    (ms("django__django-12406"), "call_0031", "html"),  # a script that prints HTML
    (ms("pytest-dev__pytest-6197"), "call_0059", "text"),  # cat pytest.ini
    (ms("astropy__astropy-13033"), "call_0000", "file-listing"),  # ls -R
    (ms("astropy__astropy-13033"), "call_0017", "stack-trace"),
    (ms("astropy__astropy-13033"), "call_0022", "pytest"),
    (ms("astropy__astropy-13033"), "call_0030", "diff"),
    (ms("pylint-dev__pylint-6528"), "call_0004", "compiler-errors"),  # pylint's diagnostics
    # SWE-agent
    (("swe-agent/trajectories/demonstrations/ctf/crypto/katy.traj", "katy"), "call_0000", "text"),  # `file`
    # tau-bench
    ((TAU, "task-0-trial-0"), "call_To6jjkKrBKVnDV0OhCSBvoMz", "text"),  # Error: payment amount ...
    ((TAU, "task-3-trial-0"), "call_RiPfluDmybt1YYSdBmx1huvw", "json"),
    ((TAU, "task-23-trial-2"), "call_7MqMjJMaXLRTpdPdzCjzjfpE", "text"),  # calculate: `368.0`
)

# Where detection still disagrees with the label: (what it says, why).
KNOWN_MISSES: dict[tuple[str, str], tuple[str, str]] = {
    (GM[1], "list_directory-1764625554423-6b5d2c6179cc4"): (
        "text",
        "Gemini CLI's `Directory listing for ...` header and `[DIR] name` lines are not a listing shape",
    ),
    ("ponylang__ponyc-4595", "toolu_02"): (
        "text",
        "`ls -l` of folders only: no name has a dot or a slash, so nothing looks like a path",
    ),
}


@cache
def _conversation(file: str, conversation: str) -> Conversation:
    for found in load_transcript(trajectories_dir() / file).conversations:
        if found.id == conversation:
            return found
    raise AssertionError(f"{file}: no conversation {conversation}")


def real(where: tuple[str, str], call_id: str) -> tuple[str | None, ToolCall | None, str, bool]:
    """(tool, call, text, is_error) of the result answering ``call_id`` in a shared transcript."""
    conversation = _conversation(*where)
    calls = {p.id: p for m in conversation.messages for p in m.parts if isinstance(p, ToolCall)}
    for message in conversation.messages:
        for part in message.parts:
            if isinstance(part, ToolResult) and part.call_id == call_id:
                call = calls.get(call_id)
                tool = call.name if call is not None else part.name
                return tool, call, text_of(part.content), part.is_error
    raise AssertionError(f"{where}: no result for {call_id}")


def detail_of(summary_text: str) -> str:
    (marker,) = find_markers(summary_text.split("\n", 1)[0])
    return marker.detail


def summary_part(detail: str, name: str) -> str | None:
    """The part of a summary detail that starts with ``name`` (``exit``, ``last:``)."""
    for part in detail.split(", "):
        if part.startswith(name):
            return part
    return None


# --- the labelled set -------------------------------------------------------------------


@pytest.mark.shared
def test_labelled_real_results_are_detected_as_labelled(trajectories: Path) -> None:
    agree = 0
    for where, call_id, expected in LABELLED:
        tool, call, text, is_error = real(where, call_id)
        kind = result_kind(tool, call, text, is_error=is_error)
        key = (where[1], call_id)
        if key in KNOWN_MISSES:
            assert kind == KNOWN_MISSES[key][0], f"{key}: now {kind!r}; drop it from KNOWN_MISSES"
            continue
        assert kind == expected, f"{where[0]} {call_id}: expected {expected!r}, detected {kind!r}"
        agree += 1
    assert agree == len(LABELLED) - len(KNOWN_MISSES) and agree >= 45


# --- 1. the exit status -----------------------------------------------------------------

EDITED = (
    "The file /repo/src/runner.py has been updated. Here's the result of running `cat -n` on a "
    "snippet of the edited file:\n"
    "    40→def run(cmd):\n"
    '    41→    """Run cmd; returns exit_code (0 = success)."""\n'
    "    42→    result = subprocess.run(cmd)\n"
    "    43→    return result.returncode\n"
)


def test_a_file_or_an_output_that_mentions_an_exit_code_states_no_status() -> None:
    edit = ToolCall("e1", "Edit", {"file_path": "/repo/src/runner.py", "old_string": "a", "new_string": "b"})
    assert exit_status(EDITED, "Edit") is None
    assert summary_part(summarize("Edit", edit, EDITED).detail, "exit") is None
    # An exec tool's own output that talks about exit codes states no status either.
    log = "".join(f"step {i} done\n" for i in range(30)) + "worker: Process exited with code 3\n"
    bash = ToolCall("b1", "Bash", {"command": "cat worker.log"})
    assert exit_status(log, "Bash") is None
    assert summary_part(summarize("Bash", bash, log).detail, "exit") is None
    # mini-swe-agent: a command killed at its time limit has no status, and says it timed out.
    killed = "The last command <command>pytest -x</command> timed out and has been killed.\n"
    killed += "The output of the command was:\n <output>\ncollected 12 items\n</output>"
    detail = summarize("bash", ToolCall("b", "bash", {"command": "pytest -x"}), killed).detail
    assert summary_part(detail, "exit") is None and summary_part(detail, "timed out") == "timed out"
    # mini-swe-agent: the status is its <returncode>, whatever the output says at its end.
    wrapped = "<returncode>0</returncode>\n<output>\n" + log + "exit status 1\n</output>"
    assert exit_status(wrapped, "bash") == "0"


@pytest.mark.parametrize(
    ("tool", "text", "is_error", "status"),
    [
        ("bash", "<returncode>2</returncode>\n<output>\nusage: x\n</output>", False, "2"),
        ("exec_command", "Exit code: 1\nWall time: 0.2 seconds\nOutput:\nboom\n", False, "1"),
        (
            "write_stdin",
            "Chunk ID: ab12\nWall time: 0.1 seconds\nProcess exited with code 0\nOutput:\nok\n",
            False,
            "0",
        ),
        ("shell", '{"output":"ok\\n","metadata":{"exit_code":4,"duration_seconds":0.1}}', False, "4"),
        ("execute_bash", "make: *** [all] Error 2\n[The command completed with exit code 2.]", False, "2"),
        ("Bash", "Exit code 127\nbash: nope: command not found", True, "127"),
        ("Bash", "Exit code 127\nbash: nope: command not found", False, None),  # not an error result
        ("apply_patch", '{"output":"Done","metadata":{"exit_code":0,"duration_seconds":0.1}}', False, None),
        ("Read", "<returncode>0</returncode>\n<output>\nx\n</output>", False, None),  # a file's text
    ],
)
def test_the_status_is_read_where_each_agent_states_it(
    tool: str, text: str, is_error: bool, status: str | None
) -> None:
    assert exit_status(text, tool, is_error=is_error) == status


def test_an_old_edit_summary_in_a_managed_session_claims_no_exit_status() -> None:
    body = EDITED + "".join(f"    {n}→    step_{n}()  # exit code 0 when done\n" for n in range(44, 200))
    conversation = _session_of("Edit", {"file_path": "/repo/src/runner.py"}, [body] * 6)
    text = _managed_results(conversation)[0]
    detail = detail_of(text)
    assert detail.startswith("Edit `/repo/src/runner.py`") and "exit" not in detail
    assert "\n" not in text  # no error lines under it either


@pytest.mark.shared
def test_real_results_state_the_status_their_agent_gave_and_no_other(trajectories: Path) -> None:
    cases = [
        (CX, "call_6YhDEiPvTJjMNdn6h89qlZOC", "exit 2"),  # Codex: Process exited with code 2
        (ms("pylint-dev__pylint-6386"), "call_0002", "exit 2"),  # <returncode>2</returncode>
        (CC_A, "toolu_bdrk_012BHUXZFxnS5TYAjaP8QiCY", "exit 1"),  # Claude Code: Exit code 1, is_error
        # Codex apply_patch is an edit: the exit_code in its JSON metadata is no command's status.
        (CX, "call_0gOiGGSkJEBvvlrXtBn0xzwL", None),
        (CC_B, "toolu_bdrk_01QLDaU4KVfNkF8FbPdJUaow", None),  # Claude Code Edit
    ]
    for where, call_id, expected in cases:
        tool, call, text, is_error = real(where, call_id)
        assert summary_part(summarize(tool, call, text, is_error=is_error).detail, "exit") == expected


def _session_of(tool: str, arguments: dict[str, object], bodies: list[str]) -> Conversation:
    messages = [Message("user", (Text("go"),))]
    for n, body in enumerate(bodies):
        call = ToolCall(f"c{n}", tool, arguments)
        messages.append(Message("assistant", (Text(f"step {n}"), call)))
        messages.append(Message("tool", (ToolResult(call.id, (Text(body),), False, tool),)))
    return Conversation("s", "test", tuple(messages))


def _managed_results(conversation: Conversation) -> list[str]:
    with Session("summaries", store="memory:", policy=EAGER) as session:
        body = session.manage(to_request(conversation, "anthropic", model="m"), "anthropic").body
    out = []
    for message in body["messages"]:
        if isinstance(message["content"], list):
            for block in message["content"]:
                if block.get("type") == "tool_result":
                    content = block["content"]
                    out.append(content if isinstance(content, str) else content[0]["text"])
    return out


# --- 2. error lines -----------------------------------------------------------------------

SOURCE = (
    "import { readFile } from 'node:fs/promises';\n\n"
    "export async function loadSession(path: string): Promise<Session> {\n"
    "  const raw = await readFile(path, 'utf8');\n"
    "  if (!raw.trim()) {\n"
    "    throw new Error('Empty session file');\n"
    "  }\n"
    "  try {\n"
    "    return JSON.parse(raw) as Session;\n"
    "  } catch {\n"
    "    // Failed to parse, use defaults\n"
    "    return { id: 'default', turns: [] };\n"
    "  }\n"
    "}\n"
)


def test_edits_and_reads_of_source_keep_no_error_lines() -> None:
    view = "".join(f"{n:6d}→{line}\n" for n, line in enumerate(SOURCE.splitlines(), 1))
    edited = "The file /repo/src/session.ts has been updated. Here's the result of running `cat -n` on a "
    edited += "snippet of the edited file:\n" + view
    edit = ToolCall("e", "Edit", {"file_path": "/repo/src/session.ts", "old_string": "x", "new_string": "y"})
    read = ToolCall("r", "Read", {"file_path": "/repo/src/session.ts"})
    cat = ToolCall("c", "bash", {"command": "cat src/session.ts"})
    assert summarize("Edit", edit, edited).errors == ()
    assert summarize("Read", read, view).errors == ()
    assert summarize("bash", cat, f"<returncode>0</returncode>\n<output>\n{SOURCE}</output>").errors == ()


def test_errors_logs_and_test_runs_keep_their_error_lines() -> None:
    failed = ToolCall("e", "Edit", {"file_path": "/repo/a.py"})
    message = "String to replace not found in file.\nString: raise ValueError('x')"
    # An error result's first line is its message, whether or not it says "error".
    assert summarize("Edit", failed, message, is_error=True).errors == (
        "String to replace not found in file.",
        "String: raise ValueError('x')",
    )
    failed_run = "Exit code 1\nnpm ERR! missing script: lint"
    bash = ToolCall("b", "Bash", {"command": "npm run lint"})
    assert summarize("Bash", bash, failed_run, is_error=True).errors == ("npm ERR! missing script: lint",)
    run = ToolCall("p", "bash", {"command": "python -m pytest tests -x"})
    log = (
        "<returncode>1</returncode>\n<output>\n"
        "============================= test session starts ==============================\n"
        "tests/test_a.py F\n"
        "E       ValueError: bad input\n"
        "=========================== short test summary info ============================\n"
        "FAILED tests/test_a.py::test_one - ValueError: bad input\n"
        "============================== 1 failed in 0.12s ===============================\n"
        "</output>"
    )
    errors = summarize("bash", run, log).errors
    assert "E       ValueError: bad input" in errors
    assert "FAILED tests/test_a.py::test_one - ValueError: bad input" in errors


@pytest.mark.parametrize(
    "line",
    [
        "an ERROR here",
        "Traceback (most recent call last):",
        "IndexError: x",
        "E   assert 1 == 2",
        "tests pass fine",
        "terrorist",
        "panicked at main",
        "fa\u0131led with a dotless i",  # matched by the pattern's case folding, kept by lower()
        "except\u0131on",
        "Faİled",
        "error\u017f and traceba\u212a",
        "erreur \x85 failure",  # two lines, as splitlines reads them
    ],
)
def test_a_line_is_an_error_line_exactly_when_the_error_pattern_finds_something_in_it(line: str) -> None:
    text = f"ok\n{line}\ndone\n"
    assert error_lines(text) == [part.rstrip() for part in text.splitlines() if _ERROR_LINE.search(part)]


@pytest.mark.shared
def test_real_edits_and_file_views_keep_no_error_lines(trajectories: Path) -> None:
    quiet = [
        (CC_B, "toolu_bdrk_01QLDaU4KVfNkF8FbPdJUaow"),  # Edit whose snippet has logger.error(...)
        (CC_B, "toolu_bdrk_011zNu1AgAwSAqWycM2woDWK"),  # Edit: "Edge Cases & Error Handling"
        (ms("astropy__astropy-13033"), "call_0008"),  # cat core.py: raise ValueError(...)
        (ms("astropy__astropy-13033"), "call_0011"),  # a comment, then grep -nC on core.py
        (ms("django__django-13212"), "call_0014"),  # grep hits of `raise ValidationError`
    ]
    for where, call_id in quiet:
        tool, call, text, is_error = real(where, call_id)
        assert "rror" in text
        assert summarize(tool, call, text, is_error=is_error).errors == (), (where, call_id)
    loud = [
        (ms("astropy__astropy-13033"), "call_0017", "ValueError"),  # a script's traceback
        (ms("astropy__astropy-13033"), "call_0022", "AssertionError"),  # a pytest run
        (TAU2, "gem_book_reservation_0", "Error: 1 validation error"),  # an error result
    ]
    for where, call_id, needle in loud:
        tool, call, text, is_error = real(where, call_id)
        errors = summarize(tool, call, text, is_error=is_error).errors
        assert any(needle in line for line in errors), (where, call_id, errors)


@pytest.mark.shared
def test_a_managed_real_edit_summary_lists_no_error_lines(trajectories: Path) -> None:
    tool, call, text, _ = real(CC_B, "toolu_bdrk_011zNu1AgAwSAqWycM2woDWK")
    assert tool == "Edit" and call is not None and len(text) > 3_000
    conversation = _session_of("Edit", dict(call.arguments), [text] * 6)
    summary = _managed_results(conversation)[0]
    assert summary.count("\n") == 0 and detail_of(summary).startswith("Edit `")


# --- 3. paths ---------------------------------------------------------------------------

LONG_PATH = "/Users/user/repo/_bmad/bmm/workflows/bmad-quick-flow/create-tech-spec/instructions.md"


def test_a_long_path_loses_its_middle_and_keeps_its_file_name() -> None:
    shown = key_argument(ToolCall("r", "Read", {"file_path": LONG_PATH}))
    assert len(shown) <= 80 and shown.endswith("/create-tech-spec/instructions.md")
    assert shown.startswith("/Users/user/repo/") and "…" in shown
    name = "a" * 120 + ".md"  # a file name longer than the room: still both of its ends
    shown = key_argument(ToolCall("r", "Read", {"file_path": f"/x/{name}"}))
    assert len(shown) <= 80 and shown.endswith("aaa.md")
    command = "cd /testbed && python -m pytest tests/test_models.py -k 'not slow' -x -q 2>&1 | tail -n 40"
    shown = key_argument(ToolCall("b", "bash", {"command": command}))
    assert (
        len(shown) <= 80
        and shown.startswith("cd /testbed && python -m pytest")
        and shown.endswith("tail -n 40")
    )
    assert key_argument(ToolCall("b", "bash", {"command": "ls"})) == "ls"


@pytest.mark.shared
def test_real_read_summaries_name_their_files(trajectories: Path) -> None:
    for where in (CC_A, CC_B):
        for message in _conversation(*where).messages:
            for call in message.tool_calls():
                path = call.arguments.get("file_path") if isinstance(call.arguments, dict) else None
                if call.name == "Read" and isinstance(path, str):
                    assert key_argument(call).endswith(path.rsplit("/", 1)[-1]), path


# --- 4. content kinds: the cases the labelled set has no real result for ---------------------

SKILL = """---
name: typed-config
description: Use when writing a config loader in TypeScript
---

# Typed config

Load settings with one typed reader.

## Usage

```ts
export interface Settings {
  name: string;
  retries: number;
  verbose: boolean;
}
export type Mode = "fast" | "safe";
const load = (raw: string): Settings => JSON.parse(raw);
```

Keep the reader pure.
"""

REPORT = """Perfect! I now have the full picture. Here is the layout:

## Structure

```
src/
├── cli/
│   ├── index.ts
│   └── commands/
│       ├── setup.ts
│       └── doctor.ts
├── agents/
│   ├── registry.ts
│   └── plugins/
│       └── claude.ts
└── utils/
    └── paths.ts
```

## Findings

- The CLI registers every command in `index.ts`.
"""

VTT = """<persisted-output>
Output too large (61.2KB). Full output saved to: /Users/u/.claude/projects/p/tool-results/toolu_1.txt

Preview (first 2KB):
WEBVTT
Kind: captions
Language: en

00:00:00.030 --> 00:00:02.070 align:start position:0%

so<00:00:00.359><c> today</c><00:00:00.840><c> we</c>

00:00:02.070 --> 00:00:02.080 align:start position:0%
so today we
...
</persisted-output>"""

VOICES = "".join(
    f"00:00:{n:02d}.000 --> 00:00:{n + 1:02d}.000\n<v Roger Bingham>line {n} of the talk</v>\n\n"
    for n in range(20)
)


def test_documents_and_subtitles_are_not_their_quoted_code_or_tags() -> None:
    assert detect(SKILL) == "markdown"  # its TypeScript is in a fence
    assert result_kind("Bash", ToolCall("b", "Bash", {"command": "cat SKILL.md"}), SKILL) == "markdown"
    assert detect(REPORT) == "markdown"  # the tree is a diagram in the report
    assert result_kind("Task", ToolCall("t", "Task", {"prompt": "map the repo"}), REPORT) == "markdown"
    assert detect(VTT) == "text" and detect(VOICES) == "text"
    assert result_kind("Read", ToolCall("r", "Read", {"file_path": "/m/talk.vtt"}), VOICES) == "text"


def test_hints_come_only_from_a_plain_read_of_one_file() -> None:
    py = "x = 1\ny = 2\nprint(x + y)\n"
    assert (
        result_kind("bash", ToolCall("b", "bash", {"command": "sed -n '1,40p' src/app.py"}), py) == "python"
    )
    assert (
        result_kind("bash", ToolCall("b", "bash", {"command": "cd /repo && head -n 5 src/app.py"}), py)
        == "python"
    )
    for command in (
        "cat <<'EOF' > app.py\nx = 1\nEOF",
        "cat a.py b.md",
        "cat app.py | grep x",
        "python app.py",
    ):
        assert result_kind("bash", ToolCall("b", "bash", {"command": command}), py) == "text", command
    written = "File created successfully at: /repo/NOTES.md"
    assert result_kind("Write", ToolCall("w", "Write", {"file_path": "/repo/NOTES.md"}), written) == "text"
    missing = "<tool_use_error>File does not exist.</tool_use_error>"
    assert (
        result_kind("Read", ToolCall("r", "Read", {"file_path": "/x/a.ts"}), missing, is_error=True) == "text"
    )
    yaml_file = "name: ci\non:\n  push:\n    branches: [main]\njobs:\n  test:\n    runs-on: ubuntu-latest\n"
    assert detect(yaml_file) == "yaml"  # nested blocks: YAML by its content alone
    flat = "name: ci\nversion: 3\nowner: team\n"
    assert detect(flat) == "text"
    assert result_kind("Read", ToolCall("r", "read_file", {"file_path": "/x/ci.yml"}), flat) == "yaml"


# --- 5. the last line of a command's output -----------------------------------------------


def test_runs_of_one_command_are_told_apart_by_their_last_line() -> None:
    endings = ["Issue reproduced: total is 3", "Issue reproduced: total is 2", "Issue not reproduced; [ok]"]
    bodies = [
        "<returncode>0</returncode>\n<output>\n"
        + "".join(f"checking case {n}\n" for n in range(400))
        + f"{end}\n\n</output>"
        for end in endings
    ]
    bodies += [bodies[-1]] * 5  # later turns, so the first three reach the summary level
    conversation = _session_of("bash", {"command": "python reproduce_issue.py"}, bodies)
    summaries = [detail_of(text) for text in _managed_results(conversation)[:3]]
    assert len(set(summaries)) == 3
    lasts = [summary_part(detail, "last: ") for detail in summaries]
    assert lasts == [
        "last: Issue reproduced: total is 3",
        "last: Issue reproduced: total is 2",
        "last: Issue not reproduced ok",
    ]


def test_the_last_line_is_the_commands_own_and_marker_safe() -> None:
    assert last_line("<returncode>0</returncode>\n<output>\nfirst\nlast one\n\n</output>") == "last one"
    codex = "Chunk ID: ab12\nWall time: 0.1 seconds\nProcess exited with code 0\nOutput:\nbuilt in 3s\n"
    assert last_line(codex) == "built in 3s"
    assert last_line("compiled\n[The command completed with exit code 0.]") == "compiled"
    assert last_line('{"output":"a\\nb done\\n","metadata":{"exit_code":0,"duration_seconds":1}}') == "b done"
    call = ToolCall("b", "bash", {"command": "./run.sh"})
    text = "<returncode>0</returncode>\n<output>\n" + "x" * 300 + " [done]; exit\n</output>"
    detail = summarize("bash", call, text).detail
    line = marker_line(10, 20, key="a" * 32, detail=detail)
    found = MARKER_RE.fullmatch(line)
    assert found is not None and found["detail"] == detail
    last = summary_part(detail, "last: ")
    assert last is not None and len(last) <= len("last: ") + 100 and last.endswith("done exit")
    # A file or a tool that is no command gets no last line.
    assert (
        summary_part(
            summarize("Read", ToolCall("r", "Read", {"file_path": "/a.py"}), "x = 1\n").detail, "last"
        )
        is None
    )


@pytest.mark.shared
def test_real_reruns_of_one_command_get_distinct_summaries(trajectories: Path) -> None:
    """Same command, different output: the summaries differ beyond their sizes."""
    tool, call, first, is_error = real(ms("django__django-12754"), "call_0006")
    _, call_b, second, _ = real(ms("django__django-12754"), "call_0034")
    a = summarize(tool, call, first, is_error=is_error).detail
    b = summarize(tool, call_b, second).detail
    assert summary_part(a, "last: ") == "last: Applying myapp.0001_initial... OK"
    assert summary_part(b, "last: ") == "last: Applying myapp.0002_auto_20251118_1737... OK"
