// The one way Python is set up for the page, shared by the build's snapshot
// maker (site_src/snapshot.mjs, in Node) and the Web Worker's cold boot
// (assets/composer-worker.js): unpack our pure-Python zip (composer, Jinja2,
// MarkupSafe, the site's templates), import them and compile the templates.
// It leaves no JavaScript object held by Python, which a memory snapshot
// requires ("Unexpected hiwire entry" otherwise).

export const HOME = "/home/pyodide";

export const BOOT_PY = `
import sys, pathlib
if "${HOME}" not in sys.path:
    sys.path.insert(0, "${HOME}")
import composer.api, composer.render
_t = pathlib.Path("${HOME}/site_templates")
composer.render.install_templates({p.name: p.read_text(encoding="utf-8") for p in _t.iterdir()})
del _t
`;

// The import caches: what zipimport and the path finders know of the
// standard-library zip. The page restores the snapshot with a trimmed zip
// (build.snapshot_stdlib_zip), so what they knew of the build's full one must
// not be kept (zipimport then reads the mounted zip's directory at its first
// import). Run by DROP_PY and RESTORED_PY.
const CLEAR_IMPORT_CACHES_PY = `
import sys, zipimport, importlib
zipimport._zip_directory_cache.clear()
sys.path_importer_cache.clear()
importlib.invalidate_caches()
`;

// Run by the snapshot maker only, after BOOT_PY and before DROP_PY, with the
// build's warm-up (build.py warmup_json) in the global _warm: compose and
// render one plan, so what every recipe reuses is already made when a page
// restores the snapshot (the vLLM flag look-ups, the schema's field types,
// Jinja2's first renders), then drop the warm-up recipe's context. Measured
// in Chromium, a P/D deep link's first plan after the restore: 395 → 219 ms
// (medians of 8, two builds alternating), for +25 kB gzip of snapshot. Composing its
// controls too, or more plans, left 0.09–0.74 MB more: the objects they free
// stay as garbage in Python's own allocator pools, which zeroFreeMemory
// (snapshot.mjs) cannot reach.
export const WARM_PY = `
import json as _json
import composer.api as _api, composer.render as _render
def _warm_up(text):
    data = _json.loads(text)
    for query in data["queries"]:
        _render.plan_json(data["recipe"], data["catalog"], query)
    _api.context_from_json.cache_clear()
    # The warm-up recipe's own words and values (its argv, key paths, quoted words, checked flags) are
    # no use to another recipe, and as live objects they keep Python's memory arenas from being freed.
    import composer.argv, composer.keypaths, composer.shell, composer.vllm_cli
    for memo in (composer.argv._parse_cached, composer.keypaths._joined, composer.shell.quote,
                 composer.vllm_cli._checked_unit):
        memo.cache_clear()
_warm_up(_warm)
del _warm_up, _warm, _json, _api, _render
`;

// Run by the snapshot maker only, after BOOT_PY (and WARM_PY): drop what the
// page never needs again, so the snapshot holds less. The regular
// expressions the warm-up compiled stay (re.purge() here gave a larger
// snapshot after the warm-up, measured: 7.14 against 7.12 MB gzip).
export const DROP_PY = CLEAR_IMPORT_CACHES_PY + `
import gc, linecache
linecache.clearcache()
gc.collect()
`;

// Run after every restore of the snapshot (the page's worker, and the tests'
// tests/pyodide_restore.mjs). DROP_PY's clearing does not survive: making the
// snapshot reads the full standard-library zip again, so the restored
// zipimport directory lists its 614 members at their offsets in that zip,
// while the file now mounted is the trimmed one — a lazy import of a module
// the trimmed zip ships (csv, calendar) failed with "bad local file header",
// one it does not ship with "EOF read where not expected", instead of
// importing or raising ModuleNotFoundError (an adversarial finding; measured
// with Pyodide 314.0.7). Clearing here makes the first import read the
// mounted zip's own directory.
export const RESTORED_PY = CLEAR_IMPORT_CACHES_PY;

// Names in sys.modules, as JSON (printed by the snapshot maker for the build).
export const MODULES_PY = "import json, sys; json.dumps(sorted(sys.modules))";

