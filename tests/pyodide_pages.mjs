// Test helper (tests/test_pyodide.py): restore the build's memory snapshot in
// Node, exactly as the page's worker does, and run composer.render.page_json
// for every job. Reads {pyodide, snapshot, jobs: [{recipe, catalog, query}]}
// as JSON on stdin; writes one JSON array of page_json results to stdout.
import {readFileSync} from "node:fs";
import {restore} from "./pyodide_restore.mjs";

const input = JSON.parse(readFileSync(0, "utf8"));
const pyodide = await restore(input);
const pageJson = pyodide.globals.get("composer").render.page_json;
const out = input.jobs.map((j) => pageJson(j.recipe, j.catalog, j.query));
process.stdout.write(JSON.stringify(out));
