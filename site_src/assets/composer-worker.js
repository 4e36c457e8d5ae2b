// Runs the composer and the page's renderer (Python, in Pyodide) off the main
// thread. Boot: restore the build's memory snapshot (composer, Jinja2 and the
// compiled templates already imported: ~0.5 s), or, when the page asks for it
// after a failed restore, boot Python cold and import everything (~5 s).
// Protocol. The page sends {type:"init", mode:"snapshot"|"cold", indexURL,
// snapshotURL, stdlibURL, snapshotSize, snapshotMemory, wasmURL, wasmPatchURL, pyodideVersion,
// pythonURL, recipeURL, catalogURL, files, lookahead} (snapshotSize, snapshotMemory: the
// snapshot file's length and its memory's, unpacked; wasmURL, wasmPatchURL: the snapshot
// path's module without its data segments and the patch that rebuilds them,
// boot-python.mjs snapshotWriter; files: absolute URL → SHA-256 of every file
// the worker may fetch), then {type:"view", id, query, sentAt} per choice, or {type:"prime", id,
// query, next} for a page already showing query's plan (only the look-ahead runs, over
// `next`: the queries of the options on screen).
// The worker replies {type:"progress", text} while booting ({type:"restoring"} once the
// snapshot is in and checked: the page times the restore from then, app.js restoreMs), then {type:"ready",
// mode, ms, timings, at} (timings: ms from the boot's start to the snapshot fetched,
// hashed, indexed (packedSnapshot), its wasm parts ready, restored, the runtime up and ready; at: the
// worker's and the boot's start on the shared timeOrigin + now clock) or {type:"failed", stage:"snapshot"|"runtime"|"integrity",
// error} (integrity: a file does not match its hash); per view
// request, in two parts, {type:"plan", id, view, ms, queued, postedAt} (queued: ms the
// request waited for the worker; postedAt: when the reply left, on the shared
// timeOrigin + now clock, as sentAt; view: JSON {plan,
// fragments} without the controls, composer.render.plan_json) and then
// {type:"controls", id, view, ms} (JSON {fragments:{controls}, next},
// controls_json), or {type:"error", id, error}. A request overtaken by a
// newer one gets no reply.
import {RESTORED_PY, SNAPSHOT_PLACEHOLDER, growingFactory, installSitePython, packedSnapshot, snapshotWriter} from "./boot-python.mjs";

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

// The look-ahead starts once the page has been idle AHEAD_IDLE_MS after its
// controls: a plan composed ahead cannot be interrupted, so clicks fired back
// to back would otherwise wait for one (up to a plan's time) before their own.
const AHEAD_IDLE_MS = 150;
// Off when the page asks (init's `lookahead: false`: the page's
// `window.composerLookahead = false`, which the browser tests set so that
// their workers do not compose ~35 plans nobody clicks after every view).
let lookahead = true;

async function composeAhead(id, queries) {
  if (!lookahead) return;
  await new Promise((resolve) => setTimeout(resolve, AHEAD_IDLE_MS));
  for (const q of queries) {
    await new Promise((resolve) => setTimeout(resolve, 0));  // a click always goes first
    if (id !== latest) return;
    if (ahead.has(q)) continue;
    try { remember(q, planJson(q)); } catch (err) { return; }
  }
}

// ----- integrity: every file this worker uses is checked against the SHA-256
// the page was built with (init's `files`: absolute URL without its query →
// hex digest) before it is used; a file not listed there is never fetched.
// Pyodide's own fetches (its lock file, wasm module and standard library) go
// through the same check: `fetch` is replaced in this worker.
let files = new Map();
const checked = new Map();  // URL without query → Promise of its verified bytes
const plainFetch = self.fetch.bind(self);

class IntegrityError extends Error {}

