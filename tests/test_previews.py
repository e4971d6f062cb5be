"""Structure-aware previews: the hard guarantees, the rules per content kind, and the real data.

The guarantees (unchanged when within the limit; exactly one marker, written
once with the final counts; the length bound; determinism; verbatim excerpts
cut at line or character boundaries) are checked on hand-written inputs, on
arbitrary text and JSON with hypothesis, and on every large tool result of the
shared trajectories, where detection is also compared with the data's own
rough categories.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import REPO, trajectories_dir
from toolbudget import load_transcript
from toolbudget.marker import find_markers, marker_line
from toolbudget.model import ToolResult, text_of
from toolbudget.previews import KINDS, STRATEGY, Preview, detect, make_preview
from toolbudget.previews._base import SEPARATOR_RE
from toolbudget.previews._envelope import split_envelope
from toolbudget.previews._linepattern import LinePattern
from toolbudget.previews._make import MARKER_ESTIMATE, MIN_SLACK, STDERR_SLACK
from toolbudget.previews._stderr import find_stderr
from toolbudget.previews.diff import parse_diff

KEY = "0123456789abcdef0123456789abcdef"
PATH = "/tmp/toolbudget-test/tool-results/0123456789abcdef0123456789abcdef.txt"
SHARED_SKIP = "../shared/data/trajectories is absent (fresh clone)"


class Recorder:
    """A marker function that records its calls, as the budget's own does (marker_line)."""

    def __init__(self, text: str, path: str | None = PATH) -> None:
        self.total = len(text)
        self.path = path
        self.calls: list[tuple[int, str]] = []

    def line(self, omitted: int, detail: str) -> str:
        return marker_line(omitted, self.total, key=KEY, path=self.path, detail=detail)

    def __call__(self, omitted: int, detail: str) -> str:
        self.calls.append((omitted, detail))
        return self.line(omitted, detail)

    @property
    def threshold(self) -> int:
        """The smallest limit the length guarantee holds for."""
        return len(self.line(self.total, "")) + MIN_SLACK


def preview(text: str, limit: int, **kwargs: Any) -> tuple[Preview, Recorder]:
    recorder = Recorder(text, kwargs.pop("path", PATH))
    return make_preview(text, limit, marker=recorder, **kwargs), recorder


def excerpts(shown: str, marker: str) -> list[str]:
    """The runs of a preview that are not the marker line nor a separator line."""
    chunks: list[str] = []
    current: list[str] = []
    for line in shown.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        if bare == marker or SEPARATOR_RE.fullmatch(bare):
            if current:
                chunks.append("".join(current))
            current = []
        else:
            current.append(line)
    if current:
        chunks.append("".join(current))
    return chunks


def is_substring(chunk: str, original: str) -> bool:
    """``chunk`` is a slice of ``original``, allowing for the one newline the layout may add."""
    if chunk in original:
        return True
    return any(chunk.endswith(nl) and chunk[: -len(nl)] in original for nl in ("\r\n", "\n"))


_SURROGATE = re.compile("[\ud800-\udfff]")


def has_lone_surrogate(text: str) -> bool:
    if not _SURROGATE.search(text):
        return False
    for i, ch in enumerate(text):
        if "\ud800" <= ch <= "\udbff" and not (i + 1 < len(text) and "\udc00" <= text[i + 1] <= "\udfff"):
            return True
        if "\udc00" <= ch <= "\udfff" and not (i > 0 and "\ud800" <= text[i - 1] <= "\udbff"):
            return True
    return False


def lone_cr(text: str) -> bool:
    return text.count("\r") != text.count("\r\n")


def stderr_section(text: str) -> str:
    """The separable stderr section of ``text``, if any (inside an agent envelope)."""
    found = find_stderr(text, *split_envelope(text))
    return text[found[0] : found[1]] if found else ""


def check(text: str, limit: int, **kwargs: Any) -> Preview:
    """Every hard guarantee for one call; returns the preview for further checks."""
    made, recorder = preview(text, limit, **kwargs)
    again, _ = preview(text, limit, **kwargs)
    assert made == again, "not deterministic"
    assert made.kind in KINDS
    if len(text) <= limit:
        assert made == Preview(text, made.kind, 0, "")
        assert recorder.calls == []
        return made
    assert 1 <= len(recorder.calls) <= 3
    assert recorder.calls[-1] == (made.omitted, made.detail), "the marker must carry the final counts"
    final = recorder.line(made.omitted, made.detail)
    assert made.text.count(final) == 1, "the marker must appear exactly once, verbatim"
    assert sum(m.key == KEY for m in find_markers(made.text)) == 1
    assert not re.search(r"[;\[\]\n\r]", made.detail)
    assert 0 <= made.omitted <= len(text)
    if limit >= recorder.threshold:
        stderr = stderr_section(text) if kwargs.get("stderr_limit") is not None else ""
        kept_stderr = min(len(stderr), kwargs.get("stderr_limit") or 0)
        assert len(made.text) <= max(limit, kept_stderr + len(final) + STDERR_SLACK), (len(made.text), limit)
        if not stderr:
            assert len(made.text) <= limit
        if len(final) - len(made.detail) <= MARKER_ESTIMATE:
            first = recorder.calls[0]
            # The one exception: a first preview of the marker alone (nothing kept), whose
            # detail made it longer than the limit; only writing the marker could tell.
            marker_alone_too_long = first[0] == len(text) and len(recorder.line(*first)) > limit
            assert len(recorder.calls) == 1 or (len(recorder.calls) == 2 and marker_alone_too_long), (
                "a marker shorter than the estimate is written once"
            )
    elif not stderr_section(text) or kwargs.get("stderr_limit") is None:
        assert made.text == final, "below the threshold the preview is the marker alone"
    if not has_lone_surrogate(text):
        assert not has_lone_surrogate(made.text)
    if not lone_cr(text):
        assert not lone_cr(made.text), "a \\r\\n pair was split"
    if made.kind == "json":
        if limit >= recorder.threshold:
            assert final in _strings(orjson.loads(made.text)), "valid JSON, holding the marker"
        else:
            assert made.text == final
    else:
        for chunk in excerpts(made.text, final):
            assert is_substring(chunk, text), chunk[:200]
    return made


def _parses(text: str) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


# ---------------------------------------------------------------------------------------------
# Guarantees on hand-written edge cases


def test_within_the_limit_the_text_comes_back_unchanged() -> None:
    text = "hello\nworld\n"
    made, recorder = preview(text, len(text))
    assert made == Preview(text, "text", 0, "")
    assert recorder.calls == []


def lines_text(n: int, width: int = 30, nl: str = "\n") -> str:
    return "".join(f"line {i:05d} " + "x" * (width - 11) + nl for i in range(1, n + 1))


def test_plain_head_and_tail_are_whole_lines_with_the_omitted_line_range() -> None:
    text = lines_text(2000)
    made = check(text, 4000)
    head, tail = made.text.split(Recorder(text).line(made.omitted, made.detail))
    assert head.endswith("\n") and text.startswith(head)
    assert tail.startswith("\n") and text.endswith(tail[1:])
    first = len(head.splitlines()) + 1
    last = 2000 - len(tail[1:].splitlines())
    assert made.detail == f"lines {first}-{last} of 2000"
    assert made.omitted == len(text) - len(head) - len(tail) + 1
    assert made.kind == "text"


@pytest.mark.parametrize("ratio", [0.0, 0.2, 0.8, 1.0])
def test_head_ratio_shares_the_room_between_head_and_tail(ratio: float) -> None:
    text = lines_text(3000)
    made = check(text, 6000, head_ratio=ratio)
    head, tail = made.text.split(Recorder(text).line(made.omitted, made.detail))
    share = len(head) / (len(head) + len(tail))
    assert abs(share - ratio) < 0.05


