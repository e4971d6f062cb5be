"""Recall pages: never over their cap, and following them gives back the original exactly."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolbudget.errors import InputError
from toolbudget.recall import RecallQuery, parse_query, recall_page, recall_tool, split_lines
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
