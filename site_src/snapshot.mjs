// Build step (run by build.py with Node): boot the pinned Pyodide, set up the
// site's Python (boot-python.mjs) and write one memory snapshot of it. A page
// restores it in ~0.5 s instead of booting Python and importing everything
// (4-5 s). Usage: node snapshot.mjs PYODIDE_DIR SITE_PYTHON_ZIP OUT_FILE
// Prints {bytes, version, modules}: modules are the names in sys.modules
// before DROP_PY, which the page's trimmed standard library leaves out.
// Pyodide's snapshot API is private (leading underscore): the version is
// pinned in package-lock.json and the snapshot path is tested in Chromium.
import {readFileSync, writeFileSync} from "node:fs";
import {pathToFileURL} from "node:url";
import {DROP_PY, MODULES_PY, installSitePython} from "./assets/boot-python.mjs";

const [pyodideDir, zipPath, outPath] = process.argv.slice(2);
const indexURL = pyodideDir.endsWith("/") ? pyodideDir : pyodideDir + "/";
const {loadPyodide} = await import(pathToFileURL(indexURL + "pyodide.mjs").href);
const pyodide = await loadPyodide({indexURL, _makeSnapshot: true, stdout: () => {}, stderr: (m) => console.error(m)});
installSitePython(pyodide, new Uint8Array(readFileSync(zipPath)));
const modules = JSON.parse(pyodide.runPython(MODULES_PY));
pyodide.runPython(DROP_PY);
const snapshot = pyodide.makeMemorySnapshot();
writeFileSync(outPath, snapshot);
console.log(JSON.stringify({bytes: snapshot.length, version: pyodide.version, modules}));