def test_crlf_pairs_stay_together_and_added_lines_use_crlf() -> None:
    text = lines_text(500, nl="\r\n")
    made = check(text, 3000)
    assert "\r\n[toolbudget: " in made.text
    assert made.text.count("\r") == made.text.count("\r\n")
    assert not lone_cr(made.text)


def test_a_single_giant_line_is_cut_at_a_character_boundary() -> None:
    text = "é👍🏽" * 4000 + "tail"
    made = check(text, 2000)
    assert made.detail.endswith("of line 1 of 1")
    assert made.text.startswith("é👍")


def test_surrogate_pairs_held_as_code_points_are_never_split() -> None:
    pair = "\ud83d\ude00"
    for text in (pair * 5000, "a" + pair * 5000, "abc\n" + pair * 3000 + "\n" + pair * 3000):
        for limit in (500, 1001, 2000, 3333):
            made = check(text, limit)
            assert not has_lone_surrogate(made.text)


def test_nul_bytes_empty_lines_and_no_trailing_newline() -> None:
    text = "\x00\n\n" * 3000 + "end without newline"
    made = check(text, 1500)
    assert made.text.endswith("end without newline")
    assert "\x00" in made.text


def test_text_without_any_newline_and_combining_marks() -> None:
    text = "e\u0301" * 5000
    made = check(text, 1000)
    cut = made.text.split("[toolbudget:")[0].rstrip("\n")
    assert not cut.endswith("e"), "a base letter was split from its combining accent"


def test_below_the_threshold_the_preview_is_the_marker_alone() -> None:
    text = lines_text(100)
    recorder = Recorder(text)
    made = make_preview(text, recorder.threshold - 1, marker=recorder)
    assert made.text == recorder.line(len(text), made.detail)
    assert made.omitted == len(text)
    assert made.detail == "lines 1-100 of 100"
    tiny = make_preview(text, 0, marker=Recorder(text))
    assert tiny.omitted == len(text)


# Found by hypothesis: a "CSV" whose header row does not fit the room, at the threshold limit. The
# preview was the marker alone with the table's detail, 16 characters over the limit.
TABLE_HEADER_TOO_WIDE = '  File "x.py", line 1, in f\n' * 8


DIFF_FILE = "diff --git a/src/alpha.py b/src/alpha.py\n--- a/src/alpha.py\n+++ b/src/alpha.py\n"
DIFF_HUNK = "@@ -1,3 +1,3 @@\n ctx\n-old\n+new\n ctx\n"


@pytest.mark.parametrize(
    ("text", "kind"),
    [(TABLE_HEADER_TOO_WIDE, "csv"), ((DIFF_FILE + DIFF_HUNK) * 6, "diff")],
)
def test_a_marker_alone_whose_detail_does_not_fit_gives_way_to_the_bare_marker(text: str, kind: str) -> None:
    """Nothing but the marker fits, and the strategy's detail (rows and the header of a table,
    the hunks of a diff) would take the marker over the limit: the line range replaces it."""
    recorder = Recorder(text)
    for limit in range(recorder.threshold, recorder.threshold + 40):
        made = check(text, limit)
        assert made.kind == kind
        assert len(made.text) <= limit, (limit, len(made.text))
    made, recorder = preview(text, recorder.threshold)
    lines = text.count("\n")
    assert made.omitted == len(text)
    assert made.text == recorder.line(len(text), f"lines 1-{lines} of {lines}")
    first_omitted, first_detail = recorder.calls[0]
    assert len(recorder.line(first_omitted, first_detail)) > recorder.threshold, "written again only then"


def test_a_marker_alone_whose_detail_fits_keeps_the_detail() -> None:
    """With room for it, the marker alone keeps what the strategy says (unchanged behaviour)."""
    text = TABLE_HEADER_TOO_WIDE * 2
    made, recorder = preview(text, 300)
    assert made.text == recorder.line(len(text), made.detail)
    assert made.detail.startswith("rows 1-15 of 15 and the header")
    assert len(recorder.calls) == 1 and len(made.text) <= 300


def test_at_the_threshold_the_preview_fits() -> None:
    text = lines_text(100)
    recorder = Recorder(text)
    for limit in range(recorder.threshold, recorder.threshold + 200, 7):
        check(text, limit)


def test_a_marker_longer_than_the_estimate_is_sized_again_and_still_fits() -> None:
    text = lines_text(3000)
    long_path = "/tmp/" + "deep/" * 100 + "result.txt"
    made, recorder = preview(text, 3000, path=long_path)
    assert len(recorder.calls) == 2
    final = recorder.line(*recorder.calls[-1])
    assert len(final) > MARKER_ESTIMATE
    assert len(made.text) <= 3000
    assert made.text.count(final) == 1
    assert recorder.calls[-1] == (made.omitted, made.detail)


def test_separators_never_look_like_a_marker() -> None:
    log = "\n".join(f"ERROR failure {i}" if i % 50 == 0 else f"info {i}" for i in range(5000))
    made = check(log, 3000)
    separators = [ln for ln in made.text.splitlines() if SEPARATOR_RE.fullmatch(ln)]
    assert separators
    assert not any("[toolbudget:" in s for s in separators)
    assert len(find_markers(made.text)) == 1


def test_the_same_input_gives_the_same_bytes_in_another_process() -> None:
    script = (
        "import hashlib, sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from test_previews import sample_digest\n"
        "print(sample_digest())\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", script, str(REPO / "tests")],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=REPO,
    )
    assert out.stdout.strip() == sample_digest()


def sample_digest() -> str:
    """A digest of previews of every kind, compared across processes."""
    digest = hashlib.sha256()
    for text in SAMPLES.values():
        for limit in (600, 2000):
            made = make_preview(text, limit, marker=Recorder(text), stderr_limit=1500)
            digest.update(
                f"{made.kind}|{made.omitted}|{made.detail}|{made.text}".encode("utf-8", "surrogatepass")
            )
    return digest.hexdigest()


def test_a_five_megabyte_single_line_previews_within_its_guarantees() -> None:
    text = ("0123456789abcdef" * 8 + "é") * 39000  # ~5 MB, no newline
    assert len(text) > 5_000_000
    check(text, 20000)  # its speed is measured in bench/previews.py


def test_a_100k_line_log_keeps_its_traceback() -> None:
    lines = []
    for i in range(100_000):
        if i % 997 == 0:
            lines.append(f"ERROR step {i} failed")
        elif i % 4999 == 0:
            lines.append('Traceback (most recent call last):\n  File "a.py", line 3, in f\nValueError: bad')
        else:
            lines.append(f"2024-01-01 12:00:{i % 60:02d} INFO processing item {i} of the batch")
    text = "\n".join(lines) + "\n"
    made = check(text, 20000)  # its speed, and how it grows, are measured in bench/previews.py
    assert "Traceback (most recent call last):" in made.text


# ---------------------------------------------------------------------------------------------
# JSON


def test_a_json_array_keeps_its_first_and_last_records_and_counts_the_rest() -> None:
    records = [{"id": i, "name": f"name {i}", "tags": ["a", "b"]} for i in range(5000)]
    text = json.dumps(records, indent=2)
    made = check(text, 2000)
    assert made.kind == "json"
    value = orjson.loads(made.text)
    assert value[0] == records[0]
    assert value[-1] == records[-1]
    final = Recorder(text).line(made.omitted, made.detail)
    assert final in value
    assert made.detail.startswith("array of 5000 items like {id: int, name: str, tags: list}")
    kept = [v for v in value if isinstance(v, dict)]
    assert f"left out {5000 - len(kept)} array items" in made.detail


