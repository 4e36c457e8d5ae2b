// Build step (run by build.py with Node): boot the pinned Pyodide, set up the
// site's Python (boot-python.mjs) and write one memory snapshot of it. A page
// restores it in ~0.5 s instead of booting Python and importing everything
// (4-5 s). Usage: node snapshot.mjs PYODIDE_DIR SITE_PYTHON_ZIP OUT_FILE [WARMUP_JSON]
// (WARMUP_JSON: build.py warmup_json, composed once before the snapshot: WARM_PY)
// Prints {bytes, version, modules, zeroed}: modules are the names in sys.modules
// before DROP_PY, which the page's trimmed standard library leaves out;
// zeroed the bytes of free heap memory cleared before the snapshot.
// Pyodide's snapshot API is private (leading underscore): the version is
// pinned in package-lock.json and the snapshot path is tested in Chromium.
import {readFileSync, writeFileSync} from "node:fs";
import {pathToFileURL} from "node:url";
import {DROP_PY, MODULES_PY, WARM_PY, installSitePython} from "./assets/boot-python.mjs";

// The snapshot is the whole linear memory, free heap included: what the
// imports and template compilation allocated and freed is still there, and
// it compresses badly. Zero it first: the memory above the heap's break
// (after malloc_trim hands the top back), and every free chunk malloc can
// give out without growing the heap (allocated, zeroed, freed again: free()
// writes only the chunk's own header words). Nothing else changes: the same
// memory size, no live object touched. Measured on Pyodide 314.0.7: the
// snapshot's gzip 8.54 → 7.79 MB, raw size unchanged (37.7 MB).
function zeroFreeMemory(M) {
  const heap = () => M.HEAPU8;
  const size0 = heap().length;
  M._malloc_trim(0);
  let zeroed = size0 - M._sbrk(0);
  heap().fill(0, M._sbrk(0));
  const held = [];
  for (let size = 1 << 23; size >= 64;) {
    // Never ask for more than the break can reach without growing the memory.
    if (size + (4 << 20) > size0 - M._sbrk(0)) { size >>= 1; continue; }
    const brk = M._sbrk(0);
    const p = M._malloc(size);
    if (!p) { size >>= 1; continue; }
    if (heap().length !== size0) throw new Error("zeroing the free heap grew the memory");
    if (M._sbrk(0) !== brk) { M._free(p); size >>= 1; continue; }  // the free chunks of this size are used up
    heap().fill(0, p, p + size);
    zeroed += size;
    held.push(p);
  }
  for (const p of held) M._free(p);
  M._malloc_trim(0);
  heap().fill(0, M._sbrk(0));
  return zeroed;
}

const [pyodideDir, zipPath, outPath, warmPath] = process.argv.slice(2);
const indexURL = pyodideDir.endsWith("/") ? pyodideDir : pyodideDir + "/";
const {loadPyodide} = await import(pathToFileURL(indexURL + "pyodide.mjs").href);
// PYTHONHASHSEED: with a random seed the packed snapshot's size (composer/buildtime/sparse.py) varied
// between builds of the same inputs, 18.4 to 20.3 MB (measured 2026-12-06): the objects' places in the
// heap, so how many 1-KiB pieces hold any live byte, follow the order hashing gives them. A fixed seed
// gives the same layout, so the same size, on every build of the same inputs (the bytes still differ
// in a few places: the random module's state, made at import, and some words of the runtime's own).
// Of seeds 0-12, seven gave 18.4-18.5 MB and six 19.2-19.3 MB; 1 gave 18.40 MB on that day's code
// (another code can move any seed to the other group). The restored interpreter keeps the seed: pages
// hash with it (someone who collides dict keys through a link slows only the tab that opens it).
const HASH_SEED = "1";
// PYTHONNODEBUGRANGES: the code objects compiled here (the composer, Jinja2,
// the templates) keep line numbers but not the column ranges Python 3.11+
// adds for traceback carets: the snapshot's gzip 7.88 → 7.38 MB (measured,
// Pyodide 314.0.7). The flag lives in the snapshot's interpreter state; error
// messages, which the page shows, are unchanged.
const pyodide = await loadPyodide({indexURL, _makeSnapshot: true, env: {PYTHONNODEBUGRANGES: "1", PYTHONHASHSEED: HASH_SEED},
                                   stdout: () => {}, stderr: (m) => console.error(m)});
installSitePython(pyodide, new Uint8Array(readFileSync(zipPath)));
if (warmPath) {  // build.py WARMUP_QUERIES: a Python str, no JavaScript object stays held
  pyodide.globals.set("_warm", readFileSync(warmPath, "utf8"));
  pyodide.runPython(WARM_PY);
}
const modules = JSON.parse(pyodide.runPython(MODULES_PY));
pyodide.runPython(DROP_PY);
const zeroed = zeroFreeMemory(pyodide._module);
const snapshot = pyodide.makeMemorySnapshot();
writeFileSync(outPath, snapshot);
console.log(JSON.stringify({bytes: snapshot.length, version: pyodide.version, modules, zeroed}));
