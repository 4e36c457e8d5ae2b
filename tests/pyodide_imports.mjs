// Test helper (tests/test_pyodide.py): restore the snapshot as the page's
// worker does, then import each module named on stdin and report what
// happened: {module: "ok" | "<ExceptionType>: <message>"}.
import {restore} from "./pyodide_restore.mjs";
import {readFileSync} from "node:fs";

const input = JSON.parse(readFileSync(0, "utf8"));
const pyodide = await restore(input);
pyodide.globals.set("_names", pyodide.toPy(input.modules));
const out = pyodide.runPython(`
import importlib, json
_out = {}
for _m in _names:
    try:
        importlib.import_module(_m)
        _out[_m] = "ok"
    except BaseException as e:
        _out[_m] = f"{type(e).__name__}: {e}"
json.dumps(_out)
`);
process.stdout.write(out);