def test_a_json_object_keeps_every_key_and_shortens_values_with_notes() -> None:
    doc: dict[str, Any] = {f"key{i}": i for i in range(10)}
    doc["log"] = "x" * 20000
    doc["items"] = [{"n": i} for i in range(3000)]
    text = json.dumps(doc)
    made = check(text, 3000)
    value = orjson.loads(made.text)
    assert list(value) == ["toolbudget", *doc]
    assert value["toolbudget"] == Recorder(text).line(made.omitted, made.detail)
    assert re.fullmatch(r"x+… \(\+\d+ chars\)", value["log"])
    assert value["items"][0] == {"n": 0} and value["items"][-1] == {"n": 2999}
    notes = [v for v in value["items"] if isinstance(v, str)]
    assert len(notes) == 1 and re.fullmatch(r"… \d+ more items …", notes[0])
    assert made.detail.startswith("object with 12 keys")
    assert "shortened 1 long string" in made.detail


def test_a_json_object_that_already_has_the_marker_key_gets_another() -> None:
    text = json.dumps({"toolbudget": "mine", "data": list(range(5000))})
    value = orjson.loads(check(text, 1000).text)
    assert value["toolbudget"] == "mine"
    assert value["toolbudget1"].startswith("[toolbudget: omitted")


def test_a_json_object_with_too_many_keys_counts_the_ones_left_out() -> None:
    text = json.dumps({f"k{i:05d}": i for i in range(20000)})
    made = check(text, 2000)
    value = orjson.loads(made.text)
    assert value["k00000"] == 0 and value["k19999"] == 19999
    left = int(value["…"].split()[0])
    assert len(value) - 2 + left == 20000
    assert f"left out {left} keys" in made.detail


def test_top_level_json_scalars_are_wrapped_with_the_marker() -> None:
    text = json.dumps("y" * 10000)
    value = orjson.loads(check(text, 1000).text)
    assert set(value) == {"toolbudget", "value"}
    assert value["value"].startswith("yyy") and value["value"].endswith("chars)")


def test_pretty_json_whose_compact_form_fits_loses_only_whitespace() -> None:
    doc = {"a": list(range(200)), "b": {"c": "d"}}
    text = json.dumps(doc, indent=4)
    made = check(text, len(orjson.dumps(doc)) + MARKER_ESTIMATE + 200)
    value = orjson.loads(made.text)
    assert {k: v for k, v in value.items() if k != "toolbudget"} == doc
    assert "reformatted compactly, nothing else left out" in made.detail
    assert made.omitted == len(text) - len(orjson.dumps(doc))


def test_json_in_an_agent_envelope_previews_as_json_without_it() -> None:
    body = json.dumps({"name": "pkg", "dependencies": {f"dep{i}": f"^{i}.0.0" for i in range(400)}}, indent=2)
    text = "Chunk ID: 2d2199\nWall time: 0.2 seconds\nProcess exited with code 0\nOutput:\n" + body
    made = check(text, 2000)
    assert made.kind == "json"
    value = orjson.loads(made.text)
    assert value["name"] == "pkg"
    assert made.detail.endswith("the agent's envelope")


def test_an_error_json_body_stays_json() -> None:
    text = json.dumps({"error": {"message": "boom", "trace": ["frame"] * 3000}})
    made = check(text, 1500, is_error=True)
    assert orjson.loads(made.text)["error"]["message"] == "boom"


# ---------------------------------------------------------------------------------------------
# Tables


def test_csv_keeps_the_header_and_whole_rows_with_the_row_range() -> None:
    header = "id,name,score\n"
    rows = [f"{i},name {i},{i * 7 % 100}\n" for i in range(1, 10001)]
    text = header + "".join(rows)
    made = check(text, 3000)
    assert made.kind == "csv"
    assert made.text.startswith(header)
    shown = [ln + "\n" for ln in made.text.splitlines()[1:] if not ln.startswith("[toolbudget:")]
    assert all(row in rows for row in shown)
    first, last = map(int, re.fullmatch(r"rows (\d+)-(\d+) of 10000", made.detail).groups())  # type: ignore[union-attr]
    assert shown == rows[: first - 1] + rows[last:]


def test_csv_rows_with_quoted_newlines_are_kept_whole() -> None:
    rows = [f'{i},"first line {i}\nsecond line {i}",ok\n' for i in range(1, 3001)]
    text = "id,note,status\n" + "".join(rows)
    made = check(text, 2500)
    assert made.kind == "csv"
    body = made.text.split("\n", 1)[1]
    for i in range(1, 3001):
        assert (f'"first line {i}\n' in body) == (f'second line {i}",' in body)


def test_tsv_and_aligned_tables_keep_the_header() -> None:
    tsv = "name\tsize\tkind\n" + "".join(f"file{i}.txt\t{i * 10}\tfile\n" for i in range(4000))
    made = check(tsv, 2000)
    assert made.kind == "tsv" and made.text.startswith("name\tsize\tkind\n")
    ps = "USER       PID %CPU %MEM COMMAND\n" + "".join(
        f"root    {i:6d}  0.0  0.1 /usr/bin/worker --id {i}\n" for i in range(4000)
    )
    made = check(ps, 2000)
    assert made.kind == "table" and made.text.startswith("USER       PID %CPU %MEM COMMAND\n")
    assert re.fullmatch(r"rows \d+-\d+ of 4000", made.detail)


# ---------------------------------------------------------------------------------------------
# Diffs


