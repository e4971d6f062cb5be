"""Writing a chart's PNG again, smaller: RGB when it is opaque, compressed hard.

vl-convert writes fast PNGs: RGBA, every row Sub-filtered, light
compression; a report's charts come out about five times larger than they
need to be. Charts are mostly flat colour, so the same pixels with the alpha
channel dropped (when every pixel is opaque) and compressed at zlib's
highest level are a fraction of the size, and still exact. Only the shape
vl-convert writes is rewritten (8-bit RGB or RGBA, not interlaced, filters None
and Sub); any other PNG is returned as it came. The output depends only on
the input.
"""

from __future__ import annotations

import struct
import zlib
from itertools import accumulate

__all__ = ["compact"]

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def compact(png: bytes) -> bytes:
    """``png`` with the same pixels, smaller; unchanged when its shape is not one this rewrites."""
    parsed = _read(png)
    if parsed is None:
        return png
    width, height, channels, rows = parsed
    if channels == 4 and all(row[3::4].count(255) == width for row in rows):
        rows = [_drop_alpha(row) for row in rows]
        channels = 3
    header = struct.pack(">IIBBBBB", width, height, 8, 2 if channels == 3 else 6, 0, 0, 0)
    raw = b"".join(b"\x00" + row for row in rows)
    return SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(raw, 9)) + _chunk(b"IEND", b"")


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _read(png: bytes) -> tuple[int, int, int, list[bytes]] | None:
    if not png.startswith(SIGNATURE):
        return None
    at = len(SIGNATURE)
    idat: list[bytes] = []
    width = height = channels = 0
    while at + 8 <= len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        kind, data = png[at + 4 : at + 8], png[at + 8 : at + 8 + length]
        at += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", data)
            if depth != 8 or colour not in (2, 6) or interlace:
                return None
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat.append(data)
        elif kind == b"IEND":
            break
    if not channels:
        return None
    try:
        raw = zlib.decompress(b"".join(idat))
    except zlib.error:
        return None
    stride = width * channels
    if len(raw) != height * (stride + 1):
        return None
    rows = []
    for y in range(height):
        start = y * (stride + 1)
        line = raw[start + 1 : start + 1 + stride]
        if raw[start] == 1:
            line = _unsub(line, channels)
        elif raw[start] != 0:
            return None
        rows.append(line)
    return width, height, channels, rows


def _unsub(line: bytes, channels: int) -> bytes:
    """Undo the Sub filter: each byte is a running sum, modulo 256, of its channel along the row."""
    out = bytearray(len(line))
    for c in range(channels):
        out[c::channels] = bytes(v & 0xFF for v in accumulate(line[c::channels]))
    return bytes(out)


def _drop_alpha(row: bytes) -> bytes:
    out = bytearray(len(row) // 4 * 3)
    for c in range(3):
        out[c::3] = row[c::4]
    return bytes(out)
