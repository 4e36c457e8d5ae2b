// Test and bench helper: restore the build's memory snapshot in Node exactly
// as the page's worker does (site_src/assets/boot-python.mjs growingFactory).
// restore({pyodide, snapshot, stdlib?, patch?, raw?}) → the Pyodide instance (snapshot: the
// file, packed as the page fetches it or not; raw: without
// the worker's RESTORED_PY, to show what it fixes); ``stdlib`` is
// the trimmed standard library the snapshot path ships (build.snapshot_stdlib_zip),
// Pyodide's own when absent; ``patch`` the wasm data patch, with ``pyodide`` a
// directory whose pyodide.asm.wasm has no data segments (build.snapshot_runtime_dir),
// as the page serves them. Used by tests/pyodide_pages.mjs and tests/pyodide_soak.mjs.
import {readFileSync} from "node:fs";
import {pathToFileURL} from "node:url";

export async function restore(input) {
  const assets = new URL("../site_src/assets/", import.meta.url);
  const {RESTORED_PY, dataRebuilder, growingFactory, unpackSnapshot} = await import(new URL("boot-python.mjs", assets).href);
  const indexURL = input.pyodide.endsWith("/") ? input.pyodide : input.pyodide + "/";
  const {loadPyodide} = await import(pathToFileURL(indexURL + "pyodide.mjs").href);
  const factory = (await import(pathToFileURL(indexURL + "pyodide.asm.mjs").href)).default;
  // A packed snapshot (composer/buildtime/sparse.py, as the page fetches it: its magic "SZP1") is
  // unpacked by the worker's own function first.
  const file = new Uint8Array(readFileSync(input.snapshot));
  const packed = file.byteLength >= 4 && new DataView(file.buffer, file.byteOffset, 4).getUint32(0, true) === 0x31505A53;
  const bytes = packed ? unpackSnapshot(file) : file;
  const options = {indexURL, _loadSnapshot: bytes, createPyodideModule: growingFactory(factory, bytes.length, input.patch ? dataRebuilder(bytes, new Uint8Array(readFileSync(input.patch))) : null)};
  if (input.stdlib) options.stdLibURL = input.stdlib;
  const pyodide = await loadPyodide(options);
  if (!input.raw) pyodide.runPython(RESTORED_PY);  // as the worker does after every restore
  return pyodide;
}