function bare(url) {
  const u = new URL(url, self.location.href);
  return u.origin + u.pathname;
}
function hex(buffer) {
  return [...new Uint8Array(buffer)].map((b) => b.toString(16).padStart(2, "0")).join("");
}
// {bytes, ok} of a file: its body, and the check of that body against its
// hash, kept apart so that work that executes nothing (compiling the wasm
// module, copying the snapshot in) can overlap the hashing.
function fetched(url, what) {
  const key = bare(url);
  if (!checked.has(key)) {
    const expected = files.get(key);
    const name = what || key.split("/").pop();
    const bytes = (async () => {
      if (!expected) throw new IntegrityError(`${what || key} is not a file this page was built with`);
      if (!self.crypto || !crypto.subtle) throw new IntegrityError("the browser cannot check files here (serve the site over https)");
      const r = await plainFetch(url);
      if (!r.ok) throw new Error(`${name}: HTTP ${r.status}`);
      // Through a Blob: Chrome then drains the response into blob storage outside this thread and
      // hands the bytes over at the end, where arrayBuffer() took in every chunk here, while this
      // thread also sets Pyodide up. Measured in the worker on the 2-core machine: the snapshot
      // alone 104 -> 66 ms (medians of 8), the deep link to its command 716 -> 671 ms (of 14).
      return new Uint8Array(await (await r.blob()).arrayBuffer());
    })();
    const ok = bytes.then(async (b) => {
      if (hex(await crypto.subtle.digest("SHA-256", b)) !== expected) {
        throw new IntegrityError(`${name} does not match the file this page was built with (SHA-256)`);
      }
    });
    bytes.catch(() => {});  // reported where they are awaited
    ok.catch(() => {});
    checked.set(key, {bytes, ok});
  }
  return checked.get(key);
}
async function verified(url, what) {
  const f = fetched(url, what);
  const bytes = await f.bytes;
  await f.ok;
  return bytes;
}
// The snapshot path's module instead of Pyodide's own (set by boot).
let wasmInstead = null;
// Pyodide instantiates its module with WebAssembly.instantiateStreaming over
// what this worker's `fetch` returns for it. The module's bytes are here in
// full before they are used (read, then hashed), so there is nothing to
// stream: `fetch` returns a Response that carries the module compiled by
// WebAssembly.compile instead (marked COMPILED), which this wrapper
// instantiates; any other source goes to the browser's own function.
// Streaming decoded the 6.4 MB on this thread as the bytes were fed in (~35 ms
// in Chromium traces: wasm.OnBytesReceived, FinishStreaming, validation),
// where WebAssembly.compile decodes them on V8's background threads while this
// one sets Pyodide up. Measured once the snapshot had shrunk (the module was
// then the last file in): the P/D deep link 662 -> 638 and 656 -> 642 ms
// (two runs, 16 loads each, two builds alternating); with the larger snapshot
// of earlier that day, 738 -> 738.
const COMPILED = Symbol("compiled wasm module");
// Rejects when the module Pyodide asked for fails to compile or to match its hash. Pyodide's
// instantiation hook swallows that error ("wasm instantiation failed!") and waits forever, so the
// boot races this: the cold boot then fails at once and the snapshot path falls back to it, where
// they waited for the page's 180 s and the restore's 60 s (an adversarial finding).
let wasmRejected = null;
const wasmFailure = new Promise((_, reject) => { wasmRejected = reject; });
wasmFailure.catch(() => {});
const instantiateStreaming = WebAssembly.instantiateStreaming.bind(WebAssembly);
WebAssembly.instantiateStreaming = async (source, imports) => {
  const response = await source;
  if (!(response && response[COMPILED])) return instantiateStreaming(response, imports);
  const module = await response[COMPILED];
  return {module, instance: await WebAssembly.instantiate(module, imports)};
};
self.fetch = async (input, init) => {
  const url = input instanceof Request ? input.url : String(input);
  if (bare(url).endsWith(".wasm")) {
    // Compiled while it is hashed (compiling runs nothing of it); handed over only once the hash
    // matches, so the module is never instantiated before that.
    const f = fetched(wasmInstead || url);
    // A module that does not compile is reported as altered when its hash says so (the hash first).
    const module = f.bytes.then((bytes) => WebAssembly.compile(bytes))
      .then(async (compiled) => { await f.ok; return compiled; }, async (err) => { await f.ok; throw err; });
    module.catch((err) => wasmRejected(new Error(`the wasm module could not be used (${(err && err.message) || err})`)));
    return Object.assign(new Response(null, {status: 200, headers: {"Content-Type": "application/wasm"}}), {[COMPILED]: module});
  }
  const bytes = await verified(url);
  const type = url.endsWith(".json") ? "application/json" : "application/octet-stream";
  return new Response(bytes, {status: 200, headers: {"Content-Type": type}});
};
// A JavaScript module of the runtime, imported from its checked bytes.
async function importVerified(url) {
  const bytes = await verified(url);
  const blob = URL.createObjectURL(new Blob([bytes], {type: "text/javascript"}));
  try {
    return await import(blob);
  } finally {
    URL.revokeObjectURL(blob);
  }
}

