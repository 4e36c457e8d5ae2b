// Bench helper (bench.py --soak): restore the build's memory snapshot in Node
// exactly as the page's worker does (as tests/pyodide_pages.mjs), then compose
// page plans as random click walks inside Pyodide (composer.api.compose_page
// on contexts from the build's JSON, as the worker binds them) and report the
// WebAssembly heap size after each checkpoint. Reads {pyodide, snapshot, patch, docs:
// [{recipe, catalog}], checkpoints: [n, ...], seed} as JSON on stdin; writes
// [{plans, heap_bytes, p99_ms, worst_ms}, ...] as JSON to stdout.
import {readFileSync} from "node:fs";
import {restore} from "./pyodide_restore.mjs";

const input = JSON.parse(readFileSync(0, "utf8"));
const pyodide = await restore({pyodide: input.pyodide, snapshot: input.snapshot, patch: input.patch});
pyodide.globals.set("SOAK_INPUT", JSON.stringify({docs: input.docs, seed: input.seed}));
pyodide.runPython(`
import gc, json, random, time
from composer.api import compose_page, context_from_json
_in = json.loads(SOAK_INPUT)
_rng = random.Random(_in["seed"])
_docs = _in["docs"]
_state = {"i": 0, "ctx": None, "query": "", "times": []}

def soak_step(n):
    s = _state
    for _ in range(n):
        s["i"] += 1
        if s["ctx"] is None or s["i"] % 25 == 1:
            d = _docs[0] if _rng.random() < 0.3 else _rng.choice(_docs)
            s["ctx"], s["query"] = context_from_json(d["recipe"], d["catalog"]), ""
        if _rng.random() < 0.2:
            s["query"] = _rng.choice([f"nodes={_rng.randint(1, 64)}", f"hardware=hw{_rng.randint(0, 10 ** 9)}",
                                      f"instances={_rng.randint(1, 9)}&strategy=s{_rng.randint(0, 10 ** 6)}"])
        t = time.perf_counter()
        page = compose_page(s["ctx"], s["query"])
        s["times"].append(time.perf_counter() - t)
        opts = [o["query"] for items in page["options"].values() for o in items if not o.get("disabled")]
        s["query"] = _rng.choice(opts) if opts else ""
    t = sorted(s["times"])
    gc.collect()
    return json.dumps([s["i"], t[int(0.99 * (len(t) - 1))] * 1000, t[-1] * 1000, len(gc.get_objects())])
`);
const step = pyodide.globals.get("soak_step");
const out = [];
let done = 0;
for (const n of input.checkpoints) {
  const [plans, p99, worst, blocks] = JSON.parse(step(n - done));
  done = n;
  // The heap's byteLength only grows (a high-water mark); Python's live allocated blocks show what is held now.
  out.push({plans, heap_bytes: pyodide._module.HEAP8.buffer.byteLength, p99_ms: p99, worst_ms: worst, py_blocks: blocks});
}
process.stdout.write(JSON.stringify(out));
