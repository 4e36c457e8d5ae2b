// The configurator page: the composer (Python, in Pyodide) decides everything;
// this script only loads it, sends it the query of the clicked option and
// renders the plan it returns. Markup mirrors site_src/_macros.html.
"use strict";

(function () {
  const app = document.getElementById("app");
  const statusEl = document.getElementById("runtime-status");
  let plan = JSON.parse(document.getElementById("initial-plan").textContent);
  let composeFn = null;   // set when the composer is ready
  let pending = null;     // query chosen before the composer was ready

  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));

  function setStatus(state, text) {
    statusEl.dataset.state = state;
    statusEl.textContent = text;
  }

  // ----- rendering (same structure as _macros.html) -----------------------
  function optionHtml(dim, o, kind) {
    const cls = "opt" + (o.selected ? " sel" : "") + (o.disabled ? " dis" : "") + (o.changed ? " changed" : "");
    const tip = o.reason || (o.description + " " + o.effects + (o.default && !o.selected ? " Recipe default." : "")).trim();
    let meta = "";
    if (dim === "hardware") meta = `<span class="opt-meta">${esc(o.gpus)}× · ${esc(o.gb_per_node)} GB</span>`;
    if (o.verified) meta += `<span class="verified" title="Verified by the recipe">✓</span>`;
    return `<label class="${cls}"${tip ? ` title="${esc(tip)}"` : ""}>` +
      `<input type="${kind}" name="${esc(dim)}" value="${esc(o.id)}" data-query="${esc(o.query)}"` +
      `${o.selected ? " checked" : ""}${o.disabled ? " disabled" : ""}>` +
      `<span class="opt-label">${esc(o.label)}</span>${meta}</label>`;
  }

  function groupHtml(dim, options, groups, kind) {
    let inner = "";
    if (dim === "hardware") {
      const brands = [...new Set(options.map((o) => o.group))];
      inner = brands.map((b) => `<div class="brand" data-brand="${esc(b)}"><span class="brand-name">${esc(b)}</span>` +
        options.filter((o) => o.group === b).map((o) => optionHtml(dim, o, kind)).join("") + "</div>").join("");
    } else {
      inner = options.map((o) => optionHtml(dim, o, kind)).join("");
    }
    const changed = options.some((o) => o.changed);
    const off = options.filter((o) => o.disabled);
    const why = off.length ? `<details class="why"><summary>Why ${off.length} unavailable</summary><ul>` +
      off.map((o) => `<li><strong>${esc(o.label)}</strong>: ${esc(o.reason)}</li>`).join("") + "</ul></details>" : "";
    return `<fieldset class="group${changed ? " changed" : ""}" data-dim="${esc(dim)}" data-kind="${kind}">` +
      `<legend>${esc(groups[dim].legend)}${changed ? ` <span class="changed-mark" title="Changed from the recipe default">changed</span>` : ""}</legend>` +
      `<p class="help">${esc(groups[dim].help)}</p><div class="options">${inner}</div><p class="hint" aria-live="polite"></p>${why}</fieldset>`;
  }

  function renderControls(p) {
    const o = p.options, g = p.groups;
    const parts = [groupHtml("hardware", o.hardware, g, "radio")];
    if (o.variant.length > 1) parts.push(groupHtml("variant", o.variant, g, "radio"));
    if (o.nodes.length) parts.push(groupHtml("nodes", o.nodes, g, "radio"));
    parts.push(groupHtml("strategy", o.strategy, g, "radio"));
    for (const pool of ["prefill", "decode"]) {
      if (o[pool + "_mode"]) {
        parts.push(groupHtml(pool + "_mode", o[pool + "_mode"], g, "radio"));
        parts.push(groupHtml(pool + "_nodes", o[pool + "_nodes"], g, "radio"));
      }
    }
    parts.push(groupHtml("features", o.features, g, "checkbox"));
    parts.push(groupHtml("advanced", o.advanced, g, "checkbox"));
    if (o.task) parts.push(groupHtml("task", o.task, g, "radio"));
    parts.push(groupHtml("kv_offload", o.kv_offload, g, "radio"));
    parts.push(groupHtml("install", o.install, g, "radio"));
    const form = document.getElementById("controls");
    const focused = document.activeElement && form.contains(document.activeElement) ? document.activeElement : null;
    const focusKey = focused ? [focused.name, focused.value] : null;
    const open = [...form.querySelectorAll("fieldset[data-dim] details.why[open]")].map((d) => d.closest("fieldset").dataset.dim);
    form.innerHTML = parts.join("");
    for (const dim of open) {
      const d = form.querySelector(`fieldset[data-dim="${CSS.escape(dim)}"] details.why`);
      if (d) d.open = true;
    }
    if (focusKey) {
      const again = form.querySelector(`input[name="${CSS.escape(focusKey[0])}"][value="${CSS.escape(focusKey[1])}"]`);
      if (again) again.focus();
    }
  }

  function explainHtml(c) {
    if (!c.provenance.length && !c.env_provenance.length) return "";
    const rep = (list) => list.map((r) => `<code>${esc(r.value)}</code> (${esc(r.layer)}: <code>${esc(r.key)}</code>)`).join("; ");
    const rows = c.provenance.map((f) => `<tr data-flag="${esc(f.flag)}"><td><code>${esc(f.flag)}</code>` +
      (f.help ? `<br><span class="flag-help">${esc(f.help)}</span>` : "") + `</td>` +
      `<td><code>${f.value === null ? "" : esc(f.value)}</code></td><td>${esc(f.layer)}: <code>${esc(f.key)}</code></td><td>${rep(f.replaced)}</td></tr>`).join("") +
      c.env_provenance.map((e) => `<tr data-env="${esc(e.name)}"><td><code>${esc(e.name)}</code></td><td><code>${esc(e.value)}</code></td>` +
      `<td>${esc(e.layer)}: <code>${esc(e.key)}</code></td><td>${rep(e.replaced)}</td></tr>`).join("");
    return `<details class="explain"><summary>Explain: where each value comes from</summary><div class="table-wrap"><table><thead><tr>` +
      `<th scope="col">Flag or variable</th><th scope="col">Value</th><th scope="col">Set by</th><th scope="col">Replaced</th></tr></thead>` +
      `<tbody>${rows}</tbody></table></div></details>`;
  }

  function renderOutput(p) {
    const badge = `<span class="badge${p.verified ? " ok" : ""}">${esc(p.verification)}</span>`;
    document.getElementById("summary").innerHTML = `<span class="summary-text">${esc(p.summary)}</span>${badge}`;
    document.getElementById("notices").innerHTML = p.notices.map((n) =>
      `<li class="notice ${esc(n.level)}" data-code="${esc(n.code)}">${esc(n.message)}</li>`).join("");
    document.getElementById("capacity").innerHTML = p.capacity.map((c) =>
      `<li class="${c.fits ? "fits" : "nofit"}">${esc(c.message)}</li>`).join("");
    const cmds = p.commands.length ? p.commands : p.blocked_commands;
    const blocked = p.commands.length ? "" : " blocked";
    const fileName = (label) => label.toLowerCase().replace(/ /g, "-").replace(/\//g, "-of-").replace(/[()]/g, "") + ".sh";
    const tabs = cmds.map((c, i) => `<button type="button" role="tab" id="tab-${i}" aria-controls="panel-${i}" ` +
      `aria-selected="${i === 0}" tabindex="${i === 0 ? 0 : -1}">${esc(c.label)}</button>`).join("") +
      p.companions.map((c, i) => `<button type="button" role="tab" id="tab-c${i}" aria-controls="panel-c${i}" ` +
      `aria-selected="false" tabindex="-1">${esc(c.label)}</button>`).join("");
    const panels = cmds.map((c, i) => `<div class="panel" role="tabpanel" id="panel-${i}" aria-labelledby="tab-${i}" ` +
      `data-role="${esc(c.role)}" data-rank="${esc(c.node_rank)}" data-index="${i}"${i === 0 ? "" : " hidden"}>` +
      `<div class="actions"><button type="button" class="copy">Copy</button>` +
      (c.script ? `<button type="button" class="download" data-name="${esc(fileName(c.label))}">Download script</button>` : "") + `</div>` +
      `<pre tabindex="0" class="cmd${blocked}" data-argv="${esc(JSON.stringify(c.argv))}"><code>${esc(c.text)}</code></pre>${explainHtml(c)}</div>`).join("") +
      p.companions.map((c, i) => `<div class="panel" role="tabpanel" id="panel-c${i}" aria-labelledby="tab-c${i}" data-role="companion" hidden>` +
      `<p class="note">${esc(c.description)}</p><div class="actions"><button type="button" class="copy">Copy</button></div>` +
      `<pre tabindex="0" class="companion"><code>${esc(c.command)}</code></pre></div>`).join("");
    document.getElementById("commands").innerHTML =
      `<div class="tabs" role="tablist" aria-label="Commands per node and role">${tabs}</div>${panels}`;
    const snippet = (text) => `<div class="snippet"><div class="actions"><button type="button" class="copy">Copy</button></div><pre tabindex="0"><code>${esc(text)}</code></pre></div>`;
    const inst = p.install;
    let extras = "<h2>Install</h2>";
    if (p.selection.install === "docker" && inst.docker) extras += snippet(inst.docker);
    else if (inst.pip) extras += snippet(inst.pip);
    extras += inst.extras.map(snippet).join("") + inst.notes.map((n) => `<p class="note">${esc(n)}</p>`).join("");
    extras += "<h2>Check the endpoint</h2>" + [p.client.curl, p.client.bench].filter(Boolean).map(snippet).join("");
    document.getElementById("extras").innerHTML = extras;
  }

  function render(p) {
    plan = p;
    renderControls(p);
    renderOutput(p);
    app.dataset.query = p.query;
  }

  // ----- view parameters (embed, theme): kept in the URL, not part of the plan
  const view = (() => {
    const q = new URLSearchParams(location.search);
    const v = {};
    if (q.get("embed") === "1") v.embed = "1";
    if (["light", "dark", "auto"].includes(q.get("theme"))) v.theme = q.get("theme");
    return v;
  })();
  function withView(planUrl) {
    const q = new URLSearchParams(planUrl.replace(/^\?/, ""));
    for (const [k, v] of Object.entries(view)) q.set(k, v);
    const s = q.toString().replace(/%2C/g, ",");
    return s ? "?" + s : "";
  }
  function planQuery(search) {
    const q = new URLSearchParams(search);
    q.delete("embed");
    q.delete("theme");
    return q.toString();
  }
  if (view.embed) {
    document.documentElement.classList.add("embed");
    const report = () => parent.postMessage({type: "vllm-configurator:height", height: document.documentElement.scrollHeight}, "*");
    new ResizeObserver(report).observe(document.body);
    report();
  }

  // Share and Reset
  document.getElementById("share").addEventListener("click", async () => {
    const url = location.origin + location.pathname + plan.url;  // no embed/theme: a link for people
    const out = document.getElementById("share-status");
    try {
      await navigator.clipboard.writeText(url);
      out.textContent = "Link copied.";
    } catch (err) {
      out.textContent = url;
    }
  });
  document.getElementById("reset").addEventListener("click", () => apply("", true));

  // ----- state ------------------------------------------------------------
  // Every choice is a query sent to the composer worker; only the reply to the
  // latest request is rendered, so quick clicks never show a stale plan.
  let worker = null;
  let seq = 0;
  const pushes = new Map();

  function apply(query, push) {
    if (!composeFn) {
      pending = {query, push};
      if (statusEl.dataset.state !== "failed") {
        setStatus("queued", "Your choice will be applied as soon as the composer has loaded…");
      } else {
        renderControls(plan);  // the runtime is gone: keep controls true to the command shown
      }
      return;
    }
    const id = ++seq;
    pushes.set(id, push);
    composeFn(id, query);
  }

  function received(id, next) {
    const push = pushes.get(id);
    pushes.delete(id);
    if (id !== seq) return;  // a newer request is on its way
    render(next);
    const url = location.pathname + withView(next.url) + location.hash;
    if (push) history.pushState({q: next.query}, "", url);
    else history.replaceState({q: next.query}, "", url);
    app.dataset.busy = "false";
    app.dataset.ready = "true";
  }

  document.getElementById("controls").addEventListener("change", (ev) => {
    const input = ev.target;
    if (input && input.dataset.query !== undefined) apply(input.dataset.query, true);
  });
  // The explanation of the option under the pointer or keyboard focus, shown
  // under its group (tooltips alone are invisible on touch screens).
  function showHint(ev) {
    const label = ev.target.closest && ev.target.closest("label.opt");
    if (!label) return;
    const hint = label.closest("fieldset").querySelector(".hint");
    if (hint) hint.textContent = label.getAttribute("title") || "";
  }
  document.getElementById("controls").addEventListener("focusin", showHint);
  document.getElementById("controls").addEventListener("mouseover", showHint);
  window.addEventListener("popstate", () => apply(planQuery(location.search), false));

  // Tabs: click and arrow keys (WAI-ARIA tabs pattern); copy and download buttons.
  document.getElementById("output").addEventListener("click", async (ev) => {
    const tab = ev.target.closest('[role="tab"]');
    if (tab) return selectTab(tab);
    const copy = ev.target.closest("button.copy");
    if (copy) {
      const text = copy.closest(".panel, .snippet").querySelector("pre code").textContent;
      try {
        await navigator.clipboard.writeText(text);
        copy.textContent = "Copied";
      } catch (err) {
        copy.textContent = "Copy failed: select the text";
      }
      setTimeout(() => { copy.textContent = "Copy"; }, 1500);
      return;
    }
    const dl = ev.target.closest("button.download");
    if (dl) {
      const cmds = plan.commands.length ? plan.commands : plan.blocked_commands;
      const cmd = cmds[Number(dl.closest(".panel").dataset.index)];
      const url = URL.createObjectURL(new Blob([cmd.script], {type: "text/x-shellscript"}));
      const a = document.createElement("a");
      a.href = url;
      a.download = dl.dataset.name;
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 1000);
    }
  });
  document.getElementById("commands").addEventListener("keydown", (ev) => {
    const tab = ev.target.closest('[role="tab"]');
    if (!tab) return;
    const tabs = [...tab.parentElement.querySelectorAll('[role="tab"]')];
    const i = tabs.indexOf(tab);
    let j = null;
    if (ev.key === "ArrowRight") j = (i + 1) % tabs.length;
    if (ev.key === "ArrowLeft") j = (i - 1 + tabs.length) % tabs.length;
    if (ev.key === "Home") j = 0;
    if (ev.key === "End") j = tabs.length - 1;
    if (j !== null) { ev.preventDefault(); selectTab(tabs[j]); tabs[j].focus(); }
  });
  function selectTab(tab) {
    const box = document.getElementById("commands");
    for (const t of box.querySelectorAll('[role="tab"]')) {
      const on = t === tab;
      t.setAttribute("aria-selected", String(on));
      t.tabIndex = on ? 0 : -1;
      document.getElementById(t.getAttribute("aria-controls")).hidden = !on;
    }
  }

  // ----- the composer in a Web Worker (Pyodide) ---------------------------
  function boot() {
    if (planQuery(location.search)) {
      document.getElementById("output").classList.add("stale");
      setStatus("loading", "Loading the composer to show the command for this link…");
    }
    const abs = (u) => new URL(u, location.href).href;
    const prefix = app.dataset.prefix;
    worker = new Worker(abs(prefix + "assets/composer-worker.js"), {type: "module"});
    worker.onmessage = (ev) => {
      const msg = ev.data;
      if (msg.type === "progress") setStatus("loading", msg.text);
      else if (msg.type === "ready") {
        composeFn = (id, query) => { app.dataset.busy = "true"; worker.postMessage({type: "compose", id, query}); };
        app.dataset.loadMs = String(msg.ms);
        app.dataset.timings = JSON.stringify(msg.timings || {});
        const first = pending || {query: planQuery(location.search), push: false};
        pending = null;
        document.getElementById("output").classList.remove("stale");
        setStatus("ready", "");
        apply(first.query, first.push);  // data-ready is set once its plan is shown
      } else if (msg.type === "plan") {
        app.dataset.composeMs = String(msg.ms);
        received(msg.id, JSON.parse(msg.plan));
      }
      else if (msg.type === "error") {
        // Keep the page true to the command it shows: undo the click, say why.
        pushes.delete(msg.id);
        app.dataset.busy = "false";
        renderControls(plan);
        const last = String(msg.error).trim().split("\n").pop();
        setStatus("error", "The composer could not compose this choice (" + last + "). The command shown is unchanged.");
      }
      else if (msg.type === "failed") failed(msg.error);
    };
    worker.onerror = (ev) => failed(ev.message || "the worker could not start");
    // A runtime file that never arrives (or a wasm module that fails to
    // compile) can leave Pyodide waiting forever: give up after a while.
    setTimeout(() => { if (!composeFn) failed("it did not finish loading within 90 s"); }, 90_000);
    worker.postMessage({
      type: "init", indexURL: abs(prefix + "pyodide/"),
      wheels: app.dataset.wheels.split(",").map((w) => abs(prefix + w)),
      composerURL: abs(prefix + app.dataset.composer), recipeURL: abs(app.dataset.bundle),
      catalogURL: abs(app.dataset.catalog),
    });
  }

  function failed(reason) {
    if (composeFn || statusEl.dataset.state === "failed") return;
    console.error(reason);
    setStatus("failed", "The interactive composer could not load (" + reason + "). " +
      "The command shown is the recipe default; the command line gives every other choice: python -m composer " +
      app.dataset.recipe + " --query '…'.");
    document.getElementById("output").classList.remove("stale");
    renderControls(plan);
    pending = null;
  }

  try {
    boot();
  } catch (err) {
    failed(err.message);
  }
})();