def make_diff(files: dict[str, list[int]]) -> str:
    """A git diff: for each file, hunks of the given numbers of changed lines."""
    out = []
    for name, hunks in files.items():
        out.append(
            f"diff --git a/{name} b/{name}\nindex 1111111..2222222 100644\n--- a/{name}\n+++ b/{name}\n"
        )
        start = 1
        for size in hunks:
            removed = [f"--- sql comment {start} {k}\n" for k in range(size // 2)]  # removed `-- ...`
            added = [f"+added line {start} {k}\n" for k in range(size - size // 2)]
            out.append(f"@@ -{start},{len(removed) + 2} +{start},{len(added) + 2} @@ def f{start}():\n")
            out.extend([" context\n", *removed, *added, " context\n"])
            start += 100
    return "".join(out)


def hunks_in(text: str) -> list[tuple[str, str]]:
    units, files = parse_diff(text)
    return [(files[u.file], text[u.start : u.end]) for u in units if u.kind == "hunk"]


def test_a_diff_keeps_every_file_header_and_only_whole_hunks() -> None:
    text = make_diff(
        {"src/a.py": [10, 200, 30, 5], "src/b.py": [300, 8, 400, 9], "docs/c.md": [4, 600, 7, 3]}
    )
    made = check(text, 3000)
    assert made.kind == "diff"
    for line in text.splitlines():
        if line.startswith(("diff --git", "index ", "--- a/", "+++ b/")):
            assert line in made.text.splitlines()
    left: dict[str, int] = {}
    for name, hunk in hunks_in(text):
        header = hunk.split("\n", 1)[0]
        if header in made.text:
            assert hunk in made.text, "a hunk was cut"
        else:
            left[name] = left.get(name, 0) + 1
    assert sum(left.values()) > 0
    listed = ", ".join(f"{name} {count}" for name, count in left.items())
    assert made.detail == f"left out {sum(left.values())} of 12 hunks: {listed}"


def test_a_removed_sql_comment_is_not_taken_for_a_file_header() -> None:
    text = make_diff({"q.sql": [40, 40]})
    units, files = parse_diff(text)
    assert files == ["q.sql"]
    assert [u.kind for u in units] == ["header", "hunk", "hunk"]


def _three_counts(text: str, body: int, stop: int, old: int, new: int) -> int | None:
    """The hunk-end rule as the removed, added and context lines counted apart say it."""
    if body >= stop or text[body] not in "-+ " or "\r" in text[body:stop]:
        return None
    lines = text[body:stop].splitlines()
    removed = sum(line.startswith("-") for line in lines)
    added = sum(line.startswith("+") for line in lines)
    context = sum(line.startswith(" ") for line in lines)
    flags = sum(line.startswith("\\") for line in lines)
    if removed + context != old or added + context != new:
        return None
    return stop if removed + added + context + flags == len(lines) else None


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(["+a", "-b", " c", "\\ No newline at end of file", "x", ""]), min_size=1),
    st.integers(0, 6),
    st.integers(0, 6),
    st.booleans(),
)
@example(["+a", "+a", "\\ No newline at end of file"], 0, 2, True)
@example(["-b", "\\ No newline at end of file"], 1, 0, False)
@example(["+a", " c"], 0, 2, True)
def test_a_new_or_deleted_files_hunk_ends_where_counting_each_kind_says(
    lines: list[str], old: int, new: int, final_newline: bool
) -> None:
    from toolbudget.previews.diff import _hunk_end_fast

    old, new = (0, new) if old <= new else (old, 0)  # a new file's hunk or a deleted one's
    body = "\n".join(lines) + ("\n" if final_newline else "")
    text = "@@ header\n" + body + "diff --git a/x b/x\n"
    start, stop = len("@@ header\n"), len("@@ header\n") + len(body)
    assert _hunk_end_fast(text, start, stop, old, new) == _three_counts(text, start, stop, old, new)


_DIFF_LINES = [
    "@@ -1,2 +1,2 @@",
    "@@ -1 +1 @@",
    "@@ -0,0 +1,2 @@",
    "@@ -1,2 +0,0 @@",
    "@@ -3,1 +3,2 @@ def f():",
    "@@ not a hunk",
    "diff --git a/x b/x",
    "--- a/x",
    "+++ b/x",
    "+a",
    "-b",
    " c",
    "\\ No newline at end of file",
    "",
    "x",
    " c\r",
]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(_DIFF_LINES), min_size=1, max_size=30), st.booleans())
@example(["@@ -0,0 +1,2 @@", "+a", "+a", "@@ -1,2 +1,2 @@", " c", "-b", "+a", " c"], True)
@example(["@@ -1,2 +1,2 @@", " c", "-b", "+a", " c", "x", "diff --git a/x b/x"], False)
@example(["@@ -1,2 +0,0 @@", "-b", "-b", "\\ No newline at end of file", "@@ -1 +1 @@"], True)
@example(["@@ -0,0 +1,2 @@", "+a", "+a", "+a"], True)
@example(["@@ -1,2 +1,2 @@", " c", "-b", "+a", "+a", " c"], True)
def test_a_hunk_found_in_one_scan_ends_where_the_counted_walk_ends_it(lines: list[str], end: bool) -> None:
    """The one-scan way to a hunk's end (``_hunk_end_scan``) gives the units the walk it shortcuts
    gives (a hunk's counts checked against each kind of line counted apart), or leaves it to that."""
    from unittest import mock

    from toolbudget.previews import diff

    text = "\n".join(lines) + ("\n" if end else "")
    with mock.patch.object(diff, "_hunk_end_scan", lambda *args: None):
        walked = diff.parse_diff(text)
    assert diff.parse_diff(text) == walked


def test_a_new_files_hunk_is_found_in_one_scan() -> None:
    """A new file's hunk is read up to the line that is not added, then its lines counted."""
    from toolbudget.previews import diff

    body = "".join(f"+line {k} of the file\n" for k in range(400))
    header = "new file mode 100644\n--- /dev/null\n"
    text = "".join(
        f"diff --git a/f{n} b/f{n}\n{header}+++ b/f{n}\n@@ -0,0 +1,400 @@\n{body}" for n in range(20)
    )
    units, _ = diff.parse_diff(text)
    assert [u.kind for u in units] == ["header", "hunk"] * 20
    hunks = [u for u in units if u.kind == "hunk"]
    ends = [diff._hunk_end_scan(text, text.index("\n", u.start) + 1, 0, 400) for u in hunks]
    assert ends == [u.end for u in hunks]


def test_a_diff_with_many_files_names_a_few_and_counts_the_rest() -> None:
    text = make_diff({f"pkg/module_{i}.py": [60, 60] for i in range(30)})
    made = check(text, 6000)
    assert re.search(r"left out \d+ of 60 hunks: .* and \d+ more files", made.detail)


# ---------------------------------------------------------------------------------------------
# Logs and test runners

PYTEST_LOG = (
    "============================= test session starts ==============================\n"
    "platform linux -- Python 3.11.7, pytest-8.3.3\n"
    "collected 240 items\n\n"
    + "".join(f"tests/test_mod{i}.py ........................................ [ {i}%]\n" for i in range(60))
    + "\n=================================== FAILURES ===================================\n"
    "_________________________________ test_parse __________________________________\n\n"
    "    def test_parse():\n"
    "        value = helper()\n"
    ">       assert value == 3\n"
    "E       assert 2 == 3\n\n"
    "tests/test_mod7.py:12: AssertionError\n"
    "----------------------------- Captured stdout call -----------------------------\n"
    + "".join(f"debug output line {i}\n" for i in range(80))
    + "Traceback (most recent call last):\n"
    '  File "/app/src/loader.py", line 40, in load\n'
    "    data = parse(raw)\n"
    '  File "/app/src/parser.py", line 12, in parse\n'
    "    raise ValueError(raw)\n"
    "ValueError: unexpected token\n"
    + "".join(f"more output line {i}\n" for i in range(80))
    + "=========================== short test summary info ============================\n"
    "FAILED tests/test_mod7.py::test_parse - assert 2 == 3\n"
    "======================== 1 failed, 239 passed in 3.21s =========================\n"
)


def test_a_pytest_run_keeps_the_traceback_whole_and_the_summary() -> None:
    made = check(PYTEST_LOG, 2200)
    assert made.kind == "pytest"
    trace = PYTEST_LOG[
        PYTEST_LOG.index("Traceback") : PYTEST_LOG.index("ValueError: unexpected token\n") + 28
    ]
    assert trace in made.text
    assert made.text.rstrip("\n").endswith("1 failed, 239 passed in 3.21s =========================")
    assert "FAILED tests/test_mod7.py::test_parse" in made.text
    assert re.match(r"kept \d+ error lines, 1 traceback and the summary, left out lines \d+-\d+", made.detail)
    head = made.text.split("[toolbudget:")[0]
    assert PYTEST_LOG.startswith(head), "the head comes first, then the marker"


def test_a_unittest_run_keeps_its_summary() -> None:
    text = (
        "".join(f"test_case_{i} (pkg.tests.T) ... ok\n" for i in range(400))
        + "======================================================================\n"
        "FAIL: test_case_7 (pkg.tests.T)\n"
        "----------------------------------------------------------------------\n"
        "Traceback (most recent call last):\n"
        '  File "/app/tests.py", line 9, in test_case_7\n'
        "    self.assertEqual(1, 2)\n"
        "AssertionError: 1 != 2\n\n"
        "----------------------------------------------------------------------\n"
        "Ran 400 tests in 0.527s\n\n"
        "FAILED (failures=1)\n"
    )
    made = check(text, 1500)
    assert made.kind == "unittest"
    assert "AssertionError: 1 != 2\n" in made.text
    assert made.text.endswith("Ran 400 tests in 0.527s\n\nFAILED (failures=1)\n")


