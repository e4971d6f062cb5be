"""Recall pages: never over their cap, and following them gives back the original exactly."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolbudget import recall
from toolbudget.errors import InputError
from toolbudget.policy import Policy
from toolbudget.recall import RecallQuery, parse_query, recall_page, recall_tool, split_lines
from toolbudget.session import Session
from toolbudget.wire import APIS

KEY = "0123456789abcdef0123456789abcdef"
HEADER = re.compile(r"^\[toolbudget recall <<tb:[a-z0-9]+>>: (.*?)\]\n", re.S)
NEXT = re.compile(r'\n\[more follows: call toolbudget_recall with key "[a-z0-9]+", (.*)\]$')


def follow(text: str, max_chars: int) -> str:
    """Read ``text`` page by page the way an agent would, and glue the pages back together."""
    query = RecallQuery(KEY)
    pieces: list[str] = []
    line_pages = 0
    for _ in range(100_000):
        page = recall_page(text, query, max_chars)
        assert len(page) <= max_chars
        header = HEADER.match(page)
        assert header, page[:200]
        body = page[header.end() :]
        follow_up = NEXT.search(body)
        if follow_up:
            body = body[: follow_up.start()]
        pieces.append(body)
        if not follow_up:
            break
        args = dict(re.findall(r'(\w+) "([^"]*)"', follow_up.group(1)))
        query = parse_query({"key": KEY, **args})
        line_pages += "lines" in args
    return "".join(pieces)


def lines_of(text: str) -> list[str]:
    return [line.rstrip("\n") for line in split_lines(text)]


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=3000),
    max_chars=st.integers(300, 2000),
)
def test_pages_stay_under_their_cap_and_cover_the_text(text: str, max_chars: int) -> None:
    joined = follow(text, max_chars)
    # Line pages drop the newline between pages; the words are all there, in order.
    assert joined.replace("\n", "").replace("\r", "") == "".join(lines_of(text)).replace("\r", "")


def test_a_giant_line_pages_by_characters() -> None:
    text = "x" * 50_000 + "END"
    first = recall_page(text, RecallQuery(KEY), 2000)
    assert len(first) <= 2000 and 'chars "' in first
    assert follow(text, 2000).endswith("END")


def test_line_ranges_and_grep() -> None:
    text = "\n".join(f"line {n} {'ERROR boom' if n % 50 == 0 else 'ok'}" for n in range(1, 1001))
    page = recall_page(text, RecallQuery(KEY, lines=(10, 12)), 8000)
    assert page.splitlines()[1:] == ["line 10 ok", "line 11 ok", "line 12 ok"]
    assert "lines 10-12 of 1000" in page
    hits = recall_page(text, RecallQuery(KEY, grep=r"ERROR"), 8000)
    assert "20 lines matching" in hits
    assert "50: line 50 ERROR boom" in hits and "1000: line 1000 ERROR boom" in hits
    small = recall_page(text, RecallQuery(KEY, grep=r"ERROR"), 400)
    assert len(small) <= 400 and 'grep "ERROR", lines "' in small
    literal = recall_page(text, RecallQuery(KEY, grep="ERROR ("), 8000)
    assert "matched as plain text" in literal


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"key": ""},
        {"key": KEY, "lines": "ten"},
        {"key": KEY, "lines": "9:3"},
        {"key": KEY, "grep": ""},
        "[1]",
        "{",
    ],
)
def test_bad_arguments_say_what_is_wrong(arguments: object) -> None:
    with pytest.raises(InputError):
        parse_query(arguments)  # type: ignore[arg-type]


def test_marker_spelling_of_a_key_is_accepted() -> None:
    assert parse_query({"key": f"<<tb:{KEY}>>"}).key == KEY
    assert parse_query(f'{{"key": "{KEY}", "lines": "5:"}}').lines == (5, None)


@pytest.mark.parametrize("api", APIS)
def test_a_recall_tool_definition_for_every_api(api: str) -> None:
    tool = recall_tool(api)
    text = str(tool)
    assert "toolbudget_recall" in text and "key" in text


def grep_all(text: str, pattern: str, max_chars: int) -> list[int]:
    """Follow grep pages to the end; the line numbers shown, each page checked against its cap."""
    query = RecallQuery(KEY, grep=pattern)
    numbers: list[int] = []
    for _ in range(10_000):
        page = recall_page(text, query, max_chars)
        assert len(page) <= max_chars
        follow_up = NEXT.search(page)
        body = HEADER.sub("", page[: follow_up.start()] if follow_up else page)
        numbers += [int(n) for n in re.findall(r"^(\d+): ", body, re.M)]
        if not follow_up:
            return numbers
        args = dict(re.findall(r'(\w+) "((?:[^"\\]|\\.)*)"', follow_up.group(1)))
        assert args["grep"] == pattern
        query = parse_query({"key": KEY, **args})
    raise AssertionError("grep pages never ended")


@pytest.mark.parametrize(
    ("pattern", "max_chars"),
    [
        ("alpha|" + "(?:nomatch)" * 30, 8_000),  # a pattern longer than the page's fixed overhead
        ("alpha", 400),  # matching lines longer than a page
        ("gamma", 250),
    ],
)
def test_grep_pages_reach_every_match_whatever_the_pattern_and_page(pattern: str, max_chars: int) -> None:
    text = "".join(f"{i:05d} alpha beta gamma {'z' * (40 if i % 7 else 700)}\nnoise\n" for i in range(600))
    wanted = [n for n, line in enumerate(split_lines(text), 1) if re.search(pattern, line)]
    assert grep_all(text, pattern, max_chars) == wanted


# -- the model's arguments are hostile input ----------------------------------------------------------

ROWS = "".join(f"row {i}\n" for i in range(428))
PAGE = 600


def _archived(session: Session, text: str) -> str:
    """Cut ``text`` as a tool result in ``session``; the key its marker names."""
    body = {
        "model": "m",
        "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": text}]},
        ],
    }
    cuts = session.manage(body, "anthropic").report.cuts
    assert cuts and cuts[0].key
    return cuts[0].key


@pytest.fixture(scope="module")
def rows() -> Iterator[tuple[Session, str]]:
    policy = Policy(result_max_chars=1000, recall_max_chars=PAGE)
    with Session("hostile", store="memory:", policy=policy) as session:
        yield session, _archived(session, ROWS)


def _is_reason(answer: str) -> bool:
    return answer.startswith("toolbudget_recall: ") and "\n" not in answer and len(answer) <= PAGE


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"lines": [0, 2]}, "lines count from 1"),
        ({"lines": [-1000, 1]}, "lines count from 1"),
        ({"lines": 0}, "lines count from 1"),
        ({"lines": "0:3"}, "lines count from 1"),
        ({"lines": [3, 2]}, "the end comes before the start"),
        ({"lines": "3:2"}, "the end comes before the start"),
        ({"lines": True}, '"lines"'),
        ({"lines": [True, 2]}, "two whole numbers"),
        ({"lines": [1, 2, 3]}, "two whole numbers"),
        ({"lines": ["1", "2"]}, "two whole numbers"),
        ({"lines": [1.0, 2]}, "two whole numbers"),
        ({"lines": 2.0}, '"lines"'),
        ({"lines": float("nan")}, "nan"),
        ({"lines": float("inf")}, "inf"),
        ({"lines": {"from": 1}}, '"lines"'),
        ({"lines": 10**100}, "at most"),
        ({"lines": [1, 10**5000]}, "at most"),
        ({"lines": "1:" + "9" * 5000}, "at most"),
        ({"lines": "\uff11:\uff13"}, '"lines" must look like'),  # fullwidth digits are not numbers here
        ({"lines": ":"}, '"lines" must look like'),
        ({"lines": "-5"}, '"lines" must look like'),
        ({"lines": "-1:3"}, '"lines" must look like'),
        ({"lines": "1:2:3"}, '"lines" must look like'),
        ({"chars": [5, 5]}, "the range is empty"),
        ({"chars": -1}, "characters count from 0"),
        ({"chars": [0, 2.5]}, "two whole numbers"),
        ({"chars": "4:", "lines": "1:2"}, "cannot be combined"),
        ({"chars": "4:", "grep": "row"}, "cannot be combined"),
        ({"grep": 5}, '"grep" must be a string'),
        ({"grep": ["row"]}, '"grep" must be a string'),
        ({"grep": False}, '"grep" must be a string'),
        ({"grep": ""}, '"grep" must be a non-empty'),
        ({"grep": "x" * 5000}, "at most 1000 characters"),
        ({"key": 5}, '"key" must be a string'),
        ({"key": ["k"]}, '"key" must be a string'),
        ({"key": None}, 'a "key" is needed'),
        ({"key": "   "}, 'a "key" is needed'),
        ({"line": "1:3"}, "unknown argument 'line'"),
        ({7: "1:3"}, "unknown argument 7"),
    ],
)
def test_bad_recall_arguments_get_a_one_line_reason(
    rows: tuple[Session, str], arguments: dict[Any, Any], named: str
) -> None:
    session, key = rows
    answer = session.handle_recall({"key": key, **arguments})
    assert _is_reason(answer), answer[:300]
    assert named in answer


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[1]", "a list"),
        ('"x"', "a string"),
        ("5", "a number"),
        ("null", "null"),
        ("{", "not JSON"),
        ('{"key": 1}', '"key" must be a string'),
        ("[" * 5000, "not JSON"),
        ('{"key": "k", "lines": 1e400}', "not JSON"),
    ],
)
def test_json_text_that_is_not_an_object_gets_a_reason(
    rows: tuple[Session, str], text: str, named: str
) -> None:
    session, _ = rows
    answer = session.handle_recall(text)
    assert _is_reason(answer) and named in answer, answer


@pytest.mark.parametrize(
    ("given", "lines"),
    [
        ("2:4", (2, 4)),
        (" 2 - 4 ", (2, 4)),
        ([2, 4], (2, 4)),
        ((2, 4), (2, 4)),
        ("3", (3, 3)),
        (3, (3, 3)),
        ("3:3", (3, 3)),
        ("420:", (420, None)),
        ([420, None], (420, None)),
        (":3", (1, 3)),
        ("", None),
        (None, None),
    ],
)
def test_the_accepted_line_ranges(rows: tuple[Session, str], given: object, lines: object) -> None:
    session, key = rows
    assert parse_query({"key": key, "lines": given}).lines == lines
    answer = session.handle_recall({"key": key, "lines": given})
    start, end = lines if isinstance(lines, tuple) else (1, None)
    shown = answer.splitlines()[1:]
    assert shown[0] == f"row {start - 1}"
    if end is not None:
        assert shown[-1] == f"row {end - 1}" and len(shown) == end - start + 1


@pytest.mark.parametrize(
    ("given", "chars"),
    [("4:9", (4, 9)), ("4", (4, 5)), (4, (4, 5)), ([4, 9], (4, 9)), ("4:", (4, None)), (":9", (0, 9))],
)
def test_the_accepted_character_ranges(given: object, chars: object) -> None:
    assert parse_query({"key": KEY, "chars": given}).chars == chars


def test_a_range_past_the_end_says_so(rows: tuple[Session, str]) -> None:
    session, key = rows
    assert "the output has 428 lines" in session.handle_recall({"key": key, "lines": "500:"})
    assert "the output has 428 lines" in session.handle_recall({"key": key, "lines": "500:", "grep": "r"})
    answer = session.handle_recall({"key": key, "chars": "99999:"})
    assert f"the output has {len(ROWS)} characters" in answer and "row" not in answer.split("]")[1]


def test_a_bounded_range_keeps_its_end_from_page_to_page(rows: tuple[Session, str]) -> None:
    session, key = rows
    first = session.handle_recall({"key": key, "lines": "10:300"})
    follow_up = NEXT.search(first)
    assert follow_up and re.fullmatch(r'lines "\d+:300"', follow_up.group(1))
    pages = [first]
    while follow_up:
        lines = re.fullmatch(r'lines "(.*)"', follow_up.group(1))
        assert lines
        pages.append(session.handle_recall({"key": key, "lines": lines.group(1)}))
        follow_up = NEXT.search(pages[-1])
    shown = [line for page in pages for line in page.splitlines()[1:] if not line.startswith("[")]
    assert shown == [f"row {i}" for i in range(9, 300)]


@pytest.mark.parametrize(
    "arguments",
    [
        {"lines": (0, 2)},
        {"lines": (-1000, 1)},
        {"lines": (True, 2)},
        {"lines": (2, 1)},
        {"lines": (1.5, 3)},
        {"lines": (1, 10**40)},
        {"lines": [1, 2]},
        {"chars": (3, 3)},
        {"chars": (-1, None)},
        {"lines": (1, 2), "chars": (0, 5)},
        {"grep": 5},
        {"grep": ""},
        {"grep": "(a)\\1"},
        {"max_chars": 300.5},
        {"max_chars": True},
    ],
)
def test_session_recall_refuses_bad_ranges(rows: tuple[Session, str], arguments: dict[str, Any]) -> None:
    session, key = rows
    with pytest.raises(InputError):
        session.recall(key, **arguments)


def test_session_recall_refuses_a_key_that_is_not_a_string(rows: tuple[Session, str]) -> None:
    session, _ = rows
    with pytest.raises(InputError, match='"key" must be a string'):
        session.recall(5)  # type: ignore[arg-type]


JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats()
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
EDGES = [0, 1, 2, -1, -1000, 427, 428, 429, 10**12, 10**12 + 1, 10**40, -(10**40)]
NUMBER = st.sampled_from(EDGES) | st.integers() | st.booleans() | st.floats() | st.none()
RANGEISH = (
    NUMBER
    | st.lists(NUMBER, max_size=3)
    | st.from_regex(r"\s?-?[0-9]{0,4}\s?[:\-]?\s?-?[0-9]{0,4}", fullmatch=True)
    | st.sampled_from(["1:5", "5:1", "0:", ":", "3", "-2", "420:", "9" * 30 + ":"])
    | JSONISH
)
GREPISH = st.sampled_from(["row", "row 4(", "(a+)+$", "(a)\\1", "(?=x)", "[", "7$", "x{1001}"]) | JSONISH


@settings(max_examples=500, deadline=None)
@given(
    arguments=st.fixed_dictionaries(
        {},
        optional={
            "key": st.sampled_from(["real", "marker", "0" * 32]) | JSONISH,
            "lines": RANGEISH,
            "chars": RANGEISH,
            "grep": GREPISH,
            "other": JSONISH,
        },
    ),
    as_text=st.booleans(),
    instead=st.none() | JSONISH,
)
def test_any_arguments_get_text_within_a_page(
    rows: tuple[Session, str], arguments: dict[str, Any], as_text: bool, instead: Any
) -> None:
    session, key = rows
    spelled = {"real": key, "marker": f"<<tb:{key}>>"}
    if isinstance(arguments.get("key"), str):
        arguments["key"] = spelled.get(arguments["key"], arguments["key"])
    given_args: Any = arguments if instead is None else instead
    if as_text:
        with contextlib.suppress(TypeError, orjson.JSONEncodeError):
            given_args = orjson.dumps(given_args).decode()
    answer = session.handle_recall(given_args)
    assert isinstance(answer, str)
    assert len(answer) <= PAGE
    assert answer.startswith(("toolbudget_recall: ", "[toolbudget recall <<tb:"))


# -- grep runs the model's pattern: linear time, bounded work -------------------------------------------

_CATASTROPHIC = """
import sys
from toolbudget.recall import RecallQuery, recall_page
text = "ok\\n" + "a" * 5000 + "!\\n" + "a" * 26 + "\\n" + "(x+x+)+y " * 600 + "\\n"
for pattern in ("(a+)+$", "(a|aa)*$", "(a*)*b", "(x+x+)+y$", "^(\\\\w+\\\\s?)*$"):
    print(recall_page(text, RecallQuery("0123456789abcdef", grep=pattern), 8000).splitlines()[0])
