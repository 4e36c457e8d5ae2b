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

// Run by the snapshot maker only, after BOOT_PY: drop what the page never
// needs again, so the snapshot holds less. The import caches describe the full
// standard-library zip the build boots with; the page restores the snapshot
// with a trimmed one (build.snapshot_stdlib_zip), so their offsets must not be
// kept (zipimport reads the new zip's directory at its first import).
export const DROP_PY = `
import sys, gc, zipimport, importlib, linecache, re
zipimport._zip_directory_cache.clear()
sys.path_importer_cache.clear()
importlib.invalidate_caches()
linecache.clearcache()
re.purge()
gc.collect()
`;

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
export function growingFactory(factory, bytesNeeded) {
  return (settings) => {
    const instantiate = settings.instantiateWasm;
    settings.instantiateWasm = (imports, done) => instantiate(imports, (instance, module) => {
      const memory = instance.exports.memory;
      const missing = bytesNeeded - memory.buffer.byteLength;
      if (missing > 0) memory.grow(Math.ceil(missing / 65536));
      done(instance, module);
    });
    return factory(settings);
  };
}