async function get(url, what, kind) {
  const bytes = await verified(url, what);
  return kind === "bytes" ? bytes : new TextDecoder().decode(bytes);
}

// The snapshot path's start, watched: Pyodide swallows an error of its
// instantiation hook, and a trap in the module's constructors or the restore
// surfaces only as an uncaught error or rejection of this worker, so the boot
// would never end (adversarial finding: a wrong data patch hung the page).
// Either fails the snapshot path, and the page falls back to the cold boot. A
// restore that never ends is timed by the page alone, from this worker's
// "restoring" message (app.js startWorker): a clock here could not fire while a
// spinning restore keeps this thread busy.
function watched(promise) {
  let onError, onRejection;
  const failed = new Promise((_, reject) => {
    onError = (ev) => { ev.preventDefault(); reject(new Error(`the fast start failed: ${ev.message || ev.error}`)); };
    onRejection = (ev) => { ev.preventDefault(); reject(new Error(`the fast start failed: ${(ev.reason && ev.reason.message) || ev.reason}`)); };
    self.addEventListener("error", onError);
    self.addEventListener("unhandledrejection", onRejection);
  });
  return Promise.race([promise, failed]).finally(() => {
    self.removeEventListener("error", onError);
    self.removeEventListener("unhandledrejection", onRejection);
  });
}

