"""A small PNG reader for tests: 8-bit RGB or RGBA, not interlaced (what Chromium and vl-convert write).

Enough to count the pixels of a screenshot that are not the page's
background, without an imaging library.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class Image:
    width: int
    height: int
    channels: int
    rows: tuple[bytes, ...]

    def pixel(self, x: int, y: int) -> tuple[int, ...]:
        row = self.rows[y]
        return tuple(row[x * self.channels : x * self.channels + 3])

    def share_not(
        self, background: tuple[int, ...], box: tuple[int, int, int, int], tolerance: int = 8
    ) -> float:
        """The share of pixels in ``box`` (left, top, right, bottom) that are not ``background``."""
        left, top, right, bottom = (max(0, v) for v in box)
        right, bottom = min(right, self.width), min(bottom, self.height)
        if right <= left or bottom <= top:
            return 0.0
        other = 0
        for y in range(top, bottom):
            row = self.rows[y]
            for x in range(left, right):
                at = x * self.channels
                if any(abs(row[at + c] - background[c]) > tolerance for c in range(3)):
                    other += 1
        return other / ((right - left) * (bottom - top))


def read_png(data: bytes) -> Image:
    if not data.startswith(SIGNATURE):
        raise ValueError("not a PNG")
    at = len(SIGNATURE)
    idat = bytearray()
    width = height = channels = 0
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind = data[at + 4 : at + 8]
        chunk = data[at + 8 : at + 8 + length]
        at += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            if depth != 8 or colour not in (2, 6) or interlace:
                raise ValueError(
                    f"unsupported PNG: depth {depth}, colour type {colour}, interlace {interlace}"
                )
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        elif kind == b"IEND":
            break
    raw = zlib.decompress(bytes(idat))
    stride = width * channels
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        line = bytearray(raw[start + 1 : start + 1 + stride])
        _unfilter(raw[start], line, previous, channels)
        rows.append(bytes(line))
        previous = line
    return Image(width, height, channels, tuple(rows))


def _unfilter(kind: int, line: bytearray, above: bytearray, bpp: int) -> None:
    n = len(line)
    if kind == 0:
        return
    if kind == 1:
        for i in range(bpp, n):
            line[i] = (line[i] + line[i - bpp]) & 0xFF
    elif kind == 2:
        for i in range(n):
            line[i] = (line[i] + above[i]) & 0xFF
    elif kind == 3:
        for i in range(n):
            left = line[i - bpp] if i >= bpp else 0
            line[i] = (line[i] + ((left + above[i]) >> 1)) & 0xFF
    elif kind == 4:
        for i in range(n):
            a = line[i - bpp] if i >= bpp else 0
            b = above[i]
            c = above[i - bpp] if i >= bpp else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            predictor = a if pa <= pb and pa <= pc else b if pb <= pc else c
            line[i] = (line[i] + predictor) & 0xFF
    else:
        raise ValueError(f"unknown PNG filter {kind}")
