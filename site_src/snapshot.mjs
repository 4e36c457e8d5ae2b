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
// it compresses badly (Pyodide's Python is built without pymalloc:
// sysconfig WITH_PYMALLOC is 0, so every freed object is a free chunk of
// dlmalloc's). Zero it first: the memory above the heap's break (after
// malloc_trim), and every free chunk, the top chunk included. malloc may not
// take more memory from the system than it holds now
// (malloc_set_footprint_limit: it returns 0 instead of moving the break), so
// asking for every size from 8 MiB down to 8 bytes until it says no hands out
// every free chunk once; each is zeroed in full (malloc_usable_size), held,
// and all are freed again (free() writes only the chunk's own header words,
// and the size at its end).
// Nothing else changes: the same memory size, no live object touched.
//
// Until 2026-12-06 the loop stopped at 64 bytes and, without the limit,
// skipped any size within 4 MiB of the memory's end: every probe that found
// no free chunk moved the break up for good (this dlmalloc does not trim it
// back), so after a few probes every size was skipped, and how much was zeroed
// depended on where objects happened to lie. The build's own snapshot zeroed
// 8.8 MB where the same inputs, made from a script at another path (a path is a
// string in the heap), zeroed 9.8: 7.52 against 7.20 MB gzip, the deep link
// 10.17 MB against the target's 10 (measured on that day's code).
function zeroFreeMemory(M) {
  const heap = () => M.HEAPU8;
  const size0 = heap().length;
  M._malloc_trim(0);
  let zeroed = size0 - M._sbrk(0);
  heap().fill(0, M._sbrk(0));
  const brk = M._sbrk(0);
  M._malloc_set_footprint_limit(M._malloc_footprint());
  try {
    // Twice: freeing the held chunks merges neighbours, and a merged chunk keeps the header words of
    // the chunks it swallowed (a size here and there, which keeps a whole KiB of the packed snapshot);
    // the second pass gets the merged chunks and clears those too (measured: 2,480 such words left
    // after one pass).
    for (let pass = 0; pass < 2; pass++) {
      const held = [];
      try {
        for (let size = 1 << 23; size >= 8;) {
          const p = M._malloc(size);
          if (!p) { size >>= 1; continue; }  // no free chunk of this size left
          const usable = M._malloc_usable_size(p);
          heap().fill(0, p, p + usable);
          if (pass === 0) zeroed += usable;
          held.push(p);
        }
      } finally {
        for (const p of held) M._free(p);
      }
    }
  } finally {
    M._malloc_set_footprint_limit(-1);  // MAX_SIZE_T: no limit, as before
  }
  if (heap().length !== size0 || M._sbrk(0) !== brk) throw new Error("zeroing the free heap moved the heap's break");
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
// PYTHONOPTIMIZE=2 (python -OO): the code compiled here and by the page's later imports has no
// docstrings and no assert statements: the packed snapshot 18.35 -> 17.55 MB, gzip 7.09 -> 6.69 MB
// (measured 2026-12-06). Nothing the page runs reads a docstring (composer.context copies one, None
// then); the composer's asserts only narrow types for mypy, never check input (bad input raises
// its own errors, the same in CPython). The flag lives in the restored interpreter (sys.flags).
const pyodide = await loadPyodide({indexURL, _makeSnapshot: true,
                                   env: {PYTHONNODEBUGRANGES: "1", PYTHONHASHSEED: HASH_SEED, PYTHONOPTIMIZE: "2"},
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
