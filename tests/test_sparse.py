"""The snapshot as the page fetches it, its all-zero pages left out
(composer/buildtime/sparse.py; the worker reads it where it lies with
site_src/assets/boot-python.mjs ``packedSnapshot``)."""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
import subprocess

import pytest

import build
from composer.buildtime import sparse

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="needs node (make test installs it)")


@pytest.mark.parametrize("data", [b"", b"\0", b"x", b"\0" * 10, b"ab\0\0cd", bytes(range(256)) * 3,
                                  b"\0" * 20 + b"z", b"z" + b"\0" * 21])
def test_packing_keeps_every_byte(data):
    packed = sparse.pack(data, page=8)
    assert sparse.unpack(packed) == data
    # a page of zeros costs one bit: only the pages with a non-zero byte are kept
    pages = [data[i:i + 8] for i in range(0, len(data), 8)]
    bitmap = (len(pages) + 7) // 8
    assert len(packed) == 16 + bitmap + sum(len(p) for p in pages if any(p))


def _real() -> tuple[bytes, bytes]:
    full = build.make_snapshot(build.site_python_zip())
    return full, build.packed_snapshot(full)


@pytest.fixture(scope="module")
def real():
    return _real()


def test_the_build_ships_the_snapshot_packed_and_smaller(real):
    full, packed = real
    assert sparse.unpack(packed) == full
    # what it is for: the zero pages of the zeroed free heap do not travel (37.7 → ~18.7 MB on 2026-12-06, 1-KiB pieces)
    assert len(packed) < 0.8 * len(full)


@pytest.mark.parametrize("damage, says", [("magic", "not of its format"), ("count", "page count"),
                                          ("truncated", "truncated"), ("trailing", "after its last page")])
def test_unpacking_refuses_a_file_whose_parts_do_not_add_up(damage, says):
    packed = bytearray(sparse.pack(b"abc\0\0\0\0\0" * 4 + b"tail", page=8))
    if damage == "magic":
        packed[0] ^= 0xFF
    elif damage == "count":
        struct.pack_into("<I", packed, 12, 99)
    elif damage == "truncated":
        del packed[-3:]
    else:
        packed += b"!"
    with pytest.raises(sparse.PackedSnapshotError, match=says):
        sparse.unpack(bytes(packed))


@needs_node
def test_the_pages_reader_gives_the_same_bytes(real, tmp_path):
    """``packedSnapshot`` (what runs in the worker) against the Python
    reference, byte for byte, on the build's snapshot: the whole file
    (``unpack``), the header Pyodide's restore reads, and the memory image
    written into a heap that already holds bytes (``copy`` with ``dirtyBelow``:
    a left-out page is zeroed below it and left alone above it), and its refusals."""
    full, packed = real
    header = struct.unpack_from("<I", full, 4)[0]
    (tmp_path / "packed.bin").write_bytes(packed)
    bad = bytearray(packed)
    bad += b"!"
    (tmp_path / "bad.bin").write_bytes(bytes(bad))
    script = f"""
import {{readFileSync}} from "node:fs";
import {{createHash}} from "node:crypto";
const {{packedSnapshot}} = await import({json.dumps((build.ROOT / "site_src/assets/boot-python.mjs").as_uri())});
const sha = (b) => createHash("sha256").update(b).digest("hex");
const s = packedSnapshot(new Uint8Array(readFileSync("packed.bin")));
console.log(sha(s.unpack()), s.length, s.imageLength, sha(s.header));
// A heap of ones: below `dirty` the image exactly, above it ones where the image's pages were left out.
const dirty = {len(full) // 3 + 5};
const heap = new Uint8Array(s.imageLength).fill(1);
s.copy(heap, 0, s.imageLength, dirty);
console.log(sha(heap.subarray(0, dirty)), sha(heap));
try {{ packedSnapshot(new Uint8Array(readFileSync("bad.bin"))); console.log("accepted"); }}
catch (err) {{ console.log(err.message); }}
"""
    (tmp_path / "run.mjs").write_text(script)
    out = subprocess.run(["node", "run.mjs"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    (digest, length, image, head), (below, whole), (refusal,) = [line.split() if i < 2 else [line]
                                                                 for i, line in enumerate(out.stdout.strip().splitlines())]
    assert digest == hashlib.sha256(full).hexdigest()
    assert int(length) == len(full) and int(image) == len(full) - header and head == hashlib.sha256(full[:header]).hexdigest()
    image_bytes = full[header:]
    dirty = len(full) // 3 + 5
    assert below == hashlib.sha256(image_bytes[:dirty]).hexdigest()
    want = bytearray(image_bytes)  # above `dirty`, what the packing left out stays as it was (ones)
    for start in range(0, len(full), sparse.PAGE):
        a, b = max(start, header + dirty), min(start + sparse.PAGE, len(full))
        if a < b and not any(full[start:b]):
            want[a - header:b - header] = b"\1" * (b - a)
    assert whole == hashlib.sha256(want).hexdigest() != below
    assert refusal == "the packed snapshot has bytes after its last page"
