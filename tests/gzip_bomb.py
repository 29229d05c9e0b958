"""A gzip bomb built in milliseconds: one gzip member (a single ``zlib.decompressobj``, as httpx's
decoder uses, inflates all of it), made of one compressed MiB repeated.

Deflating the whole body took seconds (~4 s for 512 MiB); here one MiB is deflated and ended with a
full flush (byte-aligned, no reference back to earlier data), so the same bytes can follow
themselves, then the final block and the gzip trailer (CRC-32 and size of the inflated body)."""

from __future__ import annotations

import struct
import zlib

_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # gzip, deflate, no name, no mtime, best, unknown OS


def gzip_bomb(head: bytes, fill: bytes, inflated_mib: int) -> bytes:
    """``head`` then ``inflated_mib`` MiB of ``fill`` (one byte), as a single gzip member."""
    chunk = fill * (1 << 20)
    co = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    first = co.compress(head) + co.flush(zlib.Z_FULL_FLUSH)
    block = co.compress(chunk) + co.flush(zlib.Z_FULL_FLUSH)
    crc = zlib.crc32(head)
    for _ in range(inflated_mib):
        crc = zlib.crc32(chunk, crc)
    size = len(head) + inflated_mib * len(chunk)
    return _HEADER + first + block * inflated_mib + co.flush() + struct.pack("<II", crc, size & 0xFFFFFFFF)
