// Runs the composer (Python, in Pyodide) off the main thread so the page stays
// responsive while the runtime loads (~2-10 s) and while plans are composed.
// Protocol: {type:"init", urls…} then {type:"compose", id, query};
// replies {type:"progress"|"ready"|"failed"} and {type:"plan"|"error", id, …}.

let composeJson = null;
let ready = null;

async function init(msg) {
  const started = performance.now();
  // Fetch our own files while the runtime loads.
  const get = async (url, what, kind) => {
    const r = await fetch(url);
    if (!r.ok) throw new Error(`${what}: HTTP ${r.status}`);
    return kind === "bytes" ? r.arrayBuffer() : r.text();
  };
  const ours = Promise.all([
    get(msg.composerURL, "composer", "bytes"), get(msg.recipeURL, "recipe data"), get(msg.catalogURL, "catalogue")]);
  ours.catch(() => {});  // reported when awaited below
  // Pyodide 314 runs in module workers only (classic workers are refused).
  const {loadPyodide} = await import(msg.indexURL + "pyodide.mjs");
  // Pyodide does not always reject when its wasm module cannot be fetched:
  // check the big files first so a failure is reported at once.
  for (const name of ["pyodide.asm.wasm", "python_stdlib.zip"]) {
    const r = await fetch(msg.indexURL + name, {method: "HEAD"});
    if (!r.ok) throw new Error(`${name}: HTTP ${r.status}`);
  }
  const pyodide = await loadPyodide({indexURL: msg.indexURL});
  const tRuntime = performance.now() - started;
  self.postMessage({type: "progress", text: "Python runtime ready; loading the composer…"});
  await pyodide.loadPackage(msg.wheels, {messageCallback: () => {}, errorCallback: (m) => console.warn(m)});
  const tPackages = performance.now() - started;
  const [zip, recipeText, catalogText] = await ours;
  pyodide.unpackArchive(zip, "zip", {extractDir: "/home/pyodide"});
  // loadPackage resolves even when a wheel failed to load: the imports verify.
  pyodide.runPython("import sys\nif '/home/pyodide' not in sys.path: sys.path.insert(0, '/home/pyodide')\nimport pydantic, composer.api");
  const fn = pyodide.globals.get("composer").api.compose_json;
  composeJson = (query) => fn(recipeText, catalogText, query);
  const tImport = performance.now() - started;
  self.postMessage({type: "ready", ms: Math.round(tImport),
                    timings: {runtime: Math.round(tRuntime), packages: Math.round(tPackages), imported: Math.round(tImport)}});
}

self.onmessage = async (ev) => {
  const msg = ev.data;
  if (msg.type === "init") {
    ready = init(msg).catch((err) => {
      self.postMessage({type: "failed", error: String((err && err.message) || err)});
      throw err;
    });
    return;
  }
  if (msg.type === "compose") {
    try { await ready; } catch (err) { return; }
    try {
      const t = performance.now();
      const plan = composeJson(msg.query);
      self.postMessage({type: "plan", id: msg.id, plan, ms: Math.round(performance.now() - t)});
    } catch (err) {
      self.postMessage({type: "error", id: msg.id, error: String((err && err.message) || err)});
    }
  }
};
