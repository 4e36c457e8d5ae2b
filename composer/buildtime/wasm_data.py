"""Pyodide's wasm without its data segments, for the page's snapshot path.

The wasm module (``pyodide.asm.wasm``) carries the interpreter's static data
as ~14,600 active data segments (3.2 MB raw, 1.5 MB of its 3.5 MB gzip). A
memory snapshot holds the whole linear memory from address 0
(``API.restoreSnapshot``: ``Module.HEAP8.set``), so on the snapshot path that
data travels twice. Measured on Pyodide 314.0.7: all but ~6,500 bytes of the
segments' ranges are equal in the build's snapshot.

So the snapshot path ships the module with every segment emptied
(``without_data``) and a small patch (``snapshot_patch``). The segments cannot
simply be dropped: Emscripten's start-up runs the module's constructors
(``initRuntime``: ``__wasm_call_ctors``) before Pyodide restores the snapshot,
and they read the static data ("null function or function signature
mismatch" with the segments zeroed). The page's ``instantiateWasm`` hook
(``site_src/assets/boot-python.mjs`` ``growingFactory``) therefore rebuilds the
segments' exact bytes in memory before it hands the instance on: each range is
copied from the snapshot, then the patch's bytes written over it. The
constructors see what they see today, and the restore then overwrites all of
memory as before.

Patch format (little-endian ``uint32`` words): ``MAGIC``, the number of copy
ranges ``R``, the number of patch runs ``P``; then ``R`` pairs (memory offset,
length) to copy from the snapshot's memory; then ``P`` pairs (memory offset,
length); then the patch runs' bytes, concatenated in that order.
"""

from __future__ import annotations

import struct

MAGIC = 0x31504456
"""``VDP1`` read as a little-endian word: a patch file of this module's format."""

_SECTION_DATA = 11
_SNAPSHOT_MEMORY_OFFSET = 4
"""Byte offset of the ``uint32`` that gives where a Pyodide 314 snapshot's
memory starts (``makeMemorySnapshot``: header words ``[magic, offset, …]``)."""


class WasmDataError(ValueError):
    """A wasm module or snapshot this module cannot work on (the message says
    which part and why); the build reports it and does not ship the pair."""


def _leb(b: bytes, i: int, signed: bool = False) -> tuple[int, int]:
    """``(value, index after it)`` of the LEB128 number at ``b[i]`` (unsigned,
    or two's-complement ``signed`` as ``i32.const`` writes it). Raises
    ``WasmDataError`` when ``b`` ends inside it."""
    result = shift = 0
    while True:
        if i >= len(b):
            raise WasmDataError("truncated LEB128 number")
        x = b[i]
        i += 1
        result |= (x & 0x7F) << shift
        shift += 7
        if not x & 0x80:
            if signed and x & 0x40:
                result -= 1 << shift
            return result, i