@pytest.mark.parametrize(
    ("label", "text", "summary"),
    [
        (
            "go-test",
            "".join(f"=== RUN   TestThing{i}\n--- PASS: TestThing{i} (0.00s)\n" for i in range(300))
            + "=== RUN   TestBroken\n    thing_test.go:12: got 2, want 3\n--- FAIL: TestBroken (0.00s)\n"
            + "".join(f"=== RUN   TestMore{i}\n--- PASS: TestMore{i} (0.00s)\n" for i in range(300))
            + "FAIL\nFAIL\texample.com/thing\t0.012s\n",
            "FAIL\texample.com/thing\t0.012s",
        ),
        (
            "jest",
            "".join(f"PASS src/part{i}.test.js\n" for i in range(300))
            + "FAIL src/broken.test.js\n  ● adds numbers\n\n    expect(received).toBe(expected)\n\n"
            + "".join(f"PASS src/more{i}.test.js\n" for i in range(300))
            + "Test Suites: 1 failed, 600 passed, 601 total\n"
            + "Tests:       1 failed, 1800 passed, 1801 total\n",
            "Tests:       1 failed, 1800 passed, 1801 total",
        ),
        (
            "unittest",
            "running 400 tests\n"
            + "".join(f"test tests::case_{i} ... ok\n" for i in range(400))
            + "test tests::broken ... FAILED\n\nfailures:\n\n---- tests::broken stdout ----\n"
            "thread 'tests::broken' panicked at src/lib.rs:10:5:\nassertion failed\n\n"
            "test result: FAILED. 400 passed; 1 failed; 0 ignored\n",
            "test result: FAILED. 400 passed; 1 failed; 0 ignored",
        ),
    ],
)
def test_other_runners_keep_the_failure_and_the_summary(label: str, text: str, summary: str) -> None:
    made = check(text, 2000)
    assert made.kind == label
    assert summary in made.text
    assert "the summary" in made.detail


def test_the_first_error_and_the_ones_nearest_the_end_win() -> None:
    lines = [f"info line {i}" for i in range(3000)]
    for i in (100, 1500, 2990):
        lines[i] = f"ERROR number {i}"
    made = check("\n".join(lines) + "\n", 700)
    assert "ERROR number 100" in made.text
    assert "ERROR number 2990" in made.text
    assert "ERROR number 1500" not in made.text


def test_is_error_keeps_a_traceback_that_plain_text_would_lose() -> None:
    trace = (
        "Traceback (most recent call last):\n"
        '  File "/app/main.py", line 3, in <module>\n'
        "    run()\n"
        "RuntimeError: the real cause\n"
    )
    text = "".join(f"Some narrative sentence number {i}.\n" for i in range(300)) + trace
    text += "".join(f"More narrative, sentence {i}.\n" for i in range(300))
    assert detect(text) == "text"
    assert trace not in check(text, 2000).text  # head and tail of prose, as plain text
    assert trace in check(text, 2000, is_error=True).text


# ---------------------------------------------------------------------------------------------
# stderr


def test_stderr_is_kept_whole_within_its_own_limit_while_stdout_is_cut_hard() -> None:
    stdout = "stdout:\n" + "".join(f"building module {i}\n" for i in range(3000))
    stderr = (
        "stderr:\n"
        + "".join(f"warning: deprecated call {i}\n" for i in range(60))
        + "Traceback (most recent call last):\n"
        '  File "build.py", line 1, in <module>\n'
        "RuntimeError: compiler crashed\n"
    )
    text = stdout + stderr
    made = check(text, 1500, stderr_limit=4000)
    assert stderr in made.text
    assert len(stderr) > 1500
    final = Recorder(text).line(made.omitted, made.detail)
    assert len(made.text) <= len(stderr) + len(final) + STDERR_SLACK
    # Without a stderr limit, stderr is text like the rest.
    plain = check(text, 1500)
    assert len(plain.text) <= 1500 and stderr not in plain.text


@pytest.mark.parametrize("header", ["stderr:", "STDERR:", "Stderr:", "[stderr]", "--- STDERR ---"])
def test_a_stderr_header_is_found_in_each_usual_spelling_from_the_first_character(header: str) -> None:
    text = f"{header}\nboom\n"
    assert find_stderr(text, 0, len(text)) == (0, len(text))
    # Its word right at the start of the range looked in (the word's rest is found, then its first
    # letter checked: the range's first character must still count).
    padded = "out\n" + text
    assert find_stderr(padded, 4, len(padded)) == (4, len(padded))
    with_stdout = f"{text}STDOUT: fine\n"
    assert find_stderr(with_stdout, 0, len(with_stdout)) == (0, len(text))


@pytest.mark.parametrize("word", ["sTDERR:", "StdErr:", "tderr:", "TDERR:"])
def test_an_unusual_spelling_is_no_stderr_header(word: str) -> None:
    text = f"{word}\nboom\n"
    assert find_stderr(text, 0, len(text)) is None


def test_stderr_over_its_limit_is_cut_to_it() -> None:
    text = "out\n" * 10 + "stderr:\n" + "".join(f"error {i} happened\n" for i in range(2000))
    made = check(text, 1500, stderr_limit=2500)
    assert len(made.text) <= 2500 + 400


def test_stderr_in_tags_is_recognised() -> None:
    text = (
        "".join(f"progress {i}\n" for i in range(2000)) + "<stderr>\nfatal: not a git repository\n</stderr>\n"
    )
    made = check(text, 800, stderr_limit=2000)
    assert "<stderr>\nfatal: not a git repository\n</stderr>\n" in made.text


# ---------------------------------------------------------------------------------------------
# Detection