async function boot(msg) {
  const t0 = performance.now();
  files = new Map(Object.entries(msg.files || {}));
  // Requests leave in the order they are needed: a host speaking HTTP/1.1 (the bench's) serves six
  // at a time, so the Pyodide modules, the small files and the wasm module go first, and the
  // snapshot (~19 MB) and the recipe's data (needed only once Python is up) after them. Set up
  // needs the modules and the wasm module; the snapshot arrives while that runs (growingFactory).
  // Pyodide 314 runs in module workers only (classic workers are refused).
  const modules = Promise.all([importVerified(msg.indexURL + "pyodide.mjs"),
                               importVerified(msg.indexURL + "pyodide.asm.mjs").then((m) => m.default)]);
  // Everything Pyodide will ask for is fetched and checked now, alongside the
  // rest, so a missing or altered file is reported at once.
  const stdLibURL = msg.mode === "snapshot" ? msg.stdlibURL : msg.indexURL + "python_stdlib.zip";
  const present = Promise.all([verified(msg.indexURL + "pyodide-lock.json"), verified(stdLibURL),
                               msg.mode === "snapshot" ? null : fetched(msg.indexURL + "pyodide.asm.wasm").ok]);
  present.catch(() => {});
  // The snapshot path instantiates the build's module without data segments
  // and rebuilds them from the snapshot (boot-python.mjs snapshotWriter): both
  // files belong to the snapshot, so like it they fall back to the cold boot.
  wasmInstead = msg.mode === "snapshot" ? msg.wasmURL : null;
  const snapshotParts = msg.mode === "snapshot"
    ? Promise.all([verified(msg.wasmPatchURL, "wasm data patch"), fetched(msg.wasmURL, "wasm module").ok]) : null;
  snapshotParts?.catch(() => {});
  // `let`: dropped once used, else the closures this boot leaves (planJson, …) keep its 18 MB alive.
  let image = msg.mode === "snapshot" ? fetched(msg.snapshotURL, "snapshot") : {bytes: get(msg.pythonURL, "composer", "bytes")};
  image.bytes.catch(() => {});
  const data = Promise.all([get(msg.recipeURL, "recipe data"), get(msg.catalogURL, "catalogue")]);
  data.catch(() => {});  // reported when awaited below
  const [{loadPyodide}, factory] = await modules;
  // A missing or altered runtime file is reported as such (never a cold boot).
  await present;
  let pyodide;
  const timings = {};  // ms from t0, read by `make bench` (data-timings)
  if (msg.mode === "snapshot") {
    try {
      // Pyodide loads its JavaScript, instantiates the module and sets it up while the snapshot is still
      // on its way: only Emscripten's preRun steps and the constructors wait for `writer` (growingFactory),
      // and the restore writes the snapshot's memory straight from the checked, packed file.
      if (!(msg.snapshotMemory > 0)) throw new Error("the page gives no snapshot memory size");
      // Resolves to the writer of the snapshot's memory (boot-python.mjs snapshotWriter).
      const writer = (async () => {
        const bytes = await image.bytes;
        timings.fetched = Math.round(performance.now() - t0);
        if (bytes.length !== msg.snapshotSize) throw new Error(`snapshot is ${bytes.length} bytes, expected ${msg.snapshotSize}`);
        // A snapshot that is not the build's is never restored (restoring runs
        // code over its bytes); the cold boot, from its own checked files,
        // composes the same commands instead.
        await image.ok.catch(() => { throw new Error("snapshot content does not match its SHA-256"); });
        timings.hashed = Math.round(performance.now() - t0);
        // The checked file holds the non-zero pages only (composer/buildtime/sparse.py): read where it lies.
        const snapshot = packedSnapshot(bytes);
        if (snapshot.length !== msg.snapshotMemory) {
          throw new Error(`the snapshot's memory is ${snapshot.length} bytes, not the ${msg.snapshotMemory} the page was built with`);
        }
        checked.delete(bare(msg.snapshotURL));  // the writer holds its 18 MB until the restore: not kept for the page's life
        image = null;
        timings.indexed = Math.round(performance.now() - t0);
        // Both belong to the snapshot: a missing or altered one falls back to the cold boot as it does.
        const [patch] = await snapshotParts.catch((err) => { throw new Error(String(err.message || err)); });
        timings.parts = Math.round(performance.now() - t0);
        return snapshotWriter(snapshot, patch);
      })();
      // The page times the restore from now (never the download, which on a slow link takes longer: an
      // adversarial finding dropped the fast start 86 % through the snapshot's download at 2 Mbit/s).
      writer.then(() => self.postMessage({type: "restoring"}), () => {});
      // Pyodide waits for the data forever if `writer` fails: the race ends the boot with its error.
      const failed = writer.then(() => new Promise(() => {}));
      pyodide = await watched(Promise.race([
        loadPyodide({indexURL: msg.indexURL, stdLibURL, _loadSnapshot: SNAPSHOT_PLACEHOLDER,
                     createPyodideModule: growingFactory(factory, msg.snapshotMemory, writer)}), failed, wasmFailure]));
      timings.restored = Math.round(performance.now() - t0);
      if (pyodide.version !== msg.pyodideVersion) throw new Error(`runtime ${pyodide.version}, snapshot made with ${msg.pyodideVersion}`);
      pyodide.runPython(RESTORED_PY);
      // (not an assert: the snapshot's interpreter runs with asserts stripped, snapshot.mjs PYTHONOPTIMIZE)
      pyodide.runPython("import composer.render\nif composer.render._BROWSER is None: raise RuntimeError('the snapshot has no templates')");
    } catch (err) {
      if (err instanceof IntegrityError) throw err;
      throw Object.assign(new Error(String(err.message || err)), {stage: "snapshot"});
    }
  } else {
    pyodide = await Promise.race([loadPyodide({indexURL: msg.indexURL, stdLibURL, createPyodideModule: growingFactory(factory, 0)}),
                                  wasmFailure]);
    self.postMessage({type: "progress", text: "Python runtime ready; loading the composer…"});
    installSitePython(pyodide, await image.bytes);
  }
  const tRuntime = performance.now() - t0;
  const [recipeText, catalogText] = await data;
  const render = pyodide.globals.get("composer").render;
  const planFn = render.plan_json, controlsFn = render.controls_json;
  planJson = (query) => planFn(recipeText, catalogText, query);
  controlsJson = (query) => controlsFn(recipeText, catalogText, query);
  toolFns = {importJson: (text, hint) => render.import_json(recipeText, catalogText, text, hint || null),
             compareJson: (a, b) => render.compare_json(recipeText, catalogText, a, b),
             explainJson: (command, index, query) => render.explain_json(command, index, query)};
  checked.clear();  // the checked files are used: not kept for the page's life (a later fetch is checked again)
  const ms = Math.round(performance.now() - t0);
  // at: when this worker's global began and when its boot began, on the clock the page shares
  // (timeOrigin + now), so the page can say how long after its own start each came.
  self.postMessage({type: "ready", mode: msg.mode, ms, timings: {...timings, runtime: Math.round(tRuntime), ready: ms},
                    at: {worker: performance.timeOrigin, boot: performance.timeOrigin + t0}});
}