export function installSitePython(pyodide, zipBytes) {
  pyodide.unpackArchive(zipBytes, "zip", {extractDir: HOME});
  pyodide.runPython(BOOT_PY);
}

// The wasm module starts with 31.5 MB of memory; a larger snapshot must not be
// copied in before the memory has grown to its size (Pyodide 314 does not do
// it itself: "offset is out of bounds"). Wrap the module factory (the default
// export of pyodide.asm.mjs) so the instance's memory grows first
// (browser-runtime-notes.md); pass the result as loadPyodide's createPyodideModule.
//
// With `writer` (the snapshot path: `snapshotWriter`, or a Promise of it), the
// module instantiated is the build's copy without its data segments
// (composer/buildtime/wasm_data.py: the snapshot already holds that memory),
// and the snapshot's memory image is written by `writer`, not by Pyodide:
// - `writer.writeData` writes the segments' bytes into the fresh memory before
//   anything reads it: Emscripten's `preRun` steps (Pyodide's first one reads
//   the version word `_Py_Version` to name the standard library's zip) and then
//   the module's constructors (`initRuntime`, which read the static data). The
//   instance is handed on at once (Emscripten's and Pyodide's JavaScript set up
//   around it, which reads no memory), and the `preRun` steps are run by one
//   step that holds a run dependency until `writer` is there: given a Promise,
//   the module is compiled, instantiated and set up while the snapshot is still
//   on its way.
// - Pyodide's `API.restoreSnapshot` (called once the constructors ran) copies
//   the whole image (37.7 MB) from a buffer of the snapshot's full length: it is
//   wrapped so that `writer.writeImage` writes the image straight from the
//   packed file into the memory (the ~18 MB of kept pages; a left-out page only
//   where the memory below the heap's break, `_sbrk(0)`, holds a non-zero byte:
//   above it a fresh instance's memory is all zero), and Pyodide's restore then
//   reads only the header (`writer.header`: no image to copy). So the snapshot
//   is never unpacked into a buffer of its own (measured on 2026-12-06, P/D
//   deep link: snapshot hashed -> restored 96 -> 78 ms; README Performance).
//   Pass `SNAPSHOT_PLACEHOLDER` as loadPyodide's `_loadSnapshot` (Pyodide
//   awaits it before it instantiates, and hands it to the wrapped restore).
// A Promise that rejects leaves the dependency held and loadPyodide waiting:
// the caller races it (composer-worker.js).
export function growingFactory(factory, bytesNeeded, writer = null) {
  return (settings) => {
    const instantiate = settings.instantiateWasm;
    let memory = null;
    settings.instantiateWasm = (imports, done) => instantiate(imports, (instance, module) => {
      memory = instance.exports.memory;
      const missing = bytesNeeded - memory.buffer.byteLength;
      if (missing > 0) memory.grow(Math.ceil(missing / 65536));
      done(instance, module);
    });
    if (!writer) return factory(settings);
    let write = null;  // the writer, once there
    const steps = [].concat(settings.preRun || []);
    settings.preRun = [(M) => {
      M.addRunDependency("snapshot-data");
      Promise.resolve(writer).then((w) => {
        write = w;
        w.writeData(new Uint8Array(memory.buffer));
        for (const step of steps) step(M);  // each adds its own run dependencies before this one goes
        M.removeRunDependency("snapshot-data");
      });
    }];
    return factory(settings).then((M) => {
      const restore = M.API.restoreSnapshot;
      M.API.restoreSnapshot = () => {
        const w = write;
        write = writer = null;  // it holds the packed file (18 MB): not kept for the page's life
        w.writeImage(new Uint8Array(memory.buffer), M._sbrk(0));
        return restore(w.header);
      };
      return M;
    });
  };
}

// What the snapshot path passes as loadPyodide's `_loadSnapshot` (growingFactory).
export const SNAPSHOT_PLACEHOLDER = new Uint8Array(0);

const PATCH_MAGIC = 0x31504456;  // composer/buildtime/wasm_data.py MAGIC

