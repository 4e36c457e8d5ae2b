// Test and bench helper: restore the build's memory snapshot in Node exactly
// as the page's worker does (site_src/assets/boot-python.mjs growingFactory).
// restore({pyodide, snapshot, stdlib?, patch?, raw?}) → the Pyodide instance (snapshot: the
// file, packed as the page fetches it; raw: without
// the worker's RESTORED_PY, to show what it fixes); ``stdlib`` is
// the trimmed standard library the snapshot path ships (build.snapshot_stdlib_zip),
// Pyodide's own when absent; ``patch`` the wasm data patch, with ``pyodide`` a
// directory whose pyodide.asm.wasm has no data segments (build.snapshot_runtime_dir),
// as the page serves them. `around(M, restore)`, when given, runs in place of Pyodide's
// API.restoreSnapshot (M: the Emscripten module): it must call restore() (the worker's
// restore, which writes the memory) and return what it returns; for tests that look at the
// memory right at the restore, before any Python runs. Used by tests/pyodide_pages.mjs,
// tests/pyodide_soak.mjs and tests/test_pyodide.py.
import {readFileSync} from "node:fs";
import {pathToFileURL} from "node:url";

export async function restore(input, around = null) {
  const assets = new URL("../site_src/assets/", import.meta.url);
  const {RESTORED_PY, SNAPSHOT_PLACEHOLDER, growingFactory, packedSnapshot, snapshotWriter} = await import(new URL("boot-python.mjs", assets).href);
  const indexURL = input.pyodide.endsWith("/") ? input.pyodide : input.pyodide + "/";
  const {loadPyodide} = await import(pathToFileURL(indexURL + "pyodide.mjs").href);
  const factory = (await import(pathToFileURL(indexURL + "pyodide.asm.mjs").href)).default;
  // Packed as the page fetches it (composer/buildtime/sparse.py, build.packed_snapshot), written into the
  // memory by the worker's own functions.
  const snapshot = packedSnapshot(new Uint8Array(readFileSync(input.snapshot)));
  const writer = snapshotWriter(snapshot, input.patch ? new Uint8Array(readFileSync(input.patch)) : null);
  let made = growingFactory(factory, snapshot.length, writer);
  if (around) {
    const inner = made;
    made = (settings) => inner(settings).then((M) => {
      const restoreSnapshot = M.API.restoreSnapshot;  // the worker's (growingFactory), which writes the memory
      M.API.restoreSnapshot = (x) => around(M, () => restoreSnapshot(x));
      return M;
    });
  }
  const options = {indexURL, _loadSnapshot: SNAPSHOT_PLACEHOLDER, createPyodideModule: made};
  if (input.stdlib) options.stdLibURL = input.stdlib;
  const pyodide = await loadPyodide(options);
  if (!input.raw) pyodide.runPython(RESTORED_PY);  // as the worker does after every restore
  return pyodide;
}