// Import and compare (the page's tools): {type:"import", id, text, hint} →
// {type:"import", id, view} (composer.render.import_json: the pasted text is
// only an argument, it never leaves the page); {type:"compare", id, a, b} →
// {type:"compare", id, view} (compare_json); {type:"explain", id, command, index, query}
// → {type:"explain", id, view} (explain_json: the Explain table of a command of the
// plan on screen, which the page sends as JSON, rendered when its panel's Explain
// is opened); {type:"tool-error", id, tool, error}.
let toolFns = null;
async function tool(msg) {
  try { await ready; } catch (err) { return; }
  try {
    const view = msg.type === "import" ? toolFns.importJson(msg.text, msg.hint)
      : msg.type === "explain" ? toolFns.explainJson(msg.command, msg.index, msg.query) : toolFns.compareJson(msg.a, msg.b);
    self.postMessage({type: msg.type, id: msg.id, view});
  } catch (err) {
    self.postMessage({type: "tool-error", id: msg.id, tool: msg.type, error: String((err && err.message) || err)});
  }
}

self.onmessage = async (ev) => {
  const msg = ev.data;
  if (msg.type === "import" || msg.type === "compare" || msg.type === "explain") return tool(msg);
  if (msg.type === "init") {
    lookahead = msg.lookahead !== false;
    ready = boot(msg).catch((err) => {
      // An altered file is never worked around (no cold boot instead): the page shows the error.
      const stage = err instanceof IntegrityError ? "integrity" : err.stage || "runtime";
      self.postMessage({type: "failed", stage, error: String((err && err.message) || err)});
      throw err;
    });
    return;
  }
  if (msg.type === "prime") {  // the page shows this query already (pre-rendered): only look ahead
    latest = msg.id;
    if (!lookahead) return;
    try { await ready; } catch (err) { return; }
    if (msg.id !== latest) return;
    try {
      composeAhead(msg.id, msg.next || []);
    } catch (err) { /* a look-ahead that fails changes nothing on screen */ }
    return;
  }
  if (msg.type === "view") {
    const queued = Math.round(performance.timeOrigin + performance.now() - (msg.sentAt || 0));
    latest = msg.id;
    try { await ready; } catch (err) { return; }
    if (msg.id !== latest) return;  // a newer choice came in meanwhile
    try {
      // The plan first (what a click is for), then the controls, which cost
      // more: every option's effect is resolved.
      let t = performance.now();
      const plan = ahead.get(msg.query) || planJson(msg.query);
      self.postMessage({type: "plan", id: msg.id, view: plan, ms: Math.round(performance.now() - t), queued,
                        postedAt: performance.timeOrigin + performance.now()});
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