// The writer of a snapshot's memory for growingFactory: {header, writeData(heap),
// writeImage(heap, dirtyBelow)}. `snapshot` is a packedSnapshot; `patch` the
// build's wasm data patch (composer/buildtime/wasm_data.py apply_patch, the same
// steps), or null for Pyodide's own module (its data segments are in it).
// writeData writes the data segments' bytes into a fresh heap of the
// snapshot's size, from the snapshot's image and the patch; writeImage writes
// the whole image (packedSnapshot copy), clearing left-out pages below
// `dirtyBelow` and below the end of what writeData wrote. The patch is checked here, in full,
// before anything runs: an error thrown inside Pyodide's instantiation hook
// would be swallowed and the boot never end.
export function snapshotWriter(snapshot, patch = null) {
  const ops = patch ? patchOps(patch, snapshot.imageLength) : [];  // [offset, length, patch start or -1: from the image]
  // writeImage clears left-out pages up to the end of what writeData wrote too, wherever the heap's
  // break is (an adversarial finding: a patch run above the break, from a build gone wrong, survived
  // the restore where Pyodide's full copy overwrote it).
  const dataEnd = ops.reduce((end, [off, len]) => Math.max(end, off + len), 0);
  return {
    header: snapshot.header,
    writeData: (heap) => {
      for (const [off, len, at] of ops) {
        if (at < 0) snapshot.copy(heap, off, off + len); else heap.set(patch.subarray(at, at + len), off);
      }
    },
    writeImage: (heap, dirtyBelow) => snapshot.copy(heap, 0, snapshot.imageLength, Math.max(dirtyBelow, dataEnd)),
  };
}

// The writes of a wasm data patch, checked in full against a memory image of `imageLength` bytes.
function patchOps(patch, imageLength) {
  const words = new DataView(patch.buffer, patch.byteOffset, patch.byteLength);
  const fail = (why) => { throw new Error(`the wasm data patch ${why}`); };
  if (patch.byteLength < 12 || words.getUint32(0, true) !== PATCH_MAGIC) fail("is not of its format");
  const ranges = words.getUint32(4, true), runs = words.getUint32(8, true);
  const ops = [];
  let pos = 12, data = 12 + 8 * (ranges + runs);
  if (data > patch.byteLength) fail("is truncated");
  for (let i = 0; i < ranges + runs; i++, pos += 8) {
    const off = words.getUint32(pos, true), len = words.getUint32(pos + 4, true);
    if (off + len > imageLength) fail("writes past the snapshot's memory");
    if (i < ranges) {
      ops.push([off, len, -1]);
    } else {
      if (data + len > patch.byteLength) fail("is truncated");
      ops.push([off, len, data]);
      data += len;
    }
  }
  if (data !== patch.byteLength) fail("has bytes after its last run");
  return ops;
}

const PACKED_MAGIC = 0x31505A53;  // composer/buildtime/sparse.py MAGIC

