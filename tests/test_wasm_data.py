"""The snapshot path's wasm module without data segments, and the patch that
rebuilds them (composer/buildtime/wasm_data.py; the page applies it with
site_src/assets/boot-python.mjs ``snapshotWriter``)."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import struct
import subprocess

import pytest

import build
from composer.buildtime import wasm_data as W

needs_pyodide = pytest.mark.skipif(shutil.which("node") is None or not (build.PYODIDE_DIR / "pyodide.asm.wasm").exists(),
                                   reason="needs node and npm's pyodide (make test installs both)")


@pytest.fixture(scope="module")
def real():
    """Pyodide's module, the build's snapshot, and the pair the build ships."""
    wasm = (build.PYODIDE_DIR / "pyodide.asm.wasm").read_bytes()
    snapshot = build.make_snapshot(build.site_python_zip())
    return wasm, snapshot, *build.snapshot_wasm(snapshot)


def _sections(wasm: bytes) -> list[tuple[int, bytes]]:
    return [(sid, wasm[a:b]) for sid, a, b in W._sections(wasm)]


def _fresh_memory(wasm: bytes) -> bytearray:
    """What a fresh instance of ``wasm`` holds where its data segments lie."""
    segs = W.data_segments(wasm)
    memory = bytearray(max(o + len(d) for o, d in segs))
    for off, data in segs:
        memory[off:off + len(data)] = data
    return memory


@needs_pyodide
def test_the_module_differs_only_in_its_data_bytes(real):
    wasm, _, nodata, _ = real
    before, after = _sections(wasm), _sections(nodata)
    assert [sid for sid, _ in before] == [sid for sid, _ in after]
    for (sid, a), (_, b) in zip(before, after):
        if sid != 11:
            assert a == b, f"section {sid} changed"
    full, empty = W.data_segments(wasm), W.data_segments(nodata)
    assert [o for o, _ in full] == [o for o, _ in empty] and len(full) > 1000
    assert all(d == b"" for _, d in empty) and sum(len(d) for _, d in full) > 3_000_000
    # What it is for: the module's gzip loses the static data (3.5 → ~2.1 MB on Pyodide 314.0.7).
    assert len(gzip.compress(nodata, 6)) < len(gzip.compress(wasm, 6)) - 1_000_000


@needs_pyodide
def test_the_patch_rebuilds_every_segment_from_the_snapshot(real):
    wasm, snapshot, _, patch = real
    want = _fresh_memory(wasm)
    memory = bytearray(len(want))
    W.apply_patch(memory, snapshot, patch)
    assert memory == want
    assert len(gzip.compress(patch, 6)) < 100_000  # the snapshot holds nearly all of it already


@needs_pyodide
def test_the_pages_rebuilder_writes_the_same_bytes(real, tmp_path):
    """site_src/assets/boot-python.mjs ``snapshotWriter`` ``writeData`` (what
    runs in the worker, on the packed snapshot) against the Python reference,
    byte for byte."""
    wasm, snapshot, _, patch = real
    (tmp_path / "snap.bin").write_bytes(build.packed_snapshot(snapshot))
    (tmp_path / "patch.bin").write_bytes(patch)
    size = len(_fresh_memory(wasm))
    script = f"""
import {{readFileSync}} from "node:fs";
import {{createHash}} from "node:crypto";
const {{packedSnapshot, snapshotWriter}} = await import({json.dumps((build.ROOT / "site_src/assets/boot-python.mjs").as_uri())});
const heap = new Uint8Array({size});
snapshotWriter(packedSnapshot(new Uint8Array(readFileSync("snap.bin"))), new Uint8Array(readFileSync("patch.bin"))).writeData(heap);
console.log(createHash("sha256").update(heap).digest("hex"));
"""
    (tmp_path / "run.mjs").write_text(script)
    out = subprocess.run(["node", "run.mjs"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == hashlib.sha256(_fresh_memory(wasm)).hexdigest()


@needs_pyodide
@pytest.mark.parametrize("damage, says", [("magic", "not of its format"), ("truncated", "truncated"),
                                          ("trailing", "after its last run"), ("past memory", "past the snapshot")])
def test_the_pages_rebuilder_refuses_a_bad_patch_before_anything_runs(real, tmp_path, damage, says):
    """The page checks the whole patch before Pyodide's instantiation hook
    (which would swallow an error and never finish booting)."""
    _, snapshot, _, patch = real
    bad = bytearray(patch)
    if damage == "magic":
        bad[0] ^= 0xFF
    elif damage == "truncated":
        bad = bad[:-5]
    elif damage == "trailing":
        bad += b"\0"
    else:
        struct.pack_into("<I", bad, 12, len(snapshot))  # the first copy range starts past the memory
    (tmp_path / "snap.bin").write_bytes(build.packed_snapshot(snapshot))
    (tmp_path / "patch.bin").write_bytes(bytes(bad))
    script = f"""