SAMPLES: dict[str, str] = {
    "json": json.dumps([{"id": i, "name": "x"} for i in range(200)]),
    "yaml": "".join(f"key{i}: value {i}\nlist{i}:\n  - a\n  - b\n" for i in range(100)),
    "xml": '<?xml version="1.0"?>\n<root>\n'
    + "".join(f"  <item id='{i}'>v</item>\n" for i in range(200))
    + "</root>\n",
    "html": "<!DOCTYPE html>\n<html><head><title>t</title></head><body>\n"
    + "".join(f"<div class='row'>{i}</div>\n" for i in range(200))
    + "</body></html>\n",
    "csv": "a,b,c\n" + "".join(f"{i},{i * 2},{i * 3}\n" for i in range(500)),
    "tsv": "a\tb\tc\n" + "".join(f"{i}\t{i * 2}\t{i * 3}\n" for i in range(500)),
    "table": "CONTAINER ID   IMAGE     STATUS\n"
    + "".join(f"{i:012x}   nginx     Up {i} hours\n" for i in range(300)),
    "diff": make_diff({"a.py": [20, 20], "b.py": [30]}),
    "git-log": "".join(
        f"commit {i:040x}\nAuthor: A <a@b.c>\nDate:   Mon Jan 1 00:00:00 2024\n\n    change {i}\n\n"
        for i in range(1, 100)
    ),
    "python": "import os\nfrom typing import Any\n\n\n"
    + "".join(f"def f{i}(x: int) -> int:\n    return self.x + {i}\n\n\n" for i in range(100)),
    "go": 'package main\n\nimport (\n\t"fmt"\n)\n\n'
    + "".join(
        f"func f{i}() error {{\n\tx := {i}\n\tif err != nil {{\n\t\treturn err\n\t}}\n}}\n\n"
        for i in range(80)
    ),
    "javascript": "const fs = require('fs');\n\n"
    + "".join(f"function f{i}(a) {{\n  const x = a + {i};\n  return x;\n}}\n\n" for i in range(80)),
    "typescript": "import type { A } from './a';\n\n"
    + "".join(f"export interface I{i} {{\n  name: string;\n  size: number;\n}}\n\n" for i in range(80)),
    "rust": "use std::collections::HashMap;\n\n"
    + "".join(
        f"pub fn f{i}(v: &mut Vec<u8>) -> usize {{\n    let mut n = {i};\n    n\n}}\n\n" for i in range(80)
    ),
    "java": "package com.example;\n\nimport java.util.List;\n\npublic class Thing {\n"
    + "".join(f"    @Override\n    public int f{i}() {{\n        return {i};\n    }}\n" for i in range(80))
    + "}\n",
    "c": "#include <stdio.h>\n#include <stdlib.h>\n\n"
    + "".join(f'int f{i}(int x)\n{{\n    printf("%d", x);\n    return NULL;\n}}\n\n' for i in range(80)),
    "cpp": "#include <vector>\n#include <string>\n\nnamespace app {\n"
    + "".join(f"std::vector<int> f{i}() {{ return std::vector<int>(nullptr); }}\n" for i in range(80))
    + "}\n",
    "pytest": PYTEST_LOG,
    "unittest": "....F..\n"
    + "=" * 70
    + "\nFAIL: test_x (m.T)\n"
    + "-" * 70
    + "\nRan 7 tests in 0.01s\n\nFAILED (failures=1)\n",
    "jest": "PASS src/a.test.js\nFAIL src/b.test.ts\n\nTests:       1 failed, 3 passed, 4 total\n",
    "go-test": "=== RUN   TestA\n--- FAIL: TestA (0.00s)\nFAIL\nFAIL\texample.com/x\t0.01s\n",
    "compiler-errors": "".join(
        f"src/mod{i}.c:{i}:5: error: expected ';' before '}}' token\n" for i in range(1, 50)
    ),
    "stack-trace": 'Exception in thread "main" java.lang.IllegalStateException: boom\n'
    + "".join(f"\tat com.example.Cls{i}.method(Cls{i}.java:{i})\n" for i in range(40)),
    "file-listing": "".join(f"./src/pkg{i // 10}/module_{i}.py\n" for i in range(300)),
    "tree": ".\n" + "".join(f"├── dir{i}\n│   └── file{i}.txt\n" for i in range(100)),
    "grep": "".join(f"src/app/module{i}.py:{i * 3}:    value = compute({i})\n" for i in range(300)),
    "file-view": "".join(f"{i:6d}→    code line {i}\n" for i in range(1, 400)),
    "markdown": "# Title\n\n"
    + "".join(f"## Part {i}\n\nSome **bold** text and a [link](http://x/{i}).\n\n" for i in range(50)),
    "text": "".join(
        f"It was the best of times, it was the worst of times, chapter {i}.\n" for i in range(200)
    ),
}


@pytest.mark.parametrize("label", KINDS)
def test_every_label_is_detected(label: str) -> None:
    assert detect(SAMPLES[label]) == label


def test_detection_looks_inside_agent_envelopes_and_orders_sensibly() -> None:
    body = SAMPLES["csv"]
    assert detect(f"<returncode>0</returncode>\n<output>\n{body}</output>") == "csv"
    assert (
        detect("Chunk ID: ab12\nWall time: 0.1 seconds\nProcess exited with code 0\nOutput:\n" + body)
        == "csv"
    )
    numbered_python = "".join(f"{i:6d}\tdef f{i}(self):\n" for i in range(1, 200))
    assert detect(numbered_python) == "file-view"
    assert detect(PYTEST_LOG) == "pytest"  # with a traceback in it
    assert detect("") == "text" and detect("\n\n  \n") == "text"


def test_detection_reads_a_bounded_sample() -> None:
    big = SAMPLES["python"] * 2000
    assert detect(big) == "python"
    # What lies between the sampled head and tail is never read: replacing it changes nothing.
    middle = len(big) // 2
    damaged = big[: middle - 1000] + "\x00{not python at all}" * 50 + big[middle + 1000 :]
    assert detect(damaged) == "python"


def test_a_blank_output_is_text_whatever_the_call_hints() -> None:
    assert detect("\n  \n", path="src/app.py") == "text"
    assert detect("   ", report=True) == "text"
    assert detect(SAMPLES["markdown"], path="notes.py") == "python"  # a hint still counts where there is text


def test_a_result_detected_again_at_each_level_runs_the_rules_once(monkeypatch: pytest.MonkeyPatch) -> None:
    detect_module = importlib.import_module("toolbudget.previews.detect")
    detect_module._sampled.cache_clear()
    runs: list[int] = []
    content: Callable[[str, str, list[str]], str] = detect_module._content

    def counting(head: str, tail: str, lines: list[str]) -> str:
        runs.append(len(lines))
        return content(head, tail, lines)

    monkeypatch.setattr(detect_module, "_content", counting)
    text = SAMPLES["pytest"] * 40  # longer than the sample: a head and a tail
    # Its cap's preview, compaction's, then its summary with the call's hints.
    assert detect(text) == detect(text) == detect(text, path=None, report=False) == "pytest"
    assert detect(text + "one more line\n") == "pytest"  # another tail: the rules run again
    assert len(runs) == 2


def test_every_label_has_a_strategy() -> None:
    assert set(STRATEGY) <= set(KINDS)
    assert set(STRATEGY.values()) <= {"json", "table", "diff", "log", "log-or-plain"}


@pytest.mark.parametrize("label", KINDS)
def test_every_sample_previews_within_its_guarantees(label: str) -> None:
    text = SAMPLES[label]
    for limit in (300, 700, 1500):
        check(text, limit)
        check(text, limit, is_error=True, stderr_limit=500)


# ---------------------------------------------------------------------------------------------
# Property tests

PIECES = [
    "\n",
    "\r\n",
    "\r",
    "\x00",
    "😀",
    "👍🏽",
    "e\u0301",
    "中文字",
    "\t",
    "a,b,c\n",
    "ERROR: boom\n",
    "Traceback (most recent call last):\n",
    '  File "x.py", line 1, in f\n',
    "ValueError: bad\n",
    "    at com.x.Y(Y.java:1)\n",
    "stderr:\n",
    "stdout:\n",
    "<stderr>",
    "</stderr>\n",
    "diff --git a/x b/x\n--- a/x\n+++ b/x\n",
    "@@ -1,2 +1,2 @@\n",
    "-old\n",
    "+new\n",
    " ctx\n",
    "{",
    "}",
    "[",
    "]",
    '"k": ',
    "1,",
    "[toolbudget: ",
    "⋯ 3 lines ⋯\n",
    "=== 1 failed in 0.1s ===\n",
    "<returncode>0</returncode>\n<output>\n",
    "</output>",
    "x" * 80,
    "line of ordinary log output\n" * 4,
]

texts = st.lists(st.one_of(st.text(max_size=40), st.sampled_from(PIECES)), max_size=80).map("".join)
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# A text with a limit of at most 20 characters over its length.
texts_and_limits = texts.flatmap(lambda text: st.tuples(st.just(text), st.integers(0, len(text) + 20)))


@PROPERTY
@example(case=(TABLE_HEADER_TOO_WIDE, 208), is_error=False, stderr_limit=None, head_ratio=0.8)
@given(
    case=texts_and_limits,
    is_error=st.booleans(),
    stderr_limit=st.one_of(st.none(), st.integers(0, 3000)),
    head_ratio=st.sampled_from([0.8, 0.0, 1.0, 0.5, float("nan"), -3.0]),
)
def test_guarantees_hold_for_arbitrary_text(
    case: tuple[str, int], is_error: bool, stderr_limit: int | None, head_ratio: float
) -> None:
    text, limit = case
    check(text, limit, is_error=is_error, stderr_limit=stderr_limit, head_ratio=head_ratio)


