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
// With `rebuild` (the snapshot path: `dataRebuilder`, or a Promise of it), the
// module instantiated is the build's copy without its data segments
// (composer/buildtime/wasm_data.py: the snapshot already holds that memory).
// `rebuild` writes the segments' bytes into its memory before anything reads
// that memory: Emscripten's `preRun` steps (Pyodide's first one reads the
// version word `_Py_Version` to name the standard library's zip) and then the
// module's constructors (`initRuntime`, which read the static data). The
// instance is handed on at once (Emscripten's and Pyodide's JavaScript set up
// around it, which reads no memory), and the `preRun` steps are run by one step
// that holds a run dependency until `rebuild` is there: given a Promise, the
// module is compiled, instantiated and set up while the snapshot is still on
// its way. The constructors see a fresh instance's memory, and Pyodide's
// restore then overwrites all of it as before. A Promise that rejects leaves
// the dependency held and loadPyodide waiting: the caller races it
// (composer-worker.js).
export function growingFactory(factory, bytesNeeded, rebuild = null) {
  return (settings) => {
    const instantiate = settings.instantiateWasm;
    let memory = null;
    settings.instantiateWasm = (imports, done) => instantiate(imports, (instance, module) => {
      memory = instance.exports.memory;
      const missing = bytesNeeded - memory.buffer.byteLength;
      if (missing > 0) memory.grow(Math.ceil(missing / 65536));
      done(instance, module);
    });
    if (rebuild) {
      const steps = [].concat(settings.preRun || []);
      settings.preRun = [(M) => {
        M.addRunDependency("snapshot-data");
        Promise.resolve(rebuild).then((write) => {
          write(new Uint8Array(memory.buffer));
          for (const step of steps) step(M);  // each adds its own run dependencies before this one goes
          M.removeRunDependency("snapshot-data");
        });
      }];
    }
    return factory(settings);
  };
}

const PATCH_MAGIC = 0x31504456;  // composer/buildtime/wasm_data.py MAGIC

// The function that writes the data segments' bytes into a heap of the
// snapshot's size, from the snapshot's memory and the build's patch
// (composer/buildtime/wasm_data.py apply_patch, the same steps). The patch is
// checked here, in full, before anything runs: an error thrown inside
// Pyodide's instantiation hook would be swallowed and the boot never end.
export function dataRebuilder(snapshot, patch) {
  const words = new DataView(patch.buffer, patch.byteOffset, patch.byteLength);
  const fail = (why) => { throw new Error(`the wasm data patch ${why}`); };
  if (patch.byteLength < 12 || words.getUint32(0, true) !== PATCH_MAGIC) fail("is not of its format");
  const ranges = words.getUint32(4, true), runs = words.getUint32(8, true);
  const start = new DataView(snapshot.buffer, snapshot.byteOffset, snapshot.byteLength).getUint32(4, true);
  if (start > snapshot.byteLength) fail("belongs to another snapshot");
  const held = snapshot.subarray(start);
  const ops = [];  // [offset, source array, source start, length]
  let pos = 12, data = 12 + 8 * (ranges + runs);
  if (data > patch.byteLength) fail("is truncated");
  for (let i = 0; i < ranges + runs; i++, pos += 8) {
    const off = words.getUint32(pos, true), len = words.getUint32(pos + 4, true);
    if (off + len > held.byteLength) fail("writes past the snapshot's memory");
    if (i < ranges) {
      ops.push([off, held, off, len]);
    } else {
      if (data + len > patch.byteLength) fail("is truncated");
      ops.push([off, patch, data, len]);
      data += len;
    }
  }
  if (data !== patch.byteLength) fail("has bytes after its last run");
  return (heap) => { for (const [off, src, at, len] of ops) heap.set(src.subarray(at, at + len), off); };
}

const PACKED_MAGIC = 0x31505A53;  // composer/buildtime/sparse.py MAGIC

// The snapshot the page fetches has its all-zero pages left out
// (composer/buildtime/sparse.py: header, bitmap, kept pages); this writes
// it back into a zeroed buffer of its full length, the same steps as
// sparse.unpack: `into` when given (all zero, the full length the page was
// built with: the worker allocates it before the file arrives), else a new
// one. Run on the packed file's checked bytes; a file whose sizes do not add
// up exactly, or whose length is not `into`'s, is refused before anything runs.
export function unpackSnapshot(packed, into = null) {
  const words = new DataView(packed.buffer, packed.byteOffset, packed.byteLength);
  const fail = (why) => { throw new Error(`the packed snapshot ${why}`); };
  if (packed.byteLength < 16 || words.getUint32(0, true) !== PACKED_MAGIC) fail("is not of its format");
  const full = words.getUint32(4, true), page = words.getUint32(8, true), count = words.getUint32(12, true);
  if (page === 0 || count !== Math.ceil(full / page)) fail("has a page count that does not match its length");
  if (into && into.byteLength !== full) fail(`unpacks to ${full} bytes, not the ${into.byteLength} the page was built with`);
  let at = 16 + Math.ceil(count / 8);
  if (at > packed.byteLength) fail("is truncated");
  const out = into || new Uint8Array(full);
  for (let i = 0; i < count; i++) {
    if (!((packed[16 + (i >> 3)] >> (i & 7)) & 1)) continue;
    const size = Math.min(page, full - i * page);
    if (at + size > packed.byteLength) fail("is truncated");
    out.set(packed.subarray(at, at + size), i * page);
    at += size;
  }
  if (at !== packed.byteLength) fail("has bytes after its last page");
  return out;
}
