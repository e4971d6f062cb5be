"""Compressed request bodies: decoded before they are read, so a compressing client is managed too.

Codex may send ``content-encoding: zstd`` to its backend; other clients use
gzip, deflate or br. A body the proxy manages is decoded, managed and sent
on identity-encoded (the header goes with the encoding it named). A body it
passes through keeps its encoding and its header.
"""

from __future__ import annotations

import zlib
from typing import Any

from ..errors import InputError

__all__ = ["ENCODINGS", "decode_body"]

ENCODINGS = ("gzip", "x-gzip", "deflate", "br", "zstd", "identity")


def _inflate(data: bytes, limit: int) -> bytes:
    try:
        return _bounded(zlib.decompressobj(), data, limit)
    except zlib.error:
        return _bounded(zlib.decompressobj(-zlib.MAX_WBITS), data, limit)  # raw deflate, as some send


def _bounded(decoder: Any, data: bytes, limit: int, room: int | None = None) -> bytes:
    """What ``decoder`` (a zlib decompressor) makes of ``data``, refused past ``room`` bytes
    (``limit``, the whole body's, unless less is left)."""
    room = limit if room is None else room
    out: bytes = decoder.decompress(data, room + 1)
    if len(out) > room:
        raise InputError(f"the request body decodes to more than {limit} bytes")
    rest: bytes = decoder.flush()
    return out + rest


def _gunzip(data: bytes, limit: int) -> bytes:
    """Every member of a gzip body, in order: concatenated members are one valid gzip stream (RFC 1952)."""
    out = b""
    while True:
        decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out += _bounded(decoder, data, limit, limit - len(out))
        data = decoder.unused_data
        if not data.strip(b"\x00"):  # the end, or the zero padding some writers leave after it
            return out


def _unbrotli(data: bytes, limit: int) -> bytes:
    import brotli

    decoder = brotli.Decompressor()
    try:
        out: bytes = decoder.process(data, output_buffer_limit=limit + 1)
    except TypeError:  # brotli before 1.2 takes no limit: the size is checked once decoded
        out = decoder.process(data)
    if len(out) > limit:
        raise InputError(f"the request body decodes to more than {limit} bytes")
    if not decoder.is_finished():
        raise InputError("the request body is not valid br: it ends before its stream does")
    return out


def _unzstd(data: bytes, limit: int) -> bytes:
    """Every frame of a zstd body: concatenated frames are one valid zstd stream (RFC 8878)."""
    import zstandard

    chunks: list[bytes] = []
    size = 0
    with zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True) as reader:
        while chunk := reader.read(min(limit + 1 - size, 1 << 20)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise InputError(f"the request body decodes to more than {limit} bytes")
    return b"".join(chunks)


def _one(encoding: str, data: bytes, limit: int) -> bytes:
    if encoding in ("gzip", "x-gzip"):
        return _gunzip(data, limit)
    if encoding == "deflate":
        return _inflate(data, limit)
    if encoding == "br":
        return _unbrotli(data, limit)
    if encoding == "zstd":
        return _unzstd(data, limit)
    if encoding == "identity":
        return data
    raise InputError(f"content-encoding {encoding!r} is not one of gzip, deflate, br, zstd")


def decode_body(data: bytes, content_encoding: str | None, limit: int) -> bytes:
    """``data`` with every encoding the header lists undone, last applied first."""
    if not content_encoding:
        return data
    for encoding in reversed([e.strip().lower() for e in content_encoding.split(",") if e.strip()]):
        try:
            data = _one(encoding, data, limit)
        except InputError:
            raise
        except Exception as exc:  # each codec has its own error class; all mean the same here
            raise InputError(f"the request body is not valid {encoding}: {exc}") from None
    return data