# Fragments of the lines detection's patterns look for, to be joined into texts at random.
LINE_PIECES = [
    "\n",
    "\r\n",
    " ",
    "  ",
    "\t",
    "x",
    ":",
    "# ",
    "- ",
    "* ",
    "**b",
    "[a](b)",
    "|a|",
    "1. ",
    "> q",
    "```",
    "def f(",
    "class C:",
    "import os",
    "from a import b",
    "try:",
    "@dec",
    "package main",
    "func f(",
    "pub fn f",
    "use a::b",
    "const x = ",
    "export function",
    "interface I",
    "#include <a>",
    "template<",
    "commit 0123abcd",
    "diff --git a b",
    "--- a\n+++ b",
    "@@ -1,2 +1,2 @@",
    "===== 1 passed in 0.1s =====",
    "FAILED t.py::x",
    "Ran 3 tests in 0.1s",
    "FAIL: t (m.T)",
    "PASS a.test.js",
    "Tests: 1 total",
    "=== RUN TestA",
    "--- FAIL: TestA",
    "ok  \tpkg 0.1s",
    "a.c:1:2: error",
    "a.py:1:2: C0114: ",
    "error: x\n  --> a.rs:1:2",
    'Traceback (most recent call last):\n  File "',
    "  at a.B(C.java:1)\n",
    "  at f (a.js:1:2)\n",
    "panic: x",
    "goroutine 1 [running]:",
    "thread 'm' panicked at ",
]
# Lines of a few fragments each, so that lines of one kind often follow each other.
line_texts = st.lists(st.lists(st.sampled_from(LINE_PIECES), max_size=4).map("".join), max_size=30).map(
    "\n".join
)
# The Markdown signs detection counts, as one plain MULTILINE pattern.
MD_SIGNS = re.compile(
    r"^```|\*\*\S|\[[^\]\n]{1,200}\]\([^)\s]{1,300}\)|^[ \t]*[-*+] \S|^\|[^\n]*\|[ \t]*$|^\d+\. \S|^> \S",
    re.M,
)


@PROPERTY
@example(text="\n".join(piece for piece in LINE_PIECES for _ in range(2)))  # each twice in a row
@example(text="\r\n".join(piece for piece in LINE_PIECES for _ in range(2)))
@given(text=line_texts)
def test_line_patterns_searched_from_newline_to_newline_find_what_the_plain_ones_find(text: str) -> None:
    detect_module = importlib.import_module("toolbudget.previews.detect")
    searched = [v for v in vars(detect_module).values() if isinstance(v, LinePattern)]
    # Only these are counted: they have no match ending with a newline.
    counted = [detect_module._DIAGNOSTIC, detect_module._COMMIT, detect_module._MD_HEADING]
    counted += [pattern for _, pattern, _ in detect_module._LANGUAGE_LINES]
    for pattern in searched + counted:
        assert pattern.search(text) == (pattern.pattern.search(text) is not None)
    for pattern in counted:
        found = len(pattern.pattern.findall(text))
        assert pattern.count(text) == found
        assert pattern.count(text, 2) == min(2, found)
    assert detect_module._md_signs(text) == len(MD_SIGNS.findall(text))


@PROPERTY
@given(text=line_texts, share=st.sampled_from([0.0, 0.1, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]))
def test_a_share_settled_early_is_the_share_counted_to_the_end(text: str, share: float) -> None:
    detect_module = importlib.import_module("toolbudget.previews.detect")
    lines = [line for line in text.split("\n") * 7 if line.strip()]  # past a step of lines
    for pattern in (detect_module._GREP, detect_module._LISTING, detect_module._NUMBERED, re.compile("x")):
        assert detect_module._at_least(lines, pattern, share) == (
            detect_module._share(lines, pattern) >= share
        )


LOG_PIECES = [
    *PIECES,
    "İ",  # lowers to two characters: the words are then looked for as they are
    "paniCritical warn ",
    "E   assert 1 == 2\n",
    "AssertionError\n",
    "test_error_handling\n",
    "FAILED t.py::x - boom\n",
    "warnings\n",
]
log_texts = st.lists(st.one_of(st.text(max_size=20), st.sampled_from(LOG_PIECES)), max_size=60).map("".join)


@PROPERTY
@given(text=log_texts)
def test_a_log_is_told_by_its_first_important_line(text: str) -> None:
    log_module = importlib.import_module("toolbudget.previews.log")
    assert log_module.looks_like_log(text) == bool(log_module.important_lines(text, 0, len(text)))


@PROPERTY
@given(text=log_texts, data=st.data())
def test_the_error_lines_kept_are_counted_as_a_scan_of_them_counts(text: str, data: st.DataObject) -> None:
    """The detail counts the kept error lines from the analysis where that is exact."""
    log_module = importlib.import_module("toolbudget.previews.log")
    strategy = log_module.LogStrategy(text, "\n")
    starts = [0, *(i + 1 for i, c in enumerate(text) if c == "\n"), len(text)]
    for _ in range(5):
        # Whole lines mostly, as a plan keeps them; any span now and then.
        if data.draw(st.booleans()):
            start, end = sorted(data.draw(st.lists(st.sampled_from(starts), min_size=2, max_size=2)))
        else:
            start, end = sorted(data.draw(st.lists(st.integers(0, len(text)), min_size=2, max_size=2)))
        assert strategy._important_in(start, end) == len(log_module.important_lines(text, start, end))


@pytest.mark.parametrize(
    "text",
    [
        "İstanbul\nERROR: boom\nok\nWarning: x\n",  # lowering lengthens the first line
        "ok\nE   assert 1\nTraceback (most recent call last):\n  x\nValueError\nend",
        "x" * 50 + " error " + "y" * 50 + "\nfailed\n",
    ],
)
def test_the_error_lines_kept_are_counted_as_a_scan_of_every_span_counts(text: str) -> None:
    log_module = importlib.import_module("toolbudget.previews.log")
    strategy = log_module.LogStrategy(text, "\n")
    cuts = sorted({0, len(text), min(30, len(text)), *(i + 1 for i, c in enumerate(text) if c == "\n")})
    for start in cuts:
        for end in cuts:
            if start <= end:
                assert strategy._important_in(start, end) == len(log_module.important_lines(text, start, end))


def read_traceback(text: str, at: int) -> tuple[int, int]:
    """A traceback's span read line by line: through the first line with text and no deeper indent."""
    start = text.rfind("\n", 0, at) + 1
    pos = text.find("\n", at) + 1 or len(text)
    for _ in range(400):
        if pos >= len(text):
            break
        end = text.find("\n", pos) + 1 or len(text)
        line = text[pos:end]
        pos = end
        if line.strip() and len(line) - len(line.lstrip(" \t")) <= at - start:
            break
    return start, pos


TRACE = "Traceback (most recent call last):"


@pytest.mark.parametrize(
    "text",
    [
        f"x\n{TRACE}\n  File a\n    f()\nValueError: x\nmore\n",
        f"  {TRACE}\n    File a\n\n   \t\n  KeyError\n",  # indented header, blank lines
        f"{TRACE}\r\n  File a\r\n\r\nOSError\r\n",
        f"{TRACE}\n  File a\n \x0c\n\x0c\n\x0cE\n",  # a form feed is not a blank but is no text
        f"{TRACE}\n File a\n  x\nE\n",  # one blank is deeper than none
        f"{TRACE}\n" + "  File a\n" * 500 + "Error\n",  # longer than a traceback may be
        f"{TRACE}\n" + ("  " + "y" * 99 + "\n") * 120 + "Error\n",  # its end past the window
        f"{TRACE}\n  File a\n  no end",
        f"{TRACE}",
    ],
)
def test_a_traceback_ends_where_reading_it_line_by_line_ends(text: str) -> None:
    log_module = importlib.import_module("toolbudget.previews.log")
    at = text.index(TRACE)
    found = log_module.LogStrategy(text, "\n")._py_trace(at)
    assert found == [read_traceback(text, at)]


