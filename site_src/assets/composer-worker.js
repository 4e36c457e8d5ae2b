// Runs the composer and the page's renderer (Python, in Pyodide) off the main
// thread. Boot: restore the build's memory snapshot (composer, Jinja2 and the
// compiled templates already imported: ~0.5 s), or, when the page asks for it
// after a failed restore, boot Python cold and import everything (~5 s).
// Protocol. The page sends {type:"init", mode:"snapshot"|"cold", indexURL,
// snapshotURL, snapshotSize, snapshotSha256, pyodideVersion, pythonURL,
// recipeURL, catalogURL}, then {type:"view", id, query} per choice. The worker
// replies {type:"progress", text} while booting, then {type:"ready", mode, ms,
// timings} or {type:"failed", stage:"snapshot"|"runtime", error}; per view
// request, in two parts, {type:"plan", id, view, ms} (view: JSON {plan,
// fragments} without the controls, composer.render.plan_json) and then
// {type:"controls", id, view, ms} (JSON {fragments:{controls}, next},
// controls_json), or {type:"error", id, error}. A request overtaken by a
// newer one gets no reply.
import {growingFactory, installSitePython} from "./boot-python.mjs";

let planJson = null;
let controlsJson = null;
let ready = null;
let latest = 0;  // id of the newest view request: older ones are skipped
// Plans of the queries a next click can send, composed ahead while idle (the
// same function, so the same bytes): a click then shows its plan at once.
const ahead = new Map();
const AHEAD_MAX = 64;

function remember(query, plan) {
  if (ahead.size >= AHEAD_MAX) ahead.delete(ahead.keys().next().value);
  ahead.set(query, plan);
}

async function composeAhead(id, queries) {
  for (const q of queries) {
    await new Promise((resolve) => setTimeout(resolve, 0));  // a click always goes first
    if (id !== latest) return;
    if (ahead.has(q)) continue;
    try { remember(q, planJson(q)); } catch (err) { return; }
  }
}