// The snapshot the page fetches has its all-zero pages left out
// (composer/buildtime/sparse.py: header, bitmap, kept pages); this reads it
// where it lies, never unpacking it into a buffer of its full length. Run on
// the packed file's checked bytes; a file whose sizes do not add up exactly is
// refused before anything runs. Returns {length, header, imageLength, copy, unpack}:
// - length: the snapshot's full length in bytes, as the maker wrote it;
// - header: a copy of Pyodide's snapshot header, the bytes before the memory
//   image (its length is the header's second uint32), as its restore reads it;
// - imageLength: the image's length (length - header's);
// - copy(heap, from, to, dirtyBelow = 0): heap[a] = image[a] for a in
//   [from, to). A left-out page is written (zeroed) only where it lies below
//   `dirtyBelow` and `heap` holds a non-zero byte there: the caller vouches
//   that `heap` is all zero from `dirtyBelow` on;
// - unpack(): the whole snapshot in a new buffer, the same bytes as sparse.unpack.
export function packedSnapshot(packed) {
  const words = new DataView(packed.buffer, packed.byteOffset, packed.byteLength);
  const fail = (why) => { throw new Error(`the packed snapshot ${why}`); };
  if (packed.byteLength < 16 || words.getUint32(0, true) !== PACKED_MAGIC) fail("is not of its format");
  const full = words.getUint32(4, true), page = words.getUint32(8, true), count = words.getUint32(12, true);
  if (page === 0 || count !== Math.ceil(full / page)) fail("has a page count that does not match its length");
  let at = 16 + Math.ceil(count / 8);
  if (at > packed.byteLength) fail("is truncated");
  // Runs of pages, kept or left out, as offsets in the snapshot: run i covers [starts[i], starts[i + 1])
  // and its bytes begin at from[i] in `packed` (-1: left out, all zero).
  const starts = [], from = [];
  for (let i = 0; i < count; i++) {
    const kept = (packed[16 + (i >> 3)] >> (i & 7)) & 1;
    const size = Math.min(page, full - i * page);
    if (kept && at + size > packed.byteLength) fail("is truncated");
    if (!starts.length || (from[from.length - 1] < 0) !== !kept) {
      starts.push(i * page);
      from.push(kept ? at : -1);
    }
    if (kept) at += size;
  }
  if (at !== packed.byteLength) fail("has bytes after its last page");
  starts.push(full);
  const raw = (start, end) => {  // the snapshot's bytes [start, end), for its header
    const out = new Uint8Array(end - start);
    copyRaw(out, start, end, -start, Infinity);
    return out;
  };
  // out[a + shift] = snapshot[a] for a in [start, end); left-out bytes zeroed below `dirtyBelow`
  // (offsets in `out`) where `out` holds a non-zero byte.
  function copyRaw(out, start, end, shift, dirtyBelow) {
    let lo = 0, hi = from.length - 1;  // the last run that starts at or before `start`
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid] <= start) lo = mid; else hi = mid - 1;
    }
    for (let i = lo; i < from.length && starts[i] < end; i++) {
      const a = Math.max(start, starts[i]), b = Math.min(end, starts[i + 1]);
      if (from[i] >= 0) out.set(packed.subarray(from[i] + a - starts[i], from[i] + b - starts[i]), a + shift);
      else if (a + shift < dirtyBelow) clearDirty(out, a + shift, Math.min(b + shift, dirtyBelow));
    }
  }
  if (full < 8) fail("is too short for a snapshot header");
  const headerLength = new DataView(raw(0, 8).buffer).getUint32(4, true);
  if (headerLength > full) fail("has a header longer than the snapshot");
  const header = raw(0, headerLength);
  return {
    length: full, header, imageLength: full - headerLength,
    copy: (heap, start, end, dirtyBelow = 0) => copyRaw(heap, start + headerLength, end + headerLength, -headerLength, dirtyBelow),
    unpack: () => { const out = new Uint8Array(full); copyRaw(out, 0, full, 0, 0); return out; },
  };
}

// Zero the 1-KiB pieces of heap[start, end) that hold a non-zero byte, reading
// the rest only (a page of a fresh instance's memory that nothing wrote stays
// unwritten: the stack's unused part, ~9 MB). `heap` starts its buffer (the
// wasm memory's view, or a new array). Eight words are or-ed per step: twice
// as fast as one in Node 20 over 11 MB of zeros (3.9 against 8.6 ms cold; in
// Chromium the deep link's medians did not move, 84 against 81 ms from the
// snapshot hashed to restored, within their noise).
function clearDirty(heap, start, end) {
  if (heap.byteOffset !== 0) throw new Error("clearDirty needs a view from the start of its buffer");
  const words = new Int32Array(heap.buffer, 0, Math.floor(heap.buffer.byteLength / 4));
  for (let a = start; a < end;) {
    const b = Math.min(end, (Math.floor(a / 1024) + 1) * 1024);
    const lo = Math.floor((a + 3) / 4), hi = Math.floor(b / 4);  // not >> 2: a memory may pass 2 GiB
    let acc = 0;
    for (let x = a; x < lo * 4 && x < b; x++) acc |= heap[x];
    let w = lo;
    for (; w + 8 <= hi; w += 8) {
      acc |= words[w] | words[w + 1] | words[w + 2] | words[w + 3] | words[w + 4] | words[w + 5] | words[w + 6] | words[w + 7];
    }
    for (; w < hi; w++) acc |= words[w];
    for (let x = Math.max(a, hi * 4); x < b; x++) acc |= heap[x];
    if (acc !== 0) heap.fill(0, a, b);
    a = b;
  }
}