json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=60),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=30),
        st.dictionaries(st.text(max_size=12), children, max_size=12),
    ),
    max_leaves=120,
)


@PROPERTY
@given(value=json_values, data=st.data(), indent=st.booleans())
def test_json_previews_are_valid_json_holding_the_marker(
    value: Any, data: st.DataObject, indent: bool
) -> None:
    text = json.dumps(value, indent=2 if indent else None, ensure_ascii=data.draw(st.booleans()))
    limit = data.draw(st.integers(0, len(text) + 20))
    made = check(text, limit)
    if len(text) > limit >= Recorder(text).threshold:
        assert made.kind == "json"


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)


# ---------------------------------------------------------------------------------------------
# The shared real trajectories

# What the data's rough `category` should be detected as. Categories not listed here
# ("other-text", "pip/install-log", "timeout-partial-output") have no single right label.
CATEGORY_KINDS: dict[str, set[str]] = {
    "file-view (numbered lines)": {"file-view"},
    "source-code": {"python", "go", "javascript", "typescript", "rust", "java", "c", "cpp"},
    "pytest": {"pytest"},
    "unittest/django-test": {"unittest"},
    "json": {"json"},
    "diff": {"diff"},
    "grep-results": {"grep"},
    "file/dir-listing": {"file-listing", "tree"},
    "markdown/prose (e.g. sub-agent report)": {"markdown", "text"},
    "python-traceback": {"stack-trace"},
}

_PYLINT = "pylint output (`path:line:col: C0114: message`): lint diagnostics, not grep hits"
_CAT_PY = "`cat` of a Python source file, which the category heuristic took for prose"
_GREP = "`grep -r`/`rg -n` hits (path:text lines), which the category heuristic took for prose"
_GEMINI = "mini-swe-agent/swebench_results/20251118_gemini-3-pro-74pct/trajs/"
_CODEX = "codex-cli/src/agents/plugins/codex/__tests__/fixtures/"

# Where detection disagrees with the rough category, and why: in each case detection is right.
KNOWN_EXCEPTIONS: dict[str, tuple[str, str]] = {
    _GEMINI + "pallets__flask-5014/pallets__flask-5014.traj.json#0:7": ("python", _CAT_PY),
    _GEMINI + "pallets__flask-5014/pallets__flask-5014.traj.json#0:16": ("python", _CAT_PY),
    _GEMINI + "pylint-dev__pylint-6528/pylint-dev__pylint-6528.traj.json#0:47": ("compiler-errors", _PYLINT),
    _GEMINI + "pylint-dev__pylint-6528/pylint-dev__pylint-6528.traj.json#0:50": ("compiler-errors", _PYLINT),
    _GEMINI + "pylint-dev__pylint-6528/pylint-dev__pylint-6528.traj.json#0:57": ("compiler-errors", _PYLINT),
    _GEMINI + "pylint-dev__pylint-6528/pylint-dev__pylint-6528.traj.json#0:59": ("compiler-errors", _PYLINT),
    _GEMINI + "pylint-dev__pylint-6528/pylint-dev__pylint-6528.traj.json#0:66": ("compiler-errors", _PYLINT),
    _GEMINI + "sympy__sympy-19495/sympy__sympy-19495.traj.json#0:3": ("grep", _GREP),
    _GEMINI + "sympy__sympy-19495/sympy__sympy-19495.traj.json#0:7": (
        "python",
        "`cat` of sympy/sets/conditionset.py: its only traceback is a doctest inside a docstring",
    ),
    _GEMINI + "sympy__sympy-19495/sympy__sympy-19495.traj.json#0:8": ("grep", _GREP),
    _CODEX + "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl#0:22": ("grep", _GREP),
}


def _shared_rows() -> list[dict[str, Any]]:
    index = trajectories_dir() / "LARGE_TOOL_RESULTS.jsonl"
    if not index.is_file():
        pytest.skip(SHARED_SKIP)
    return [json.loads(line) for line in index.read_text(encoding="utf-8").splitlines() if line.strip()]


@cache
def _results(path: Path) -> tuple[tuple[tuple[str, bool], ...], ...]:
    """Per conversation of a transcript, its tool results' (text, is_error), in order."""
    out = []
    for conversation in load_transcript(path).conversations:
        out.append(
            tuple(
                (text_of(part.content), part.is_error)
                for message in conversation.messages
                if message.role == "tool"
                for part in message.parts
                if isinstance(part, ToolResult)
            )
        )
    return tuple(out)


def _result(row: dict[str, Any]) -> tuple[str, bool]:
    """The result a row names: its ordinal counts within the conversation, or, for files of
    many short trajectories (tau-bench, OpenHands examples), across the whole file."""
    per_conversation = _results(trajectories_dir() / row["file"])
    ordinal = row["result_ordinal"]
    candidates = []
    if row["traj_index"] < len(per_conversation) and ordinal < len(per_conversation[row["traj_index"]]):
        candidates.append(per_conversation[row["traj_index"]][ordinal])
    flat = [r for conversation in per_conversation for r in conversation]
    if ordinal < len(flat):
        candidates.append(flat[ordinal])
    for text, is_error in candidates:
        if len(text) == row["chars"] and text.startswith(row["head"]):
            return text, is_error
    raise AssertionError(f"result not found: {row['file']} #{row['traj_index']}:{ordinal}")


def _key(row: dict[str, Any]) -> str:
    return f"{row['file']}#{row['traj_index']}:{row['result_ordinal']}"


@pytest.mark.shared
def test_every_large_real_result_previews_within_the_guarantees() -> None:
    rows = _shared_rows()
    assert len(rows) >= 180
    for row in rows:
        text, is_error = _result(row)
        for limit in (2000, 6000, 20000):
            made = check(text, limit, is_error=is_error, stderr_limit=8000)
            if len(text) <= limit:
                continue
            if _parses(text.strip()):
                assert made.kind == "json", _key(row)
                orjson.loads(made.text)
            if made.kind == "diff":
                for _, hunk in hunks_in(text):
                    if hunk.split("\n", 1)[0] in made.text:
                        assert hunk in made.text, (_key(row), limit)


@pytest.mark.shared
def test_detection_agrees_with_the_real_categories() -> None:
    agree = disagree = unmapped = 0
    seen_exceptions = set()
    for row in _shared_rows():
        text, _ = _result(row)
        label = detect(text)
        expected = CATEGORY_KINDS.get(row["category"])
        if expected is None:
            unmapped += 1
            continue
        key = _key(row)
        if label in expected:
            assert key not in KNOWN_EXCEPTIONS, f"{key} now agrees: drop it from KNOWN_EXCEPTIONS"
            agree += 1
        else:
            assert key in KNOWN_EXCEPTIONS, f"{key}: {row['category']!r} detected as {label!r}"
            assert KNOWN_EXCEPTIONS[key][0] == label, key
            seen_exceptions.add(key)
            disagree += 1
    assert seen_exceptions == set(KNOWN_EXCEPTIONS)
    assert agree >= 150 and disagree == len(KNOWN_EXCEPTIONS)
    assert agree + disagree + unmapped == len(_shared_rows())