async function get(url, what, kind) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${what}: HTTP ${r.status}`);
  return kind === "bytes" ? new Uint8Array(await r.arrayBuffer()) : r.text();
}

async function boot(msg) {
  const t0 = performance.now();
  const data = Promise.all([get(msg.recipeURL, "recipe data"), get(msg.catalogURL, "catalogue")]);
  data.catch(() => {});  // reported when awaited below
  const image = msg.mode === "snapshot" ? get(msg.snapshotURL, "snapshot", "bytes") : get(msg.pythonURL, "composer", "bytes");
  image.catch(() => {});
  // Pyodide does not always reject when its wasm module or stdlib cannot be
  // fetched: check them first (alongside the other fetches) so a failure is
  // reported at once.
  const present = Promise.all(["pyodide.asm.wasm", "python_stdlib.zip"].map(async (name) => {
    const r = await fetch(msg.indexURL + name, {method: "HEAD"});
    if (!r.ok) throw new Error(`${name}: HTTP ${r.status}`);
  }));
  present.catch(() => {});
  // Pyodide 314 runs in module workers only (classic workers are refused).
  const {loadPyodide} = await import(msg.indexURL + "pyodide.mjs");
  await present;
  let pyodide;
  if (msg.mode === "snapshot") {
    let bytes, hashed;
    try {
      bytes = await image;
      if (bytes.length !== msg.snapshotSize) throw new Error(`snapshot is ${bytes.length} bytes, expected ${msg.snapshotSize}`);
      // A damaged snapshot of the right size would compose wrong commands: its
      // hash is checked before Python is used. digest() copies the bytes at
      // once, so it runs while the runtime restores instead of before it.
      hashed = crypto.subtle.digest("SHA-256", bytes).then((d) => {
        const hex = [...new Uint8Array(d)].map((b) => b.toString(16).padStart(2, "0")).join("");
        if (hex !== msg.snapshotSha256) throw new Error("snapshot content does not match its SHA-256");
      });
      hashed.catch(() => {});  // reported when awaited below
      const factory = (await import(msg.indexURL + "pyodide.asm.mjs")).default;
      pyodide = await loadPyodide({indexURL: msg.indexURL, _loadSnapshot: bytes,
                                   createPyodideModule: growingFactory(factory, bytes.length)});
      await hashed;
      if (pyodide.version !== msg.pyodideVersion) throw new Error(`runtime ${pyodide.version}, snapshot made with ${msg.pyodideVersion}`);
      pyodide.runPython("import composer.render\nassert composer.render._BROWSER is not None");
    } catch (err) {
      throw Object.assign(new Error(String(err.message || err)), {stage: "snapshot"});
    }
  } else {
    pyodide = await loadPyodide({indexURL: msg.indexURL});
    self.postMessage({type: "progress", text: "Python runtime ready; loading the composer…"});
    installSitePython(pyodide, await image);
  }
  const tRuntime = performance.now() - t0;
  const [recipeText, catalogText] = await data;
  const render = pyodide.globals.get("composer").render;
  const planFn = render.plan_json, controlsFn = render.controls_json;
  planJson = (query) => planFn(recipeText, catalogText, query);
  controlsJson = (query) => controlsFn(recipeText, catalogText, query);
  toolFns = {importJson: (text, hint) => render.import_json(recipeText, catalogText, text, hint || null),
             compareJson: (a, b) => render.compare_json(recipeText, catalogText, a, b)};
  const ms = Math.round(performance.now() - t0);
  self.postMessage({type: "ready", mode: msg.mode, ms, timings: {runtime: Math.round(tRuntime), ready: ms}});
}

// Import and compare (the page's tools): {type:"import", id, text, hint} →
// {type:"import", id, view} (composer.render.import_json: the pasted text is
// only an argument, it never leaves the page); {type:"compare", id, a, b} →
// {type:"compare", id, view} (compare_json); {type:"tool-error", id, tool, error}.
let toolFns = null;
async function tool(msg) {
  try { await ready; } catch (err) { return; }
  try {
    const view = msg.type === "import" ? toolFns.importJson(msg.text, msg.hint) : toolFns.compareJson(msg.a, msg.b);
    self.postMessage({type: msg.type, id: msg.id, view});
  } catch (err) {
    self.postMessage({type: "tool-error", id: msg.id, tool: msg.type, error: String((err && err.message) || err)});
  }
}

self.onmessage = async (ev) => {
  const msg = ev.data;
  if (msg.type === "import" || msg.type === "compare") return tool(msg);
  if (msg.type === "init") {
    ready = boot(msg).catch((err) => {
      self.postMessage({type: "failed", stage: err.stage || "runtime", error: String((err && err.message) || err)});
      throw err;
    });
    return;
  }
  if (msg.type === "view") {
    latest = msg.id;
    try { await ready; } catch (err) { return; }
    if (msg.id !== latest) return;  // a newer choice came in meanwhile
    try {
      // The plan first (what a click is for), then the controls, which cost
      // more: every option's effect is resolved.
      let t = performance.now();
      const plan = ahead.get(msg.query) || planJson(msg.query);
      self.postMessage({type: "plan", id: msg.id, view: plan, ms: Math.round(performance.now() - t)});
      await new Promise((resolve) => setTimeout(resolve, 0));  // let a newer request in
      if (msg.id !== latest) return;
      t = performance.now();
      const controls = controlsJson(msg.query);
      self.postMessage({type: "controls", id: msg.id, view: controls, ms: Math.round(performance.now() - t)});
      ahead.clear();  // plans of the previous page's options are not what the next click sends
      composeAhead(msg.id, JSON.parse(controls).next || []);
    } catch (err) {
      self.postMessage({type: "error", id: msg.id, error: String((err && err.message) || err)});
    }
  }
};