def _enc(n: int) -> bytes:
    out = bytearray()
    while True:
        x, n = n & 0x7F, n >> 7
        out.append(x | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _sections(wasm: bytes):
    """``(id, body start, body end)`` of each section of a wasm binary."""
    if wasm[:8] != b"\0asm\x01\0\0\0":
        raise WasmDataError("not a WebAssembly 1.0 binary")
    i = 8
    while i < len(wasm):
        sid = wasm[i]
        size, start = _leb(wasm, i + 1)
        if start + size > len(wasm):
            raise WasmDataError(f"section {sid} runs past the end of the file")
        yield sid, start, start + size
        i = start + size


def _segments(body: bytes):
    """``(header bytes, memory offset, data)`` of each segment of a data
    section's body. Only active segments of memory 0 at an ``i32.const``
    offset (flag 0) are accepted: Pyodide's main module has no other kind,
    and another kind would need the snapshot's layout to be read differently."""
    try:
        yield from _segments_of(body)
    except IndexError:
        raise WasmDataError("the data section is truncated") from None


def _segments_of(body: bytes):
    count, j = _leb(body, 0)
    for n in range(count):
        start = j
        flag, j = _leb(body, j)
        if flag != 0 or body[j] != 0x41:
            raise WasmDataError(f"data segment {n} is not an active segment at an i32.const offset (flag {flag})")
        offset, j = _leb(body, j + 1, signed=True)
        offset &= 0xFFFFFFFF  # an i32 address is unsigned
        if body[j] != 0x0B:
            raise WasmDataError(f"data segment {n}: its offset is not a single i32.const")
        j += 1
        header = body[start:j]
        size, j = _leb(body, j)
        if j + size > len(body):
            raise WasmDataError(f"data segment {n} runs past the data section")
        yield header, offset, body[j:j + size]
        j += size
    if j != len(body):
        raise WasmDataError("the data section has bytes after its last segment")


def data_segments(wasm: bytes) -> list[tuple[int, bytes]]:
    """``[(memory offset in bytes, data)]`` of every data segment of ``wasm``,
    in file order. Raises ``WasmDataError`` for a malformed module or a
    segment kind ``_segments`` does not accept."""
    for sid, start, end in _sections(wasm):
        if sid == _SECTION_DATA:
            return [(off, data) for _, off, data in _segments(wasm[start:end])]
    return []


def without_data(wasm: bytes) -> bytes:
    """``wasm`` with every data segment emptied (same segments, offsets and
    section order; each segment's bytes removed): the module the snapshot path
    instantiates. Every other section's body is copied byte for byte (its
    size re-encoded as the shortest LEB128)."""
    out = bytearray(wasm[:8])
    for sid, start, end in _sections(wasm):
        body = wasm[start:end]
        if sid == _SECTION_DATA:
            segs = list(_segments(body))
            body = _enc(len(segs)) + b"".join(header + _enc(0) for header, _, _ in segs)
        out += bytes([sid]) + _enc(len(body)) + body
    return bytes(out)


def snapshot_memory(snapshot: bytes) -> memoryview:
    """The linear memory held by a Pyodide 314 memory snapshot (what
    ``restoreSnapshot`` copies to address 0), without its header."""
    if len(snapshot) < 16:
        raise WasmDataError("the snapshot is too short to have a header")
    (offset,) = struct.unpack_from("<I", snapshot, _SNAPSHOT_MEMORY_OFFSET)
    if offset > len(snapshot):
        raise WasmDataError("the snapshot's header points past its end")
    return memoryview(snapshot)[offset:]


def snapshot_patch(wasm: bytes, snapshot: bytes, join_gap: int = 4096, merge_gap: int = 16) -> bytes:
    """The patch (format in the module docstring) that rebuilds, from the
    memory held by ``snapshot``, the bytes a fresh instance of ``wasm`` has
    where its data segments lie: segments closer than ``join_gap`` bytes are
    one copy range (the gap between them is zero in a fresh instance, and
    written as zeros where the snapshot holds something else); runs of
    differing bytes closer than ``merge_gap`` are one run. Raises
    ``WasmDataError`` when a segment lies outside the snapshot's memory."""
    memory = snapshot_memory(snapshot)
    spans: list[list] = []  # [start, end, [(offset, data)]]
    # By offset, stably: where segments overlap the later one in the file wins, as instantiation writes them.
    for off, data in sorted(((o, d) for o, d in data_segments(wasm) if d), key=lambda seg: seg[0]):
        if off < 0 or off + len(data) > len(memory):
            raise WasmDataError(f"a data segment at {off} (+{len(data)} bytes) lies outside the snapshot's memory")
        if spans and off - spans[-1][1] < join_gap:
            spans[-1][1] = max(spans[-1][1], off + len(data))
            spans[-1][2].append((off, data))
        else:
            spans.append([off, off + len(data), [(off, data)]])
    runs: list[tuple[int, int]] = []
    payload = bytearray()
    chunk = 64
    for start, end, segs in spans:
        fresh = bytearray(end - start)
        for off, data in segs:
            fresh[off - start:off - start + len(data)] = data
        held = memory[start:end]
        local: list[list[int]] = []  # [start, end) of each differing run, offsets within the span
        for c in range(0, end - start, chunk):
            if fresh[c:c + chunk] == held[c:c + chunk]:
                continue
            for k in range(c, min(c + chunk, end - start)):
                if fresh[k] != held[k]:
                    if local and k - local[-1][1] < merge_gap:
                        local[-1][1] = k + 1
                    else:
                        local.append([k, k + 1])
        for a, b in local:
            runs.append((start + a, b - a))
            payload += fresh[a:b]
    head = struct.pack("<3I", MAGIC, len(spans), len(runs))
    table = b"".join(struct.pack("<2I", s[0], s[1] - s[0]) for s in spans)
    table += b"".join(struct.pack("<2I", *r) for r in runs)
    return head + table + bytes(payload)


def apply_patch(memory: bytearray, snapshot: bytes, patch: bytes) -> None:
    """Rebuild the data segments in ``memory`` (a zeroed linear memory, as a
    freshly instantiated ``without_data`` module has) from ``snapshot`` and
    ``patch``: what the page's ``snapshotWriter``
    (site_src/assets/boot-python.mjs) does, with the same checks and words,
    for the tests. Raises ``WasmDataError`` for a patch that is not of this
    format, is truncated, has trailing bytes or writes past the snapshot's
    memory; nothing is written then."""
    def fail(why: str):
        raise WasmDataError(f"the wasm data patch {why}")

    if len(patch) < 12 or struct.unpack_from("<I", patch, 0)[0] != MAGIC:
        fail("is not of its format")
    _, n_ranges, n_runs = struct.unpack_from("<3I", patch, 0)
    held = snapshot_memory(snapshot)
    data = 12 + 8 * (n_ranges + n_runs)
    if data > len(patch):
        fail("is truncated")
    ops: list[tuple[int, bytes | memoryview]] = []
    for i in range(n_ranges + n_runs):
        off, length = struct.unpack_from("<2I", patch, 12 + 8 * i)
        if off + length > len(held):
            fail("writes past the snapshot's memory")
        if i < n_ranges:
            ops.append((off, held[off:off + length]))
        else:
            if data + length > len(patch):
                fail("is truncated")
            ops.append((off, patch[data:data + length]))
            data += length
    if data != len(patch):
        fail("has bytes after its last run")
    for off, src in ops:
        memory[off:off + len(src)] = src
