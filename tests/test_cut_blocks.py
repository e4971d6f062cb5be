"""A cut result with several blocks keeps their order and every cache breakpoint."""

from __future__ import annotations

from typing import Any

import orjson

from toolbudget import MARKER_RE, Session, validate

IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
CACHE = {"type": "ephemeral", "ttl": "1h"}


def _lines(tag: str, n: int) -> str:
    return "".join(f"{tag} line {i:05d} of output\n" for i in range(n))


def _anthropic(content: list[Any]) -> dict[str, Any]:
    return {
        "model": "m",
        "max_tokens": 5,
        "messages": [
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": content}]},
        ],
        "tools": [{"name": "f", "input_schema": {"type": "object"}}],
    }


def _manage(name: str, body: dict[str, Any], api: str) -> tuple[Any, str]:
    """The managed body, and the original its one marker recalls; managing it again changes nothing."""
    with Session(name, store="memory:") as session:
        out = session.manage(body, api).body
        again = session.manage(out, api).body
        assert orjson.dumps(again) == orjson.dumps(out)
        marker = MARKER_RE.search(orjson.dumps(out).decode())
        assert marker is not None
        original = session.original(marker.group("key"))
        assert original is not None
    assert validate(out, api) == []
    return out, original


def test_a_breakpoint_on_a_later_text_block_survives_the_cut() -> None:
    first, second = _lines("a", 1_500), _lines("b", 1_500)
    content = [{"type": "text", "text": first}, {"type": "text", "text": second, "cache_control": CACHE}]
    out, original = _manage("bp-later", _anthropic(content), "anthropic")
    blocks = out["messages"][2]["content"][0]["content"]
    assert len(blocks) == 1
    assert blocks[0]["cache_control"] == CACHE
    assert len(blocks[0]["text"]) < len(first)
    assert original == first + "\n" + second


def test_text_after_an_image_stays_after_it() -> None:
    big = _lines("a", 3_000)
    content = [{"type": "text", "text": big}, IMAGE, {"type": "text", "text": "tail", "cache_control": CACHE}]
    out, original = _manage("order", _anthropic(content), "anthropic")
    blocks = out["messages"][2]["content"][0]["content"]
    assert [b["type"] for b in blocks] == ["text", "image", "text"]
    assert blocks[1] == IMAGE
    assert blocks[2] == {"type": "text", "text": "tail", "cache_control": CACHE}
    assert MARKER_RE.search(blocks[0]["text"]) is not None
    assert blocks[0]["text"].endswith("a line 02999 of output\n")  # the tail of its own text
    assert original == big + "\n" + "tail"


def test_a_text_block_cut_away_whole_hands_its_breakpoint_to_the_text_before() -> None:
    head, middle, tail = _lines("a", 1_500), _lines("b", 1_500), _lines("c", 1_500)
    content = [
        {"type": "text", "text": head},
        IMAGE,
        {"type": "text", "text": middle, "cache_control": CACHE},
        IMAGE,
        {"type": "text", "text": tail},
    ]
    out, original = _manage("bp-moved", _anthropic(content), "anthropic")
    blocks = out["messages"][2]["content"][0]["content"]
    assert [b["type"] for b in blocks] == ["text", "image", "image", "text"]
    assert blocks[0]["cache_control"] == CACHE
    assert blocks[0]["text"].startswith("a line 00000")
    assert blocks[3]["text"].endswith("c line 01499 of output\n")
    assert "cache_control" not in blocks[3]
    assert original == "\n".join([head, middle, tail])


def test_a_giant_line_cut_at_characters_keeps_the_text_after_the_image() -> None:
    giant = "x" * 60_000
    content = [{"type": "text", "text": giant}, IMAGE, {"type": "text", "text": "tail"}]
    out, _ = _manage("giant", _anthropic(content), "anthropic")
    blocks = out["messages"][2]["content"][0]["content"]
    assert [b["type"] for b in blocks] == ["text", "image", "text"]
    assert blocks[2]["text"] == "tail"


def _bedrock(content: list[Any]) -> dict[str, Any]:
    return {
        "modelId": "m",
        "toolConfig": {"tools": [{"toolSpec": {"name": "f", "inputSchema": {"json": {"type": "object"}}}}]},
        "messages": [
            {"role": "user", "content": [{"text": "task"}]},
            {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "f", "input": {}}}]},
            {
                "role": "user",
                "content": [
                    {"toolResult": {"toolUseId": "t1", "content": content}},
                    {"cachePoint": {"type": "default"}},
                ],
            },
        ],
    }


def test_bedrock_keeps_block_order_in_a_result_and_its_cache_point_after_it() -> None:
    image = {"image": {"format": "png", "source": {"bytes": "AAAA"}}}
    big = _lines("a", 3_000)
    out, original = _manage("bedrock", _bedrock([{"text": big}, image, {"text": "tail"}]), "bedrock-converse")
    message = out["messages"][2]["content"]
    assert message[1] == {"cachePoint": {"type": "default"}}
    blocks = message[0]["toolResult"]["content"]
    assert [next(iter(b)) for b in blocks] == ["text", "image", "text"]
    assert blocks[2] == {"text": "tail"}
    assert original == big + "\n" + "tail"


def test_bedrock_text_blocks_in_a_row_become_one_with_the_cache_point_kept() -> None:
    first, second = _lines("a", 1_500), _lines("b", 1_500)
    out, _ = _manage("bedrock-run", _bedrock([{"text": first}, {"text": second}]), "bedrock-converse")
    message = out["messages"][2]["content"]
    assert message[1] == {"cachePoint": {"type": "default"}}
    blocks = message[0]["toolResult"]["content"]
    assert len(blocks) == 1 and MARKER_RE.search(blocks[0]["text"]) is not None


def test_a_line_seen_earlier_does_not_pull_the_tail_back_before_the_image() -> None:
    from toolbudget.inplace import with_text
    from toolbudget.marker import marker_line
    from toolbudget.model import Media, Text, ToolResult

    body = "".join(f"step {i}\ndone\n" for i in range(2_000))
    result = ToolResult("t1", (Text(body), Media("image", "image/png", "AAAA"), Text("done")))
    marker = marker_line(1, 2, key="0123456789abcdef0123456789abcdef")
    cut = "step 0\ndone\n" + marker + "\n\ndone"  # the tail: the end of the log, then the caption
    out = with_text(result, cut)
    assert [type(p).__name__ for p in out.content] == ["Text", "Media", "Text"]
    first, _, last = out.content
    assert isinstance(first, Text) and isinstance(last, Text)
    assert last.text == "done"
    assert first.text + "\n" + last.text == cut
