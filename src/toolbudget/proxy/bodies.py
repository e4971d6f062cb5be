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


def _bounded(decoder: Any, data: bytes, limit: int) -> bytes:
    """What ``decoder`` (a zlib decompressor) makes of ``data``, refused past ``limit`` bytes."""
    out: bytes = decoder.decompress(data, limit + 1)
    if len(out) > limit:
        raise InputError(f"the request body decodes to more than {limit} bytes")
    rest: bytes = decoder.flush()
    return out + rest


def _one(encoding: str, data: bytes, limit: int) -> bytes:
    if encoding in ("gzip", "x-gzip"):
        return _bounded(zlib.decompressobj(16 + zlib.MAX_WBITS), data, limit)
    if encoding == "deflate":
        return _inflate(data, limit)
    if encoding == "br":
        import brotli

        out: bytes = brotli.decompress(data)
        return out
    if encoding == "zstd":
        import zstandard

        with zstandard.ZstdDecompressor().stream_reader(data) as reader:
            out = reader.read(limit + 1)
        if len(out) > limit:
            raise InputError(f"the request body decodes to more than {limit} bytes")
        return out
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
