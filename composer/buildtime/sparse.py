"""The memory snapshot as the page fetches it: its all-zero pages left out.

A Pyodide memory snapshot holds the whole linear memory. The snapshot maker
zeroes the free heap (``site_src/snapshot.mjs`` ``zeroFreeMemory``), so much
of it is zeros: on the build of 2026-12-06, 243 of its 576 64-KiB pages (15.9
of 37.7 MB), and 19.0 MB in 1-KiB pieces (``PAGE``). A host that compresses (the build's ``.gz``/``.br`` copies)
sends those pages almost for free; a host that sends files as they are (a
plain ``python -m http.server``, a bucket without content encoding) sends
every byte, and the page hashes every byte before it uses them. So the page
fetches the snapshot *packed*: each page that holds a non-zero byte, and a
bitmap of which ones. The worker checks the packed file's SHA-256, then
reads it where it lies (``site_src/assets/boot-python.mjs`` ``packedSnapshot``,
the same steps as ``unpack``) and writes its pages straight into Python's
memory at the restore (``growingFactory``), so the memory holds exactly the
bytes the maker wrote (tests/test_pyodide.py checks it byte for byte).

Format (little-endian ``uint32`` words): ``MAGIC``, the full length ``N``, the
page size ``S``, the number of pages ``ceil(N / S)``; then the bitmap, one bit
per page (page ``i`` is bit ``i % 8`` of byte ``i // 8``), padded to a whole
byte; then the kept pages' bytes in order (the last page may be short).
"""

from __future__ import annotations

import struct

MAGIC = 0x31505A53
"""``SZP1`` read as a little-endian word: a packed snapshot of this format."""
PAGE = 1024
"""Bytes per page of the packing. Smaller pages leave out the zeros inside
the heap's partly used pages too; measured on the build of 2026-12-06 (37.7
MB snapshot): 64 KiB (a WebAssembly page) 21.8 MB, 4 KiB 20.5, 1 KiB 18.7,
512 B 18.4 MB. At 1 KiB the bitmap is 4.6 kB and the page's unpacking copies
~18,000 pieces (a few ms)."""
_HEADER = struct.Struct("<4I")


class PackedSnapshotError(ValueError):
    """A packed snapshot that is not of this format or whose parts do not add
    up (the message says which)."""


def pack(snapshot: bytes, page: int = PAGE) -> bytes:
    """``snapshot`` without its all-zero pages: the header, the bitmap, the
    kept pages (module docstring). ``unpack(pack(x)) == x`` for any bytes."""
    count = -(-len(snapshot) // page)
    bitmap = bytearray(-(-count // 8))
    kept = []
    for i in range(count):
        chunk = snapshot[i * page:(i + 1) * page]
        if chunk.count(0) != len(chunk):
            bitmap[i // 8] |= 1 << (i % 8)
            kept.append(chunk)
    return _HEADER.pack(MAGIC, len(snapshot), page, count) + bytes(bitmap) + b"".join(kept)


def unpack(packed: bytes) -> bytes:
    """The full snapshot ``pack`` was given. Raises ``PackedSnapshotError``
    when ``packed`` is not of the format or its sizes do not add up exactly
    (the page refuses such a file the same way, before anything runs)."""
    if len(packed) < _HEADER.size:
        raise PackedSnapshotError("is shorter than its header")
    magic, full, page, count = _HEADER.unpack_from(packed)
    if magic != MAGIC:
        raise PackedSnapshotError("is not of its format")
    if page == 0 or count != -(-full // page):
        raise PackedSnapshotError("has a page count that does not match its length")
    at = _HEADER.size + -(-count // 8)
    if at > len(packed):
        raise PackedSnapshotError("is truncated")
    bitmap = packed[_HEADER.size:at]
    out = bytearray(full)
    for i in range(count):
        if bitmap[i // 8] >> (i % 8) & 1:
            size = min(page, full - i * page)
            if at + size > len(packed):
                raise PackedSnapshotError("is truncated")
            out[i * page:i * page + size] = packed[at:at + size]
            at += size
    if at != len(packed):
        raise PackedSnapshotError("has bytes after its last page")
    return bytes(out)
