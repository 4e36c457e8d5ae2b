// Test helper (tests/test_pyodide.py): restore the build's memory snapshot in
// Node, exactly as the page's worker does, and run composer.render.page_json
// for every job. Reads {pyodide, snapshot, jobs: [{recipe, catalog, query}]}
// as JSON on stdin; writes one JSON array of page_json results to stdout.
import {readFileSync} from "node:fs";
import {pathToFileURL} from "node:url";

const input = JSON.parse(readFileSync(0, "utf8"));
const assets = new URL("../site_src/assets/", import.meta.url);
const {growingFactory} = await import(new URL("boot-python.mjs", assets).href);
const indexURL = input.pyodide.endsWith("/") ? input.pyodide : input.pyodide + "/";
const {loadPyodide} = await import(pathToFileURL(indexURL + "pyodide.mjs").href);
const factory = (await import(pathToFileURL(indexURL + "pyodide.asm.mjs").href)).default;
const bytes = new Uint8Array(readFileSync(input.snapshot));
const pyodide = await loadPyodide({indexURL, stdLibURL: input.stdlib, _loadSnapshot: bytes,
                                   createPyodideModule: growingFactory(factory, bytes.length)});
const pageJson = pyodide.globals.get("composer").render.page_json;
const out = input.jobs.map((j) => pageJson(j.recipe, j.catalog, j.query));
process.stdout.write(JSON.stringify(out));