import {{readFileSync}} from "node:fs";
const {{packedSnapshot, snapshotWriter}} = await import({json.dumps((build.ROOT / "site_src/assets/boot-python.mjs").as_uri())});
try {{ snapshotWriter(packedSnapshot(new Uint8Array(readFileSync("snap.bin"))), new Uint8Array(readFileSync("patch.bin"))); console.log("accepted"); }}
catch (e) {{ console.log(e.message); }}
"""
    (tmp_path / "run.mjs").write_text(script)
    out = subprocess.run(["node", "run.mjs"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert says in out.stdout, out.stdout + out.stderr[-1000:]
    with pytest.raises(W.WasmDataError, match=says):  # the Python reference says the same
        W.apply_patch(bytearray(4 << 20), snapshot, bytes(bad))


def _module(segments: bytes, count: int) -> bytes:
    """A minimal wasm binary: one memory and a data section of ``count`` segments."""
    memory = bytes([1, 0, 1])  # one memory, no maximum, 1 page
    data = W._enc(count) + segments
    return (b"\0asm\x01\0\0\0" + bytes([5]) + W._enc(len(memory)) + memory
            + bytes([11]) + W._enc(len(data)) + data)


def _i32_const(n: int) -> bytes:
    """``i32.const n`` (signed LEB128) and ``end``."""
    out = bytearray([0x41])
    while True:
        x, n = n & 0x7F, n >> 7
        if (n == 0 and not x & 0x40) or (n == -1 and x & 0x40):
            out.append(x)
            return bytes(out) + b"\x0b"
        out.append(x | 0x80)


def test_a_synthetic_module_round_trips():
    seg = bytes([0]) + _i32_const(16) + W._enc(4) + b"abcd"
    seg2 = bytes([0]) + _i32_const(100) + W._enc(2) + b"xy"
    wasm = _module(seg + seg2, 2)
    assert W.data_segments(wasm) == [(16, b"abcd"), (100, b"xy")]
    assert W.data_segments(W.without_data(wasm)) == [(16, b""), (100, b"")]
    memory = bytearray(200)
    memory[16:20] = b"abZd"   # the running program changed one byte
    memory[50] = 7            # and wrote between the segments (zero in a fresh instance)
    snapshot = struct.pack("<4I", 0, 16, 0, 0) + bytes(memory)
    patch = W.snapshot_patch(wasm, snapshot)
    rebuilt = bytearray(200)
    W.apply_patch(rebuilt, snapshot, patch)
    want = bytearray(200)
    want[16:20], want[100:102] = b"abcd", b"xy"
    assert rebuilt == want


@pytest.mark.parametrize("bad, says", [
    (b"not wasm at all", "not a WebAssembly"),
    (_module(bytes([1]) + W._enc(2) + b"ab", 1), "not an active segment"),            # a passive segment
    (_module(bytes([0, 0x23, 0, 0x0b]) + W._enc(1) + b"a", 1), "not an active segment"),  # offset from a global
    (_module(bytes([0, 0x41, 4, 0x0b]) + W._enc(1) + b"a" + b"junk", 1), "after its last segment"),
    (_module(bytes([0]), 1), "truncated"),                                   # a segment header cut short
    (_module(bytes([0, 0x41, 4]), 1), "truncated"),
    (_module(bytes([0, 0x41, 4, 0x0b]) + W._enc(9) + b"ab", 1), "runs past"),  # its size beyond the section
])
def test_modules_it_cannot_rebuild_are_refused_with_the_reason(bad, says):
    with pytest.raises(W.WasmDataError, match=says):
        W.without_data(bad)


def test_overlapping_segments_rebuild_as_instantiation_writes_them():
    """Where two segments overlap, the later one in the file wins (as the
    engine applies them in order), whatever their bytes sort as."""
    seg = lambda data: bytes([0]) + _i32_const(8) + W._enc(len(data)) + data  # noqa: E731
    wasm = _module(seg(b"zz") + seg(b"aa"), 2)
    snapshot = struct.pack("<4I", 0, 16, 0, 0) + bytes(32)
    rebuilt = bytearray(32)
    W.apply_patch(rebuilt, snapshot, W.snapshot_patch(wasm, snapshot))
    assert rebuilt[8:10] == b"aa"


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node (make test installs it)")
def test_a_patch_write_above_the_break_is_still_overwritten_by_the_image(tmp_path):
    """Adversarial finding: the worker's restore writes the image's left-out
    (all-zero) pages only below the heap's break (boot-python.mjs
    ``growingFactory``), so a patch run above it — a build gone wrong, the
    build's patches cover the data segments only — survived the restore, where
    Pyodide's full copy used to overwrite it. ``writeImage`` now clears up to
    the end of what ``writeData`` wrote too. A small snapshot whose image is
    zero past its first KiB and a patch that writes 64 bytes at 5,000, with the
    break at 0: after writeData and writeImage the heap is the image."""
    from composer.buildtime import sparse

    header = struct.pack("<2I", 0x1234, 16) + bytes(8)  # Pyodide's header: its length at offset 4
    image = bytes(range(1, 256)) * 4 + bytes(8 * 1024)
    full = header + image
    patch = struct.pack("<3I", W.MAGIC, 1, 1) + struct.pack("<2I", 0, 64) + struct.pack("<2I", 5000, 64) + b"\xab" * 64
    (tmp_path / "snap.bin").write_bytes(sparse.pack(full))
    (tmp_path / "patch.bin").write_bytes(patch)
    script = f"""
import {{readFileSync}} from "node:fs";
import {{createHash}} from "node:crypto";
const {{packedSnapshot, snapshotWriter}} = await import({json.dumps((build.ROOT / "site_src/assets/boot-python.mjs").as_uri())});
const w = snapshotWriter(packedSnapshot(new Uint8Array(readFileSync("snap.bin"))), new Uint8Array(readFileSync("patch.bin")));
const heap = new Uint8Array({len(image) + 1024});
w.writeData(heap);
const written = heap[5000];
w.writeImage(heap, 0);
console.log(written, createHash("sha256").update(heap).digest("hex"));
"""
    (tmp_path / "run.mjs").write_text(script)
    out = subprocess.run(["node", "run.mjs"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    written, digest = out.stdout.split()
    assert written == str(0xAB)  # the patch did write there
    assert digest == hashlib.sha256(image + bytes(1024)).hexdigest()
