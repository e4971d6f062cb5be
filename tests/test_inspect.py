"""``toolbudget inspect``: its numbers are replay's, it reads every input, and its reports are stable.

The numbers are checked against ``replay`` itself (the bands add up to the
prompt replay measures, the schedules are replay's totals); the command is run
on one shared transcript of every format and on a body of every API; the
reports are byte-identical from run to run; and the HTML report is opened in a
real headless Chromium, which must render every chart without an error.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from io import StringIO
from pathlib import Path
from typing import Any

import orjson
import pytest
from rich.console import Console

from pngread import read_png
from toolbudget import to_request, wire
from toolbudget.errors import InputError
from toolbudget.inspection import SCHEDULES, InspectedSession, Inspection, inspect_conversation, load_session
from toolbudget.inspection_view import render, shown_turns
from toolbudget.model import Conversation, Message, Text, ToolCall, ToolDef, ToolResult
from toolbudget.policy import Policy
from toolbudget.replay import replay_requests, replay_session

SECTIONS = (
    "Tokens per request, by band",
    "The last request, by band",
    "Largest tool results",
    "Results by kind",
    "Schedules over the whole session",
    "Per request: tokens sent, billed and cache-hit share by schedule",
)


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "toolbudget.cli", *args],
        capture_output=True,
        check=False,
        env={**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})},
    )


def one_line_error(done: subprocess.CompletedProcess[bytes]) -> str:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("toolbudget: error: "), done.stderr
    return lines[0]


def session_conversation(turns: int = 14) -> Conversation:
    """A made-up session with large results of several kinds, so results are cut and compacted."""
    messages: list[Message] = [Message("user", (Text("Find out why the build fails and fix it."),))]
    for t in range(turns):
        if t % 3 == 0:
            name, args = "Bash", {"command": f"pytest tests/test_{t}.py"}
            out = "\n".join(f"tests/test_{t}.py::test_case_{i} PASSED" for i in range(900))
            out += f"\nFAILED tests/test_{t}.py::test_last - AssertionError\n==== 1 failed, 900 passed ===="
        elif t % 3 == 1:
            name, args = "Read", {"file_path": f"/repo/data_{t}.json"}
            out = json.dumps([{"id": i, "name": f"item {i}", "tags": ["a", "b"]} for i in range(700)])
        else:
            name, args = "Grep", {"pattern": "TODO"}
            out = "\n".join(f"src/module_{i}.py:{i}: # TODO look at {t}" for i in range(400))
        call = ToolCall(f"call_{t}", name, args)
        messages.append(Message("assistant", (Text(f"Step {t}: running {name}."), call)))
        messages.append(Message("tool", (ToolResult(call.id, (Text(out),), False, name),)))
    messages.append(Message("assistant", (Text("Done: the last test is fixed."),)))
    tools = tuple(
        ToolDef(n, f"The {n} tool.", {"type": "object", "properties": {"x": {"type": "string"}}})
        for n in ("Bash", "Read", "Grep")
    )
    return Conversation("made-up", "test", tuple(messages), (Text("You are a careful engineer."),), tools)


def inspected(conversation: Conversation, api: str = "anthropic") -> Inspection:
    return inspect_conversation(InspectedSession("made-up.jsonl", "transcript: test", conversation, api))


def terminal(inspection: Inspection) -> str:
    out = StringIO()
    render(inspection, Console(file=out, width=120, color_system=None))
    return out.getvalue()


# --------------------------------------------------------------------------- the numbers are replay's


@pytest.mark.parametrize("api", wire.APIS)
def test_the_bands_add_up_to_the_prompt_replay_measures(api: str) -> None:
    conversation = session_conversation()
    result = inspected(conversation, api)
    unmanaged = replay_requests(conversation, api, None)
    assert len(result.turns) == unmanaged.requests == 15
    definitions = result.bands.index("tool definitions")
    for turn, stats in zip(result.turns, unmanaged.turns, strict=True):
        assert turn.prompt_chars == stats.chars
        assert sum(turn.chars) - turn.chars[definitions] == stats.chars, (api, turn.turn)
        assert turn.chars[definitions] > 0
    last = dict(zip(result.bands, result.turns[-1].chars, strict=True))
    # Each tool's results are a band of their own, and they are most of the session.
    assert {"results: Bash", "results: Read", "results: Grep"} <= set(result.bands)
    assert last["results: Bash"] > last["user"] and last["results: Read"] > last["assistant"]
    assert last["system"] > 0


def test_the_schedules_are_replays_own_totals() -> None:
    conversation = session_conversation()
    result = inspected(conversation)
    assert [s.name for s in result.schedules] == list(SCHEDULES)
    policy = Policy.load()
    cache_aware = replay_session(conversation, "anthropic", replace(policy, compaction="cache-aware"))
    off = replay_session(conversation, "anthropic", replace(policy, compaction="off"))
    assert result.schedule("as sent").totals == cache_aware.unmanaged
    assert result.schedule("eager").totals == cache_aware.eager
    assert result.schedule("cache-aware").totals == cache_aware.managed
    assert result.schedule("cache-aware").events == cache_aware.events
    assert result.schedule("off").totals == off.managed
    for schedule in result.schedules:
        billed = sum(schedule.billed(t) for t in schedule.turns)
        assert billed == pytest.approx(schedule.totals.billed)
        hits = [schedule.hit_share(t) for t in schedule.turns]
        assert hits[0] == 0.0 and all(0.0 <= h <= 1.0 for h in hits)
    # The session is large enough that managing it changes what is sent, and eager rewrites more.
    sent = {s.name: s.totals.tokens_sent for s in result.schedules}
    assert sent["as sent"] > sent["off"] > sent["eager"]
    assert len(result.schedule("eager").events) > len(result.schedule("cache-aware").events)


def test_the_largest_results_are_ranked_with_their_kinds() -> None:
    result = inspected(session_conversation())
    assert result.results == 14
    sizes = [r.chars for r in result.largest]
    assert sizes == sorted(sizes, reverse=True) and len(sizes) == 12
    kinds = {r.tool: r.kind for r in result.largest}
    assert kinds == {"Bash": "pytest", "Read": "json", "Grep": "grep"}
    first = result.largest[0]
    assert first.argument.startswith(("pytest tests/", "/repo/data_", "TODO"))
    # The request that first holds the result: the one sent right after it came back.
    assert all(r.turn >= 1 for r in result.largest)
    assert sum(n for _, n, _ in result.kinds) == 14


def test_a_body_is_inspected_as_the_history_it_holds() -> None:
    conversation = session_conversation(4)
    for api in wire.APIS:
        body = to_request(conversation, api)
        from_body = inspect_conversation(_body_session(body, api))
        from_transcript = inspected(conversation, api)
        # The history ends with an assistant turn, which no request holds; the rest is the same.
        assert [t.prompt_chars for t in from_body.turns] == [t.prompt_chars for t in from_transcript.turns]
        assert from_body.largest == from_transcript.largest, api


def _body_session(body: dict[str, Any], api: str) -> InspectedSession:
    request = wire.parse(body, api)
    from toolbudget.inspection import _neutral

    return InspectedSession(
        "body.json",
        f"body: {api}",
        Conversation("body", "body.json", _neutral(request.messages), request.system, request.tools),
        api,
    )


def test_inspecting_never_changes_the_body_file(tmp_path: Path) -> None:
    body = to_request(session_conversation(3), "openai-chat")
    path = tmp_path / "body.json"
    path.write_bytes(orjson.dumps(body))
    before = path.read_bytes()
    session = load_session(path)
    assert session.kind == "body: openai-chat" and session.api == "openai-chat"
    inspect_conversation(session)
    assert path.read_bytes() == before


def test_long_sessions_show_every_kth_request_and_the_last() -> None:
    assert shown_turns(5) == [0, 1, 2, 3, 4]
    picked = shown_turns(500)
    assert len(picked) <= 60 and picked[0] == 0 and picked[-1] == 499
    assert len({b - a for a, b in itertools.pairwise(picked[:-1])}) == 1


# --------------------------------------------------------------------------- the terminal view


def test_the_terminal_view_has_every_section_and_is_the_same_every_time() -> None:
    result = inspected(session_conversation())
    text = terminal(result)
    for section in SECTIONS:
        assert section in text
    assert text == terminal(inspected(session_conversation()))
    # One bar per request: its number, the bar, and its tokens with the tool definitions.
    lines = text.splitlines()
    start = lines.index("Tokens per request, by band") + 1
    for turn, line in zip(result.turns, lines[start:], strict=False):
        number, *bar, total = line.split()
        assert (int(number), total) == (turn.turn, f"{turn.total_tokens:,}")
        assert set("".join(bar)) <= set("█▓▒░#%=+*:-")
    widest = max(len(line.split()[-2]) for line in lines[start : start + len(result.turns)])
    assert widest > 60  # the largest request fills the width


def test_the_command_reads_every_api_body(tmp_path: Path) -> None:
    conversation = session_conversation(5)
    for api in wire.APIS:
        path = tmp_path / f"{api}.json"
        path.write_bytes(orjson.dumps(to_request(conversation, api)))
        done = cli("inspect", str(path))
        assert done.returncode == 0, done.stderr
        text = done.stdout.decode()
        assert f"body: {api}" in text and f"requests built for {api}" in text
        for section in SECTIONS:
            assert section in text, (api, section)


def test_the_command_reads_the_wire_examples() -> None:
    examples = sorted((Path(__file__).parent / "wire_examples").glob("*/*.json"))
    assert len({p.parent.name for p in examples}) >= 4
    for path in examples:
        session = load_session(path, api=path.parent.name)
        assert session.kind == f"body: {path.parent.name}", path
        try:
            result = inspect_conversation(session)
        except InputError as exc:  # an example without a single message
            assert "no request to inspect" in str(exc) and not session.conversation.messages, path
            continue
        assert terminal(result).count("Tokens per request") == 1


def test_bad_input_is_one_line_and_status_2(tmp_path: Path) -> None:
    assert "does not exist" in one_line_error(cli("inspect", str(tmp_path / "missing.jsonl")))
    (tmp_path / "notes.txt").write_text("just some words\n")
    one_line_error(cli("inspect", str(tmp_path / "notes.txt")))
    body = orjson.dumps(to_request(session_conversation(2), "anthropic"))
    (tmp_path / "two.jsonl").write_bytes(body + b"\n" + body + b"\n")
    assert "one at a time" in one_line_error(cli("inspect", str(tmp_path / "two.jsonl")))
    (tmp_path / "one.json").write_bytes(body)
    assert "no conversations to choose" in one_line_error(
        cli("inspect", str(tmp_path / "one.json"), "--conversation", "1")
    )
    (tmp_path / "empty.json").write_bytes(b'{"model": "m", "max_tokens": 5, "messages": []}')
    assert "no request to inspect" in one_line_error(
        cli("inspect", str(tmp_path / "empty.json"), "--api", "anthropic")
    )
    one_line_error(cli("inspect", str(tmp_path / "one.json"), "--api", "nonsense"))
    (tmp_path / "settings.json").write_text('{"theme": "dark"}')
    assert "neither a transcript in a known format nor a request body" in one_line_error(
        cli("inspect", str(tmp_path / "settings.json"))
    )


_WITHOUT_REPORT = (
    "import sys; sys.modules['altair'] = None; sys.modules['vl_convert'] = None; "
    "from toolbudget.cli import main; sys.argv = ['toolbudget', *sys.argv[1:]]; main()"
)


def test_without_the_report_extra_the_charts_say_what_to_install(tmp_path: Path) -> None:
    path = tmp_path / "body.json"
    path.write_bytes(orjson.dumps(to_request(session_conversation(3), "anthropic")))

    def run(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-c", _WITHOUT_REPORT, "inspect", str(path), *args],
            capture_output=True,
            check=False,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )

    for flag in ("--html", "--png"):
        line = one_line_error(run(flag, str(tmp_path / "out")))
        assert "pip install 'toolbudget[report]'" in line
        assert not (tmp_path / "out").exists()
    terminal_only = run()
    assert terminal_only.returncode == 0, terminal_only.stderr
    assert "Tokens per request, by band" in terminal_only.stdout.decode()


# --------------------------------------------------------------------------- the reports


def test_the_html_report_is_self_contained_and_the_same_every_time() -> None:
    from toolbudget.inspection_charts import OUTPUT_DIV, html_report

    page = html_report(inspected(session_conversation()))
    again = html_report(inspected(session_conversation()))
    assert page == again
    assert f'id="{OUTPUT_DIV}"' in page and "vegaEmbed(" in page
    # Nothing is fetched: no script or stylesheet comes from elsewhere.
    assert "<script src" not in page and "<link" not in page and 'src="http' not in page
    assert len(page) > 500_000  # the Vega libraries are inline


@pytest.mark.slow
def test_the_command_writes_the_same_html_and_png_every_time(tmp_path: Path) -> None:
    path = tmp_path / "body.json"
    path.write_bytes(orjson.dumps(to_request(session_conversation(6), "openai-responses")))
    outputs = []
    for run, seed in enumerate(("1", "2")):
        html, png = tmp_path / f"{run}.html", tmp_path / f"{run}.png"
        done = cli("inspect", str(path), "--html", str(html), "--png", str(png), env={"PYTHONHASHSEED": seed})
        assert done.returncode == 0, done.stderr
        outputs.append((done.stdout, html.read_bytes(), png.read_bytes()))
    assert outputs[0] == outputs[1]
    image = read_png(outputs[0][2])
    assert image.width > 700 and image.height > 1000
    assert image.share_not((255, 255, 255), (0, 0, image.width, image.height)) > 0.03


def test_a_png_is_written_again_smaller_with_the_same_pixels() -> None:
    import vl_convert

    from toolbudget._png import compact
    from toolbudget.inspection_charts import chart

    original = vl_convert.vegalite_to_png(chart(inspected(session_conversation(4))).to_dict())
    small = compact(original)
    assert len(small) < len(original) / 2
    before, after = read_png(original), read_png(small)
    assert (before.width, before.height, after.channels) == (after.width, after.height, 3)
    for a, b in zip(before.rows, after.rows, strict=True):
        assert bytes(v for i, v in enumerate(a) if i % 4 != 3) == b
    assert compact(b"not a png") == b"not a png"


# --------------------------------------------------------------------------- real sessions


def _one_file_per_format(trajectories: Path) -> list[dict[str, Any]]:
    manifest = orjson.loads((trajectories / "manifest.json").read_bytes())
    chosen: dict[str, dict[str, Any]] = {}
    for entry in sorted(manifest, key=lambda e: (e["size"], e["file"])):
        chosen.setdefault(entry["format"], entry)
    return [chosen[f] for f in sorted(chosen)]


@pytest.mark.shared
def test_the_command_reads_one_shared_transcript_of_every_format(trajectories: Path) -> None:
    entries = _one_file_per_format(trajectories)
    assert len(entries) >= 9
    for entry in entries:
        done = cli("inspect", str(trajectories / entry["file"]))
        assert done.returncode == 0, (entry["file"], done.stderr)
        text = done.stdout.decode()
        assert f"transcript: {entry['format']}" in text, entry["file"]
        for section in SECTIONS:
            assert section in text, (entry["file"], section)


@pytest.mark.shared
def test_the_bands_add_up_on_every_shared_format(trajectories: Path) -> None:
    for entry in _one_file_per_format(trajectories):
        session = load_session(trajectories / entry["file"])
        result = inspect_conversation(session)
        unmanaged = replay_requests(session.conversation, session.api, None)
        definitions = result.bands.index("tool definitions")
        for turn, stats in zip(result.turns, unmanaged.turns, strict=True):
            assert sum(turn.chars) - turn.chars[definitions] == stats.chars, entry["file"]


# --------------------------------------------------------------------------- in a real browser


def _largest_claude_code_session(trajectories: Path) -> Path:
    manifest = orjson.loads((trajectories / "manifest.json").read_bytes())
    entries = [e for e in manifest if e["format"] == "claude-code-jsonl"]
    largest: dict[str, Any] = max(entries, key=lambda e: (e["size"], e["file"]))
    return trajectories / str(largest["file"])


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (scripts/test.sh installs it)")
        pytest.skip("chromium is not installed: apt-get install chromium")
    return found


# Records every error the page raises or logs, then, once the charts are drawn, writes what it
# found into the page, where --dump-dom shows it.
_COLLECT = """<script>
window.__errors = [];
window.addEventListener("error", (e) => __errors.push("error: " + e.message));
window.addEventListener("unhandledrejection", (e) => __errors.push("rejection: " + e.reason));
const __consoleError = console.error;
console.error = (...args) => { __errors.push("console.error: " + args.join(" ")); __consoleError(...args); };
</script>
"""
_PROBE = """<script>
function __probe(tries) {
  const svg = document.querySelector("#toolbudget-inspect svg");
  if (!svg && tries < 200) { setTimeout(() => __probe(tries + 1), 50); return; }
  const marks = svg ? [...svg.querySelectorAll("g.role-mark")] : [];
  const found = {
    errors: __errors,
    svg: !!svg,
    marks: marks.map((g) => {
      const r = g.getBoundingClientRect();
      return {name: g.getAttribute("class"), children: g.childElementCount,
              box: [r.left, r.top, r.right, r.bottom].map(Math.round)};
    }),
  };
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify(found);
  document.body.appendChild(out);
}
window.addEventListener("load", () => __probe(0));
</script>
"""


@pytest.mark.shared
@pytest.mark.slow
def test_the_html_report_renders_in_a_real_browser(trajectories: Path, tmp_path: Path) -> None:
    browser = _chromium()
    html = tmp_path / "report.html"
    done = cli("inspect", str(_largest_claude_code_session(trajectories)), "--html", str(html))
    assert done.returncode == 0, done.stderr
    page = html.read_text(encoding="utf-8")
    probed = tmp_path / "probed.html"
    body, end = page.rsplit("</body>", 1)  # the last one: the libraries' code may spell the tag too
    probed.write_text(body.replace("<head>\n", "<head>\n" + _COLLECT, 1) + _PROBE + "</body>" + end)
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        "--window-size=1200,2000",
        "--virtual-time-budget=20000",
        f"--user-data-dir={tmp_path / 'profile'}",
        # Offline: no host resolves, so a page that fetched anything would fail to draw.
        "--host-resolver-rules=MAP * ~NOTFOUND",
    ]
    dom = subprocess.run(
        [browser, *flags, "--enable-logging=stderr", "--v=0", "--dump-dom", probed.as_uri()],
        capture_output=True,
        check=False,
        timeout=180,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    text = dom.stdout.decode()
    assert '<pre id="probe">' in text, "the page never finished its probe"
    found = json.loads(text.split('<pre id="probe">', 1)[1].split("</pre>", 1)[0].replace("&quot;", '"'))
    assert found["errors"] == []
    assert b"Uncaught" not in dom.stderr
    assert found["svg"]
    views: dict[str, dict[str, Any]] = {}
    for mark in found["marks"]:  # a view of several lines has a group for each: their union
        name = mark["name"].split()[-1]
        seen = views.setdefault(name, {"children": 0, "box": mark["box"]})
        seen["children"] += mark["children"]
        box = seen["box"]
        seen["box"] = [*map(min, box[:2], mark["box"][:2]), *map(max, box[2:], mark["box"][2:])]
    for view in ("bands_marks", "sent_1_marks", "billed_2_marks", "hits_3_marks", "largest_marks"):
        assert view in views, sorted(views)
        assert views[view]["children"] > 0, view

    shot = tmp_path / "shot.png"
    done = subprocess.run(
        [browser, *flags, f"--screenshot={shot}", html.as_uri()],
        capture_output=True,
        check=False,
        timeout=180,
    )
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    image = read_png(shot.read_bytes())
    background = image.pixel(2, image.height - 2)
    for view in ("bands_marks", "sent_1_marks", "billed_2_marks", "hits_3_marks", "largest_marks"):
        left, top, right, bottom = views[view]["box"]
        assert bottom <= image.height, (view, "below the screenshot")
        # The plot area is drawn on: bars and lines, not an empty frame.
        assert image.share_not(background, (left, top, right, bottom)) > 0.06, view


def test_the_schedule_charts_tick_only_whole_requests() -> None:
    # A short session's quantitative request axis read 0.5, 1.5, ...: requests are counted.
    from toolbudget.inspection_charts import chart

    spec = chart(inspected(session_conversation(4))).to_dict()
    found = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            x = node.get("encoding", {}).get("x") if isinstance(node.get("encoding"), dict) else None
            if isinstance(x, dict) and x.get("field") == "request" and x.get("type") == "quantitative":
                found.append(x.get("axis", {}))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(spec)
    assert len(found) == 6  # the line and the rewrite marks of three schedule charts
    assert all(axis.get("tickMinStep") == 1 and axis.get("format") == "d" for axis in found), found


def test_a_body_holding_a_number_past_a_double_is_inspected(tmp_path: Path) -> None:
    # 1e400 is no transcript's, but a request body may hold it: read as the body it is.
    path = tmp_path / "big.json"
    path.write_bytes(
        b'{"model":"m","max_tokens":10,"metadata":{"limit":1e400},'
        b'"messages":[{"role":"user","content":"hi"}]}'
    )
    session = load_session(path, api="anthropic")
    assert session.conversation.messages[0].role == "user"
    assert "body" in session.kind