"""


def test_a_catastrophic_pattern_on_a_long_line_answers() -> None:
    # A backtracking engine takes seconds on 26 a's and never ends on 5000; a generous bound shows it returns.
    done = subprocess.run(
        [sys.executable, "-c", _CATASTROPHIC],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ,
    )
    assert done.returncode == 0, done.stderr
    counts = [re.findall(r": (\d+) lines matching", header) for header in done.stdout.splitlines()]
    # Only the 26 a's end in a's; any line ends in (a|aa)*; no b; no line ends in y; two lines are words.
    assert counts == [["1"], ["4"], ["0"], ["0"], ["2"]]


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        ("(row)\\1", "invalid escape sequence"),
        ("row(?= 4)", "invalid perl operator"),
        ("(?<!x)row", "invalid perl operator"),
        ("(?P<n>r)(?P=n)", "RE2"),
        ("r{1001}", "invalid repetition size"),
        ("row\\Z", "invalid escape sequence"),
    ],
)
def test_a_pattern_re2_cannot_run_gets_a_reason(rows: tuple[Session, str], pattern: str, why: str) -> None:
    session, key = rows
    answer = session.handle_recall({"key": key, "grep": pattern})
    assert _is_reason(answer), answer
    assert why in answer and "no backreferences or lookaround" in answer
    with pytest.raises(InputError, match="RE2"):
        session.recall(key, grep=pattern)


def test_a_broken_pattern_is_matched_as_plain_text(rows: tuple[Session, str]) -> None:
    session, key = rows
    text = "a (b\nc[1\nplain\n"
    with Session("plain", store="memory:", policy=Policy(result_max_chars=1000)) as other:
        cut = _archived(other, text * 500)
        for pattern, line in (("a (b", "1: a (b"), ("c[1", "2: c[1"), ("\\", None)):
            answer = other.handle_recall({"key": cut, "grep": pattern})
            assert "matched as plain text" in answer
            if line:
                assert line in answer.splitlines()
    assert "matched as plain text" not in session.handle_recall({"key": key, "grep": "row 4[0-9]$"})


def test_grep_stops_at_its_work_limit_and_the_next_calls_go_on(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "".join(f"{i:05d} {'hit' if i % 9 == 0 else 'miss'} {'y' * 50}\n" for i in range(3000))
    pattern = "h[a-z]t"
    wanted = [n for n, line in enumerate(split_lines(text), 1) if re.search(pattern, line)]
    monkeypatch.setattr(recall, "GREP_WORK", 200_000)
    first = recall_page(text, RecallQuery(KEY, grep=pattern), 8000)
    assert "the search stopped at the limit of work for one call" in first
    assert grep_all(text, pattern, 8000) == wanted


def test_a_line_longer_than_a_calls_work_is_searched_in_its_first_part(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(recall, "GREP_WORK", 100_000)
    text = "short hit\n" + "z" * 500_000 + " hit\nlast hit\n"
    page = recall_page(text, RecallQuery(KEY, grep="hit"), 8000)
    assert "searched in their first" in page.splitlines()[0]
    numbers = grep_all(text, "hit", 8000)
    assert numbers == [1, 3]


def test_an_archived_entry_that_is_not_utf8_gets_a_reason() -> None:
    with Session("bytes", store="memory:") as session:
        session.store.put(session.id, KEY, b"ok\n\xff\xfe not text")
        answer = session.handle_recall({"key": KEY})
        assert answer == "toolbudget_recall: the archived entry is not UTF-8 text"
