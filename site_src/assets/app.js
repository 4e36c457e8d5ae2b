// The configurator page. The composer and the renderer (Python, in a Web
// Worker) decide and draw everything; this script sends the query of each
// choice, swaps in the HTML fragments the worker renders with the page's own
// Jinja macros (it holds no markup of its own), and handles events, history,
// clipboard and downloads.
//
// A link with parameters opens on the pre-rendered recipe default, which is
// shown only as a marked preview (Copy, Download and Share wait) until the
// link's own plan is composed; a click meanwhile is applied on top of the
// link's state, never on the default's.
//
// The Python runtime is fetched only when it is needed (lazyBoot): a bare
// visit or an embed shows the pre-rendered answer and loads nothing more
// until a control is touched (pointer, keyboard or focus) or, on a top-level
// page, once it has been idle and visible a moment. A link whose plan the
// build rendered ahead (#prerendered) is shown from that file; any other
// link boots at once. Every file is checked against the SHA-256 the page was
// built with (#runtime-files) before use; a mismatch is an error, never a plan.
"use strict";

(function () {
  const app = document.getElementById("app");
  const statusEl = document.getElementById("runtime-status");
  const output = document.getElementById("output");
  const banner = document.getElementById("preview-banner");
  const FRAGMENTS = ["controls", "summary", "notices", "capacity", "placeholders", "commands", "extras", "checkpoint"];
  let plan = JSON.parse(document.getElementById("initial-plan").textContent);
  // The plan as one text: what the CLI prints for it (composer/plan_text.py), which Copy all copies.
  let planText = JSON.parse(document.getElementById("initial-text").textContent);
  let viewFn = null;      // set when the composer is ready
  let pending = null;     // {query, push}: what to compose once it is ready
  let target = null;      // query of the latest request sent to the worker
  let controlsFor = 0;    // id of the request whose controls are on screen (0: the pre-rendered ones)
  let preview = false;    // the page shows the default, not the URL's plan
  let clickAt = null;     // performance.now() of the last click, for data-click-ms
  let controlsClickAt = null;  // the same, until its controls are on screen (data-controls-ms)

  // A standing note of the page (it opened on the GPU chosen last), shown
  // whenever the status has nothing else to say.
  let note = "";
  function setStatus(state, text) {
    statusEl.dataset.state = state;
    statusEl.textContent = text || (state === "ready" || state === "idle" ? note : "");
  }

  // ----- view parameters (embed, theme): kept in the URL, not part of the plan
  const view = (() => {
    const q = new URLSearchParams(location.search);
    const v = {};
    if (q.get("embed") === "1") v.embed = "1";
    if (["light", "dark", "auto"].includes(q.get("theme"))) v.theme = q.get("theme");
    return v;
  })();
  // A query as the composer writes it: lists (",") and modes (":") unescaped.
  function queryText(q) {
    return q.toString().replace(/%2C/g, ",").replace(/%3A/g, ":");
  }
  function withView(planUrl) {
    const q = new URLSearchParams(planUrl.replace(/^\?/, ""));
    for (const [k, v] of Object.entries(view)) q.set(k, v);
    const s = queryText(q);
    return s ? "?" + s : "";
  }
  // The plan's query is the address's own text minus the view parameters,
  // never re-encoded: the composer then reads exactly what the CLI reads for
  // the same URL (a re-encoded query can be longer than its length limit).
  function planQuery(search) {
    const raw = search.replace(/^\?/, "");
    if (!raw) return "";
    return raw.split("&").filter((part) => {
      let key = part.split("=")[0].replace(/\+/g, " ");
      try { key = decodeURIComponent(key); } catch (err) { /* kept as written */ }
      return key !== "embed" && key !== "theme" && key !== "compare";
    }).join("&");
  }
  // compare=<query of plan A>: the comparison the page shows (a view parameter).
  const compareParam = new URLSearchParams(location.search).get("compare");
  if (compareParam && compareParam.length <= 8192) view.compare = compareParam;
  if (view.embed) {
    document.documentElement.classList.add("embed");
    // The content's own height (the bottom of #app), never the document's
    // scrollHeight: that is at least the iframe's height, so an embed that
    // grew could never shrink again.
    let last = -1;
    const report = () => {
      const height = Math.ceil(app.getBoundingClientRect().bottom + window.scrollY);
      if (height === last) return;
      last = height;
      parent.postMessage({type: "vllm-configurator:height", height}, "*");
    };
    new ResizeObserver(report).observe(app);
    report();
  }
  // In an iframe, a link to another page (the model on Hugging Face, Edit this recipe, Report a
  // problem, the site's pages) opens in a new tab: followed inside the frame, it replaced the
  // embed, or left an error box where the site refuses to be framed (fresh user's finding). A link
  // to another plan of this page (a notice's fix, the compare view's "open A": only the query
  // differs) stays in the frame, and an embed keeps its layout and theme there (an adversarial
  // finding: the first version of this rule sent those to a new tab). Downloads stay as they are;
  // set as the link is followed, so the links of plans rendered later are covered too.
  if (view.embed || window.top !== window) {
    document.addEventListener("click", (ev) => {
      const a = ev.target instanceof Element ? ev.target.closest("a[href]") : null;
      if (!a || a.hasAttribute("download") || a.target) return;
      const to = new URL(a.href, location.href);
      if (to.origin === location.origin && to.pathname === location.pathname) {
        if (view.embed && !to.searchParams.has("embed")) {
          to.searchParams.set("embed", "1");
          if (view.theme && !to.searchParams.has("theme")) to.searchParams.set("theme", view.theme);
          a.href = to.href;
        }
        return;
      }
      a.target = "_blank";
      a.relList.add("noopener");
    }, true);
  }

  // ----- theme toggle: auto → light → dark, a view parameter (theme=) like
  // embed, remembered in this browser for the next page (first-paint.js)
  const themeButton = document.getElementById("theme-toggle");
  const theme = () => document.documentElement.dataset.theme || "auto";  // set by first-paint.js or a click
  function showTheme() {
    themeButton.textContent = "Theme: " + theme();
  }
  if (themeButton) {
    showTheme();
    themeButton.addEventListener("click", () => {
      const next = {auto: "light", light: "dark", dark: "auto"}[theme()];
      if (next === "auto") delete document.documentElement.dataset.theme;
      else document.documentElement.dataset.theme = next;
      if (next === "auto") delete view.theme;
      else view.theme = next;
      try {
        localStorage.setItem("vllm-configurator:theme", next);
      } catch (err) { /* storage off: the URL still says it */ }
      const q = new URLSearchParams(location.search);  // the link's own query stays, even in a preview
      if (next === "auto") q.delete("theme");
      else q.set("theme", next);
      const s = queryText(q);
      history.replaceState(history.state, "", location.pathname + (s ? "?" + s : "") + location.hash);
      showTheme();
    });
  }

  // ----- the dock: on a narrow screen, the summary and the first command line
  // stay in view while the commands are scrolled away (text copied from the
  // rendered fragments: the dock has no markup of its own)
  const dock = document.getElementById("dock");
  const narrow = window.matchMedia("(max-width: 820px)");
  let commandsInView = true;
  function updateDock() {
    if (!dock) return;
    const summary = document.querySelector("#summary .summary-text");
    document.getElementById("dock-summary").textContent = summary ? summary.textContent : "";
    const panel = document.querySelector("#commands .panel:not([hidden])");
    let text;
    if (panel && panel.dataset.role === "file") {  // a form's files (sbatch jobs, a manifest): their names, not a shebang
      const names = [...panel.querySelectorAll("button.download[data-name]")].map((b) => b.dataset.name);
      text = names.length ? names.join(", ") : "";
    } else {
      const code = (panel && panel.querySelector("pre code")) || document.querySelector("#commands pre code");
      const lines = code ? code.textContent.split("\n").filter((l) => l && !l.startsWith("export ") && !l.startsWith("#")) : [];
      text = (lines[0] || "").replace(/\s*\\$/, "") + (lines.length > 1 ? " …" : "");
    }
    document.getElementById("dock-command").textContent = text;
    const show = narrow.matches && !commandsInView && !view.embed;
    dock.hidden = !show;
    document.body.classList.toggle("has-dock", narrow.matches && !view.embed);
  }
  if (dock && "IntersectionObserver" in window) {
    new IntersectionObserver((entries) => {
      commandsInView = entries[entries.length - 1].isIntersecting;
      updateDock();
    }).observe(document.getElementById("commands"));
    narrow.addEventListener("change", updateDock);
    document.getElementById("dock-jump").addEventListener("click", (ev) => {
      ev.preventDefault();  // no #commands in the URL the page keeps
      const tab = document.querySelector('#commands [role="tab"][aria-selected="true"]');
      document.getElementById("commands").scrollIntoView({block: "start"});
      if (tab) tab.focus({preventScroll: true});
    });
    updateDock();
  }

  // ----- preview while a link's plan is prepared ----------------------------
  const actions = () => output.querySelectorAll("button.copy, button.download, button.copy-all, button.download-all, #share");
  // kind "link": a link's plan is coming (the banner says the commands are the recipe default);
  // "choice": a choice made before the composer had loaded is coming: dimmed and not copyable, as a
  // link's, but without the banner, which pushed the controls down under the pointer (fresh-user
  // finding: ~50 px, so a second click at the same spot picked the GPU below). A link's preview stays one.
  function setPreview(on, kind = "link") {
    preview = on;
    fullPageLink();
    const root = document.documentElement.classList;
    if (!on) root.remove("link-preview", "choice-preview");
    else if (kind === "link" || root.contains("link-preview")) root.add("link-preview");
    else root.add("choice-preview");
    banner.hidden = !root.contains("link-preview");
    for (const b of actions()) {
      b.disabled = on;
      if (on) b.title = "Preparing your configuration…";
      else b.removeAttribute("title");
    }
  }

  // The link's state, shown in the pre-rendered controls where they have the
  // choice (a P/D pool size, say, has no control until its plan is composed).
  // A group the link does not set still shows the default's choice, which its plan may change (a P/D
  // link's node count, say): marked as coming (aria-busy, dimmed) until the link's controls replace
  // them (a fresh user read "Nodes 1" beside a 7-node plan).
  function showQueryInControls(query) {
    const q = new URLSearchParams(query);
    for (const fs of document.querySelectorAll("#controls fieldset[data-dim]")) {
      const param = fs.dataset.param;
      const value = fs.dataset.item ? items(q, param).get(fs.dataset.item) : q.get(param);
      if (value === undefined || value === null) {
        fs.setAttribute("aria-busy", "true");
        continue;
      }
      const inputs = [...fs.querySelectorAll("input")];
      if (fs.dataset.kind === "checkbox") {
        const on = new Set(value.split(",").filter(Boolean));
        for (const i of inputs) i.checked = on.has(i.value);
      } else {
        const hit = inputs.find((i) => i.value === value);
        if (!hit) continue;
        hit.checked = true;
        hit.disabled = false;  // whether it works here is for the link's own plan to say
        hit.closest("label").classList.remove("dis");
      }
      for (const i of inputs) i.closest("label").classList.toggle("sel", i.checked);
    }
  }

  // The controls on screen belong to the plan shown. While another plan is
  // on its way (the link's own, or an earlier click's) their pre-computed
  // queries are stale: a click is then the same choice on the state the page
  // is heading for.
  function heading() {
    if (pending) return pending.query;
    if (seq > controlsFor) return target;
    if (preview) return planQuery(location.search);
    return null;
  }
  function syncLabels() {  // the selected look follows the checked inputs
    for (const i of document.querySelectorAll("#controls input")) i.closest("label").classList.toggle("sel", i.checked);
  }
  // A keyed list parameter (fmode=feature:mode,…, the public site's format) as a Map.
  function items(q, param) {
    const m = new Map();
    for (const item of (q.get(param) || "").split(",")) {
      const at = item.indexOf(":");
      if (at > 0 && !m.has(item.slice(0, at))) m.set(item.slice(0, at), item.slice(at + 1));
    }
    return m;
  }
  // The query of a choice made on the state the page is heading for. What a
  // group sets and clears is the rendered group's own word (data-param,
  // data-item, data-kind, data-resets: composer/dimensions.py), not this script's.
  function queuedQuery(input) {
    const q = new URLSearchParams(heading());
    const fs = input.closest("fieldset[data-dim]");
    const param = fs.dataset.param;
    if (fs.dataset.item) {
      const m = items(q, param);
      m.set(fs.dataset.item, input.value);
      q.set(param, [...m].map(([f, v]) => `${f}:${v}`).join(","));
    } else if (fs.dataset.kind === "checkbox") {
      q.set(param, [...fs.querySelectorAll("input:checked")].map((i) => i.value).join(","));
    } else {
      q.set(param, input.value);
    }
    for (const k of (fs.dataset.resets || "").split(" ").filter(Boolean)) q.delete(k);
    return queryText(q);
  }

  // ----- rendering: swap the worker's fragments in --------------------------
  function swap(fragments) {
    const form = document.getElementById("controls");
    const focused = document.activeElement;
    let refocus = null;
    if (focused && form.contains(focused) && focused.name) {
      refocus = `input[name="${CSS.escape(focused.name)}"][value="${CSS.escape(focused.value)}"]`;
    } else if (focused && focused.id && output.contains(focused)) {
      refocus = "#" + CSS.escape(focused.id);
    }
    const open = [...document.querySelectorAll("details[open]")].map(detailsKey).filter(Boolean);
    const phBox = document.querySelector("#placeholders details");
    const phClosed = phBox !== null && !phBox.open;
    const tab = document.querySelector('#commands [role="tab"][aria-selected="true"]');
    // Another "Run with" form opens on its own first tab (its files, where it has any: the Kubernetes
    // manifests, the sbatch script); the same form keeps the tab the user was reading.
    const formOf = () => { const l = document.querySelector('#commands [role="tablist"]'); return l ? l.dataset.form : null; };
    const formBefore = formOf();
    for (const name of FRAGMENTS) if (name in fragments) document.getElementById(name).innerHTML = fragments[name];
    const tabId = tab && formOf() === formBefore ? tab.id : null;
    for (const key of open) {
      const d = document.querySelector(key);
      if (d) d.open = true;
    }
    const again = tabId && document.getElementById(tabId);
    if (again) selectTab(again);
    const phNew = document.querySelector("#placeholders details");
    if (phNew && (phClosed || (phBox === null && phStartsClosed()))) phNew.open = false;
    applyPlaceholders();
    fullPageLink();
    fillExplains();  // an Explain left open shows the new plan's table
    if (refocus) {
      const el = document.querySelector(refocus);
      if (el) el.focus();
    }
  }
  // An embed leaves out the recipe's guide; its link opens the plan shown on
  // the full page (every dimension pinned, without the embed layout).
  function fullPageLink() {
    const a = document.getElementById("full-page");
    if (!a) return;
    // While a link's own plan is being prepared, the link's query (the plan on screen is the default's).
    const asked = preview ? planQuery(location.search) : null;
    a.href = location.pathname + (asked !== null ? (asked ? "?" + asked : "") : (plan.share_url || plan.url || ""));
  }
  fullPageLink();
  // ----- placeholders: the person's own values, kept in this browser ------
  // Values replace whole $NAMEs in the shown commands (so in Copy) and in the
  // downloaded scripts; they are never put in the URL. Only characters that
  // mean nothing to a shell are accepted, so a value cannot change a command.
  const PH_KEY = "vllm-configurator:placeholders";
  const PH_SAFE = /^[A-Za-z0-9._:\/@%+,=-]+$/;
  function phStored() {
    try {
      const v = JSON.parse(localStorage.getItem(PH_KEY) || "{}");
      return v && typeof v === "object" && !Array.isArray(v) ? v : {};
    } catch (err) {
      return {};
    }
  }
  // On a phone the panel starts closed while it holds no value of yours (a fresh user's finding: on a P/D
  // page at 390 px its ~1,500 px pushed the commands ~7,000 px down): when the page opens, and when a plan
  // brings the panel where there was none; its summary still names the placeholders, one tap opens it, and
  // a later plan keeps it as the user left it (swap).
  function phStartsClosed() {
    return window.matchMedia("(max-width: 820px)").matches && phValues().size === 0;
  }
  function phValues() {  // the usable values of the placeholders this plan has
    const stored = phStored();
    const usable = (v) => typeof v === "string" && PH_SAFE.test(v);
    const out = new Map();
    for (const p of plan.placeholders || []) {
      // same_as: one this placeholder takes the value of while it has none (co-located P/D: one node's address)
      const v = usable(stored[p.name]) ? stored[p.name] : (p.same_as && usable(stored[p.same_as]) ? stored[p.same_as] : null);
      if (v !== null) out.set(p.name, v);
    }
    return out;
  }
  function phSubstitute(text, vals) {
    // ${NAME:-fallback} (a companion's default), ${NAME} (quoted before a name character: "${HEAD_IP}s")
    // and $NAME, whole names only.
    return text
      .replace(/\$\{([A-Z][A-Z0-9_]*):-[^}"'`$]*\}/g, (m, name) => (vals.has(name) ? vals.get(name) : m))
      .replace(/\$\{([A-Z][A-Z0-9_]*)\}/g, (m, name) => (vals.has(name) ? vals.get(name) : m))
      .replace(/\$([A-Z][A-Z0-9_]*)/g, (m, name) => (vals.has(name) ? vals.get(name) : m));
  }
  function applyPlaceholders() {
    const vals = phValues();
    // (the compare view's two commands too: a fresh user saw $HEAD_IP there after filling it in above)
    for (const code of document.querySelectorAll("#commands .panel:not([data-role=file]) > pre code, #extras pre code, #compare .compare-side pre code")) {
      if (code.dataset.raw === undefined) code.dataset.raw = code.textContent;
      code.textContent = phSubstitute(code.dataset.raw, vals);
    }
    for (const code of document.querySelectorAll("#commands .panel[data-role=file] pre.file code")) {
      if (code.dataset.raw === undefined) code.dataset.raw = code.textContent;
      code.textContent = jobWithValues(code.dataset.raw, vals);
    }
    const stored = phStored();
    for (const input of document.querySelectorAll("#placeholders input[data-ph]")) {
      if (document.activeElement !== input) input.value = typeof stored[input.dataset.ph] === "string" ? stored[input.dataset.ph] : "";
      input.setAttribute("aria-invalid", String(input.value !== "" && !PH_SAFE.test(input.value)));
    }
    updateDock();
  }
  // A script checks each value it needs from the person running it in a line
  // ': "${NAME:?set NAME before …}"' (composer/run_forms.py, composer/forms/slurm.py).
  const CHECK_LINE = /^: "\$\{([A-Z][A-Z0-9_]*):\?.*$\n?/gm;
  // A whole-plan file: an sbatch job sets its host names itself, so a value
  // entered here only becomes the default of its check (': "${NAME:=value}"'),
  // which a value exported before sbatch still overrides; the Kubernetes
  // manifests have no such line and stay as written.
  function jobWithValues(script, vals) {
    return script.replace(CHECK_LINE, (m, name) => (vals.has(name) ? ': "${' + name + ':=' + vals.get(name) + '}"' + (m.endsWith("\n") ? "\n" : "") : m));
  }
  // A form's own file of the whole plan (an sbatch job, the manifests), not one command's or companion's.
  const wholePlanFile = (a) => a.command == null && a.companion == null;
  function scriptWithValues(script) {  // a downloaded node or companion script with the values in
    const vals = phValues();
    if (!vals.size) return script;
    return phSubstitute(script.replace(CHECK_LINE, (m, name) => (vals.has(name) ? "" : m)), vals);
  }
  document.getElementById("placeholders").addEventListener("input", (ev) => {
    const input = ev.target.closest("input[data-ph]");
    if (!input) return;
    const stored = phStored();
    if (input.value === "") delete stored[input.dataset.ph];
    else stored[input.dataset.ph] = input.value;
    try { localStorage.setItem(PH_KEY, JSON.stringify(stored)); } catch (err) { /* private mode: this page only */ }
    applyPlaceholders();
  });
  document.getElementById("placeholders").addEventListener("click", (ev) => {
    if (!ev.target.closest("button.ph-clear")) return;
    const stored = phStored();
    for (const p of plan.placeholders || []) delete stored[p.name];
    try { localStorage.setItem(PH_KEY, JSON.stringify(stored)); } catch (err) { /* ignore */ }
    for (const input of document.querySelectorAll("#placeholders input[data-ph]")) input.value = "";
    applyPlaceholders();
  });
  applyPlaceholders();
  {
    const box = document.querySelector("#placeholders details.placeholders");
    if (box && phStartsClosed()) box.open = false;
  }

  function detailsKey(d) {
    const fs = d.closest("fieldset[data-dim]");
    if (fs) return `fieldset[data-dim="${CSS.escape(fs.dataset.dim)}"] details.why`;
    const panel = d.closest(".panel");
    if (panel && panel.id) return `#${CSS.escape(panel.id)} details.explain`;
    const cap = d.closest("#capacity li[data-scope]");  // a pool's account stays open over the next plan
    if (cap) return `#capacity li[data-scope="${CSS.escape(cap.dataset.scope)}"] details.${d.classList.contains("cap-how") ? "cap-how" : "assumptions"}`;
    return null;
  }

  // Share and Reset
  document.getElementById("share").addEventListener("click", async () => {
    // Every dimension pinned (v=2), no embed/theme: a link for people.
    const url = location.origin + location.pathname + (plan.share_url || plan.url);
    const out = document.getElementById("share-status");
    try {
      await navigator.clipboard.writeText(url);
      out.textContent = "Link copied.";
    } catch (err) {
      out.textContent = url;
    }
  });
  document.getElementById("reset").addEventListener("click", () => {
    try { localStorage.removeItem(HW_KEY); } catch (err) { /* storage off: nothing remembered */ }
    if (!viewFn || preview) {  // back to the pre-rendered default
      document.getElementById("controls").reset();
      syncLabels();
    }
    apply("", true);
  });

  // ----- state ------------------------------------------------------------
  // Every choice is a query sent to the worker; only the reply to the latest
  // request is rendered, so quick clicks never show a stale plan.
  let worker = null;
  let heldStatus = null;  // the loading words ready() kept on screen for the plan still to come
  let seq = 0;
  const pushes = new Map();

  function apply(query, push) {
    if (!viewFn) {
      bootRuntime("interaction");
      pending = {query, push: push || (pending && pending.push) || false};
      if (statusEl.dataset.state === "failed") {
        swapBack();
        return;
      }
      if (query !== "" || planQuery(location.search) !== "") setPreview(true, "choice");
      // One line on a phone: the status line keeps one line's room, so a longer text pushed the controls down.
      setStatus("queued", "Loading the composer for your choice…");
      return;
    }
    const id = ++seq;
    pushes.set(id, push);
    target = query;
    app.dataset.busy = "true";
    viewFn(id, query);
  }

  // A plan on screen as the answer ({plan, fragments, text}: the worker's or the build's rendering):
  // its data, its HTML, no preview mark, and no loading words kept for it (ready()).
  function showPlan(next) {
    plan = next.plan;
    planText = next.text;
    swap(next.fragments);
    setPreview(false);
    if (heldStatus !== null && statusEl.textContent === heldStatus) setStatus(statusEl.dataset.state, "");
    heldStatus = null;
  }

  // The worker answers each request in two parts: the plan (what the click
  // is for) and then the controls; only the latest request's parts are shown.
  function received(id, next) {
    const push = pushes.get(id);
    pushes.delete(id);
    if (id !== seq) return;  // a newer request is on its way
    showPlan(next);
    if (push && hardwareClicked) rememberHardware(plan.selection.hardware);
    hardwareClicked = false;
    if (rememberedApplied) sayRemembered();
    else if (note) {  // any other plan: the note no longer applies
      if (statusEl.textContent === note) statusEl.textContent = "";
      note = "";
    }
    rememberedApplied = false;
    app.dataset.query = plan.query;
    app.dataset.shown = "composed";
    const url = location.pathname + withView(plan.url) + location.hash;
    if (push) history.pushState({q: plan.query}, "", url);
    else history.replaceState({q: plan.query}, "", url);
    refreshCompare();
    if (clickAt !== null) {  // click → plan on screen, read by `make bench`
      app.dataset.clickMs = (performance.now() - clickAt).toFixed(1);
      controlsClickAt = clickAt;
      clickAt = null;
    }
  }

  function receivedControls(id, next) {
    if (id !== seq) return;
    swap(next.fragments);
    controlsFor = id;
    if (controlsClickAt !== null) {  // click → controls on screen too
      app.dataset.controlsMs = (performance.now() - controlsClickAt).toFixed(1);
      controlsClickAt = null;
    }
    app.dataset.busy = "false";
    app.dataset.ready = "true";
  }

  document.getElementById("controls").addEventListener("submit", (ev) => ev.preventDefault());
  document.getElementById("controls").addEventListener("change", (ev) => {
    const input = ev.target;
    if (!input || input.dataset.query === undefined) return;
    clickAt = performance.now();
    syncLabels();  // the clicked option looks chosen at once, not only once its plan's controls arrive (fresh-user finding)
    const group = input.closest("fieldset");
    if (group) group.removeAttribute("aria-busy");  // chosen now, not coming
    if (heading() === null) return apply(input.dataset.query, true);
    apply(queuedQuery(input), true);
  });
  // The explanation of the option under the pointer or keyboard focus, shown
  // under its group (tooltips alone are invisible on touch screens).
  // The hint only grows while the pointer or focus stays in its group: a shorter
  // hint moved the options up under a resting pointer, which then showed the
  // longer one again, and the column shook forever (a fresh user's finding at
  // 1280 px, with the controls column scrolled to its end).
  function showHint(ev) {
    const label = ev.target.closest && ev.target.closest("label.opt");
    if (!label) return;
    const hint = label.closest("fieldset").querySelector(".hint");
    if (!hint) return;
    hint.textContent = label.getAttribute("title") || "";
    hint.style.minHeight = Math.max(hint.offsetHeight, parseFloat(hint.style.minHeight) || 0) + "px";
  }
  function releaseHint(ev) {
    const fs = ev.target.closest && ev.target.closest("fieldset");
    if (!fs || (ev.relatedTarget && fs.contains(ev.relatedTarget))) return;
    const hint = fs.querySelector(".hint");
    if (hint) hint.style.minHeight = "";
  }
  document.getElementById("controls").addEventListener("focusin", showHint);
  document.getElementById("controls").addEventListener("mouseover", showHint);
  document.getElementById("controls").addEventListener("mouseout", releaseHint);
  document.getElementById("controls").addEventListener("focusout", releaseHint);
  window.addEventListener("popstate", () => apply(planQuery(location.search), false));

  // Tabs: click and arrow keys (WAI-ARIA tabs pattern); copy and download buttons.
  output.addEventListener("click", async (ev) => {
    const tab = ev.target.closest('[role="tab"]');
    if (tab) return selectTab(tab);
    if (preview) return;  // nothing is copied from a preview
    const copy = ev.target.closest("button.copy");
    if (copy) {
      const text = copy.closest(".artifact, .panel, .snippet").querySelector("pre code").textContent;
      await copyWithFeedback(copy, text, "Copied", "Copy failed: select the text", "Copy");
      return;
    }
    const dl = ev.target.closest("button.download");
    if (dl) {
      // Every file comes from the plan's output form (composer/forms): a
      // node's or a companion's file gets the placeholder values (as its tab
      // shows them), a whole-plan file only the defaults of its checks
      // (jobWithValues), as its panel shows it.
      const artifact = plan.output.artifacts[Number(dl.dataset.artifact)];
      const text = wholePlanFile(artifact) ? jobWithValues(artifact.text, phValues()) : scriptWithValues(artifact.text);
      downloadText(text, artifact.media_type, dl.dataset.name);
    }
  });
  // A Copy button says whether the clipboard took the text, then reads as before.
  async function copyWithFeedback(button, text, done, failed, label) {
    try {
      await navigator.clipboard.writeText(text);
      button.textContent = done;
    } catch (err) {
      button.textContent = failed;
    }
    setTimeout(() => { button.textContent = label; }, 1500);
  }
  // Save text as a file named ``name`` (a Download button).
  function downloadText(text, mediaType, name) {
    const url = URL.createObjectURL(new Blob([text], {type: mediaType}));
    const a = document.createElement("a");
    a.href = url;
    a.download = name;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }
  // "Copy all" and "Download all" for a plan of several tabs: Copy all copies the plan's text, the
  // CLI's (composer/plan_text.py: header, install steps, companions, then each command under a
  // "# --- label (role) ---" line), with the placeholder values put in as the tabs show them; the
  // download is the plan's bundle (composer/forms: one script that writes every script).
  function allTabsText() {
    return phSubstitute(planText, phValues()) + "\n";
  }
  output.addEventListener("click", async (ev) => {
    if (preview) return;
    const all = ev.target.closest("button.copy-all");
    if (all) {
      await copyWithFeedback(all, allTabsText(), "Copied all", "Copy failed", "Copy all");
      return;
    }
    const dl = ev.target.closest("button.download-all");
    if (!dl || !plan.output.bundle) return;
    // The bundle of a form's whole-plan files (the sbatch jobs) takes the values as those files' Download does.
    const text = plan.output.bundle.text;
    downloadText(plan.output.artifacts.some(wholePlanFile) ? jobWithValues(text, phValues()) : scriptWithValues(text), plan.output.bundle.media_type, dl.dataset.name);
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
    updateDock();
  }

  // ----- a tab strip wider than its column says so -------------------------
  // data-more on the strip: "end" (tabs hidden to the right), "start", "both";
  // the stylesheet fades that edge, so a cut-off tab never looks like the last.
  function markTabOverflow() {
    const strip = document.querySelector("#commands .tabs");
    if (!strip) return;
    const left = strip.scrollLeft > 1;
    const right = strip.scrollLeft + strip.clientWidth < strip.scrollWidth - 1;
    if (left || right) strip.dataset.more = left && right ? "both" : left ? "start" : "end";
    else delete strip.dataset.more;
  }
  document.getElementById("commands").addEventListener("scroll", markTabOverflow, true);
  new ResizeObserver(markTabOverflow).observe(document.getElementById("commands"));
  new MutationObserver(markTabOverflow).observe(document.getElementById("commands"), {childList: true});
  document.getElementById("commands").addEventListener("focusin", (ev) => {
    const tab = ev.target.closest && ev.target.closest('[role="tab"]');
    if (tab) tab.scrollIntoView({block: "nearest", inline: "nearest"});  // a tab reached by the keyboard is in view
  });
  // No call now: the ResizeObserver calls it once the page is first laid out. A call here read the
  // layout before it was due (a forced layout of the whole page, ~20 ms) and held back the rest of
  // this script, a deep link's start of the composer included.

  // ----- the last hardware chosen, across recipe pages ---------------------
  // A click on a GPU is remembered in this browser; a recipe page opened with
  // no parameters starts on it where that page offers it (the click's own
  // query, so the page says what else it changed). A link's parameters always
  // win, and Reset goes back to the recipe default.
  const HW_KEY = "vllm-configurator:hardware";
  let hardwareClicked = false;  // the request on its way is a click on a GPU
  document.getElementById("controls").addEventListener("change", (ev) => {
    if (ev.target && ev.target.name === "hardware") hardwareClicked = true;
  });
  function rememberHardware(hw) {
    try { if (hw) localStorage.setItem(HW_KEY, hw); } catch (err) { /* storage off: nothing remembered */ }
  }
  // The page opened on the GPU chosen last: said where the page reports its
  // state, with how to undo it (a fresh user's finding: days later a 6-node
  // H100 plan opened with nothing saying why). Reset also forgets the GPU.
  let rememberedApplied = false;
  function sayRemembered() {
    const hw = document.querySelector('#controls input[name="hardware"]:checked');
    const label = hw ? hw.closest("label").querySelector(".opt-label").textContent : "the GPU you chose last";
    note = `Opened on ${label}, the GPU you chose last on a recipe page. ` +
      "Reset to recipe defaults shows the recipe's own choice and forgets it.";
    setStatus(statusEl.dataset.state, "");
  }
  function rememberedQuery() {
    let hw = null;
    try { hw = localStorage.getItem(HW_KEY); } catch (err) { return null; }
    if (!hw) return null;
    const input = [...document.querySelectorAll('#controls input[name="hardware"]')].find((i) => i.value === hw);
    if (!input || input.disabled || input.checked) return null;
    return input.dataset.query;
  }

  // ----- the composer in a Web Worker (Pyodide) ---------------------------
  const abs = (u) => new URL(u, location.href).href;

  // How long the restore may take once the snapshot is in (the worker's "restoring" message), 60 s
  // unless a test of this page sets window.composerRestoreTimeoutMs. The one clock of the fast start:
  // the worker's own could not fire while a spinning restore keeps its thread busy.
  const restoreMs = () => Number(window.composerRestoreTimeoutMs) || 60_000;
  let restoreTimer = null;

  function startWorker(mode, why) {
    if (worker) worker.terminate();
    clearTimeout(restoreTimer);
    worker = new Worker(abs(app.dataset.prefix + "assets/composer-worker.js"), {type: "module"});
    const mine = worker;
    worker.onmessage = (ev) => {
      const msg = ev.data;
      if (msg.type !== "progress" && msg.type !== "restoring") clearTimeout(restoreTimer);
      if (msg.type === "progress") setStatus("loading", msg.text);
      else if (msg.type === "restoring" && mode === "snapshot") {
        // A restore that does not finish (a snapshot that makes Python spin keeps the worker's thread
        // busy: adversarial finding) is ended here, and the page boots cold.
        restoreTimer = setTimeout(() => {
          if (worker !== mine || viewFn) return;
          const why = `the fast start did not finish within ${restoreMs() / 1000} s`;
          console.warn("snapshot:", why);
          setStatus("loading", `The fast start could not be used (${why}); loading the full Python runtime, a few seconds…`);
          startWorker("cold", why);
        }, restoreMs());
      } else if (msg.type === "ready") ready(msg, why);
      else if (msg.type === "plan") {
        // Where a click's time goes, read by `make bench`: waiting in the worker (behind a look-ahead plan),
        // composing, coming back (postMessage and this thread's queue), parsing and swapping in.
        const arrived = performance.timeOrigin + performance.now();
        app.dataset.composeMs = String(msg.ms);
        app.dataset.queuedMs = String(msg.queued);
        app.dataset.transitMs = (arrived - msg.postedAt).toFixed(1);
        const t = performance.now();
        received(msg.id, JSON.parse(msg.view));
        app.dataset.swapMs = (performance.now() - t).toFixed(1);
      } else if (msg.type === "controls") {
        receivedControls(msg.id, JSON.parse(msg.view));
      } else if (msg.type === "explain" || (msg.type === "tool-error" && msg.tool === "explain")) {
        explainReply(msg);
      } else if (msg.type === "import" || msg.type === "compare" || msg.type === "tool-error") {
        toolReply(msg);
      } else if (msg.type === "error") {
        // Keep the page true to the command it shows: undo the click, say why.
        pushes.delete(msg.id);
        app.dataset.busy = "false";
        const last = String(msg.error).trim().split("\n").pop();
        if (preview) {  // not even the link's plan: the page can only show the default
          viewFn = null;
          failed("the composer could not compose this link (" + last + ")");
          return;
        }
        setStatus("error", "The composer could not compose this choice (" + last + "). The command shown is unchanged.");
        document.getElementById("controls").reset();  // back to the checked state of the plan shown
        syncLabels();
      } else if (msg.type === "failed") {
        if (msg.stage === "integrity") {
          integrityFailed(msg.error);
        } else if (msg.stage === "snapshot" && mode === "snapshot") {
          // The fast start failed (fetch, version or restore): boot cold.
          console.warn("snapshot:", msg.error);
          setStatus("loading", `The fast start could not be used (${msg.error}); loading the full Python runtime, a few seconds…`);
          startWorker("cold", msg.error);
        } else {
          failed(msg.error);
        }
      }
    };
    worker.onerror = (ev) => {
      if (mode === "snapshot") startWorker("cold", ev.message || "the worker could not start");
      else failed(ev.message || "the worker could not start");
    };
    worker.postMessage({
      type: "init", mode, indexURL: abs(app.dataset.runtime), snapshotURL: abs(app.dataset.snapshot),
      stdlibURL: abs(app.dataset.stdlib), snapshotSize: Number(app.dataset.snapshotSize),
      snapshotMemory: Number(app.dataset.snapshotMemory),
      wasmURL: abs(app.dataset.wasm), wasmPatchURL: abs(app.dataset.wasmPatch),
      pyodideVersion: app.dataset.pyodideVersion, files: runtimeFiles(),
      pythonURL: abs(app.dataset.python), recipeURL: abs(app.dataset.bundle), catalogURL: abs(app.dataset.catalog),
      // The worker composes the plans of the options a next click can send while the page is idle,
      // unless a script of this page set window.composerLookahead = false (the browser tests do).
      lookahead: window.composerLookahead !== false,
    });
  }

  function ready(msg, why) {
    // sentAt: when the request left (the worker says how long it waited behind a look-ahead plan)
    viewFn = (id, query) => worker.postMessage({type: "view", id, query, sentAt: performance.timeOrigin + performance.now()});
    app.dataset.loadMs = String(msg.ms);
    app.dataset.bootMode = msg.mode;
    // The worker's timings, with when it and its boot began, in ms after this page's start (read by `make bench`).
    const at = msg.at || {};
    app.dataset.timings = JSON.stringify({...(msg.timings || {}),
      ...(at.worker ? {worker_at: Math.round(at.worker - performance.timeOrigin)} : {}),
      ...(at.boot ? {boot_at: Math.round(at.boot - performance.timeOrigin)} : {})});
    // While a link's or a choice's plan is still to come, the status keeps saying so until received()
    // shows it (fresh-user finding: it went blank 0.2-0.7 s before the plan, under a banner still "Preparing…").
    heldStatus = msg.mode === "cold" || !preview ? null : statusEl.textContent;
    setStatus("ready", msg.mode === "cold" ? `Running without the fast start (${why}).` : (heldStatus || ""));
    const next = pending || {query: planQuery(location.search), push: false};
    pending = null;
    if (pendingImport) { pendingImport = false; runImport(); }
    fillExplains();  // opened while the composer was loading
    if (next.query === shownQuery && !next.push && planQuery(location.search) === shownQuery) {
      if (view.compare) refreshCompare();
      if (shownQuery === "" && rememberedLink) {  // a bare address, the GPU chosen last not shown yet (startup below)
        rememberedApplied = true;
        return apply(rememberedLink, false);
      }
      // The pre-rendered default (or a view rendered ahead) is this URL's plan:
      // only the look-ahead of the next clicks is to do.
      app.dataset.ready = "true";
      // The options' queries as the controls on screen carry them: the worker need not compose the
      // controls again to know them (200–280 ms on a fresh runtime, which a first click waited behind).
      const next = [...document.querySelectorAll("#controls input[data-query]")]
        .filter((i) => !i.disabled && !i.checked).map((i) => i.dataset.query);
      worker.postMessage({type: "prime", id: seq, query: shownQuery, next});
      return;
    }
    apply(next.query, next.push);  // data-ready is set once its plan is shown
  }

  function failed(reason) {
    if (viewFn || statusEl.dataset.state === "failed" || integrityBroken) return;
    console.error(reason);
    if (worker) worker.terminate();  // a late "ready" must not bring back an unmarked default
    setStatus("failed", "The interactive composer could not load (" + reason + "). " +
      "The command shown is the recipe default; the command line gives every other choice: python -m composer " +
      app.dataset.recipe + " --query '…'.");
    swapBack();
    explainsUnavailable();
    pending = null;
  }

  // Without a composer the page can only show the default: say so, and keep
  // the controls true to it.
  function swapBack() {
    const form = document.getElementById("controls");
    form.reset();
    for (const fs of form.querySelectorAll("fieldset")) fs.disabled = true;  // nothing can be composed now
    setPreview(false);
    output.classList.add("default-only");
  }

  // ----- tools: paste a command, compare two plans -------------------------
  // The pasted text goes to the worker only (composer.importer runs there);
  // it is never put in the URL, storage or any request. The comparison's
  // plan A is the view parameter compare=<query>, plan B the page's plan.
  const importText = document.getElementById("import-text");
  const importStatus = document.getElementById("import-status");
  let toolSeq = 0;
  const toolLatest = {import: 0, compare: 0};
  function sendTool(msg) {
    if (!viewFn) return false;
    const id = ++toolSeq;
    toolLatest[msg.type] = id;
    worker.postMessage({...msg, id});
    return true;
  }
  function runImport() {
    if (!importText) return;
    const text = importText.value;
    app.dataset.importReady = "false";
    if (!sendTool({type: "import", text, hint: plan.query || ""})) {
      importStatus.textContent = "The composer is still loading; your text will be read as soon as it is ready…";
      pendingImport = true;
      return;
    }
    importStatus.textContent = "Reading your commands…";
  }
  let pendingImport = false;
  function refreshCompare() {
    const box = document.getElementById("compare");
    if (!box) return;
    if (!view.compare) {
      box.innerHTML = "";
      return;
    }
    app.dataset.compareReady = "false";
    sendTool({type: "compare", a: view.compare, b: plan.query || ""});
  }
  function toolReply(msg) {
    const kind = msg.tool || msg.type;
    if (msg.id !== toolLatest[kind]) return;  // a newer request is on its way
    if (msg.type === "tool-error") {
      const last = String(msg.error).trim().split("\n").pop();
      if (kind === "import") importStatus.textContent = "Your commands could not be read (" + last + ").";
      else document.getElementById("compare").textContent = "The comparison failed (" + last + ").";
      return;
    }
    const data = JSON.parse(msg.view);
    if (msg.type === "import") {
      document.getElementById("import").innerHTML = data.fragments.import;
      importStatus.textContent = "";
      app.dataset.importReady = "true";
    } else {
      document.getElementById("compare").innerHTML = data.fragments.compare;
      applyPlaceholders();
      app.dataset.compareReady = "true";
    }
  }
  // ----- Explain tables left out of the plan's HTML ----------------------
  // The plan's HTML carries the first command's Explain table only (issue 22:
  // on a 15-node plan the tables were 80 % of it); another panel's table is
  // rendered by the worker with the same macros when it is opened
  // (composer.render.explain_json), from that command of the plan on screen,
  // which the page sends: nothing is composed again.
  const explainAsked = new Map();  // request id → panel index
  function fillExplains() {
    const query = plan.query || "";
    const cmds = (plan.commands && plan.commands.length ? plan.commands : plan.blocked_commands) || [];
    for (const d of document.querySelectorAll("#commands details.explain[data-lazy][open]")) {
      if (d.querySelector("table") || d.dataset.asked === query) continue;
      const index = Number(d.dataset.lazy);
      if (!cmds[index]) continue;
      if (!viewFn) {  // a pre-rendered page: opening it is an interaction
        const w = d.querySelector(".explain-wait");
        if (w && !integrityBroken && statusEl.dataset.state !== "failed") {
          w.textContent = "The table comes as soon as the composer has loaded in your browser…";
        }
        bootRuntime("interaction");
        continue;
      }
      d.dataset.asked = query;
      const id = ++toolSeq;
      explainAsked.set(id, index);
      worker.postMessage({type: "explain", id, command: JSON.stringify(cmds[index]), index, query});
    }
  }
  function explainReply(msg) {
    const index = explainAsked.get(msg.id);
    explainAsked.delete(msg.id);
    if (msg.type === "tool-error") {
      const last = String(msg.error).trim().split("\n").pop();
      const w = document.querySelector(`#commands details.explain[data-lazy="${index}"] .explain-wait`);
      if (w) w.textContent = "The table could not be composed (" + last + ").";
      return;
    }
    const data = JSON.parse(msg.view);
    if (data.query !== (plan.query || "")) return;  // an earlier plan's: the one on screen asks its own
    const d = document.querySelector(`#commands details.explain[data-lazy="${Number(data.index)}"]`);
    if (!d || d.querySelector("table")) return;
    const wait = d.querySelector(".explain-wait");
    if (wait) wait.remove();
    d.insertAdjacentHTML("beforeend", data.fragments.explain);
  }
  // Without the composer (it could not load), a table left out cannot come: say where to get it.
  function explainsUnavailable() {
    const rid = app.dataset.recipe || (plan.recipe && plan.recipe.id);
    for (const w of document.querySelectorAll("#commands .explain-wait")) {
      w.textContent = "This table needs the composer, which could not load here. The CLI prints every command's: " +
        `python -m composer ${rid || "RECIPE_ID"} --query '${plan.query || ""}' --explain`;
    }
  }
  document.getElementById("commands").addEventListener("toggle", (ev) => {
    if (ev.target.matches && ev.target.matches("details.explain[data-lazy]")) fillExplains();
  }, true);

  function setCompare(query) {
    if (query) view.compare = query;
    else delete view.compare;
    history.replaceState(history.state, "", location.pathname + withView(plan.url || "") + location.hash);
    refreshCompare();
  }
  if (importText) {
    document.getElementById("import-run").addEventListener("click", runImport);
    // Handed over by the index page's paste box (this tab's session storage), read once.
    let handed = null;
    try {
      handed = sessionStorage.getItem("vllm-configurator:import");
      sessionStorage.removeItem("vllm-configurator:import");
    } catch (err) { /* storage off */ }
    if (handed) {
      importText.value = handed;
      document.getElementById("import-box").open = true;
      runImport();
    }
    // A link in the report opens its plan on this page (same as a click on the controls).
    document.getElementById("import").addEventListener("click", (ev) => {
      const a = ev.target.closest("a[href^='?']");
      if (!a || !viewFn) return;
      ev.preventDefault();
      apply(a.getAttribute("href").slice(1), true);
      document.getElementById("output").scrollIntoView({block: "start"});
    });
  }
  const compareStart = document.getElementById("compare-start");
  if (compareStart) {
    compareStart.addEventListener("click", () => {
      if (!viewFn || preview) return;
      setCompare((plan.share_url || plan.url || "").replace(/^\?/, ""));
    });
    document.getElementById("compare").addEventListener("click", (ev) => {
      if (ev.target.closest("#compare-stop")) setCompare(null);
    });
  }

  // ----- integrity -------------------------------------------------------
  // The SHA-256 of every runtime and data file, as the build wrote them
  // (build.py: write_runtime, prerender_views), by absolute URL without query.
  let integrityBroken = false;
  function runtimeFiles() {
    const rel = JSON.parse(document.getElementById("runtime-files").textContent);
    const out = {};
    for (const [path, sha] of Object.entries(rel)) out[new URL(app.dataset.prefix + path, location.href).href] = sha;
    return out;
  }
  async function sha256Hex(bytes) {
    if (!window.crypto || !crypto.subtle) throw new Error("the browser cannot check files here (serve the site over https)");
    return [...new Uint8Array(await crypto.subtle.digest("SHA-256", bytes))].map((b) => b.toString(16).padStart(2, "0")).join("");
  }
  // A file that is not the one the page was built with: nothing is composed
  // or shown from it. The page says so and shows no commands at all (for a
  // link, the default under them would not be the link's answer either).
  function integrityFailed(reason) {
    if (integrityBroken) return;
    integrityBroken = true;
    console.error(reason);
    viewFn = null;
    pending = null;
    if (worker) worker.terminate();
    setStatus("failed", "This page cannot be trusted right now: " + reason + ". No command is shown. " +
      "Reload the page; if this persists, the site was changed after it was built (tell its owner).");
    setPreview(false);
    output.hidden = true;
    app.dataset.integrity = "failed";
    for (const fs of document.querySelectorAll("#controls fieldset")) fs.disabled = true;
  }

  // ----- views the build rendered ahead ------------------------------------
  // {views: {path: sha256}, links: {query text: path}} (build.prerender_views).
  const prerendered = JSON.parse(document.getElementById("prerendered").textContent);
  let shownQuery = "";  // the plan query whose plan is on screen as the answer ("" : the page's own default)

  async function showPrerendered(query) {
    const path = prerendered.links[query];
    const started = performance.now();
    let text;
    try {
      const r = await fetch(new URL(app.dataset.prefix + path, location.href).href);
      if (!r.ok) throw new Error(`HTTP ${r.status}`);
      const bytes = new Uint8Array(await r.arrayBuffer());
      if (await sha256Hex(bytes) !== prerendered.views[path]) {
        integrityFailed("the pre-rendered plan of this link does not match the file this page was built with (SHA-256)");
        return;
      }
      text = new TextDecoder().decode(bytes);
    } catch (err) {  // not there (a partial upload, a network error): compose it
      console.warn("pre-rendered view:", err);
      bootRuntime("link");
      return;
    }
    if (viewFn || pending || integrityBroken) return;  // a choice was made meanwhile: the composer answers it
    const next = JSON.parse(text);
    showPlan(next);
    app.dataset.query = plan.query;
    history.replaceState({q: plan.query}, "", location.pathname + withView(plan.url) + location.hash);
    shownQuery = planQuery(location.search);
    app.dataset.shown = "prerendered";
    app.dataset.prerenderMs = (performance.now() - started).toFixed(1);
    setStatus("idle", "");
    if (query === rememberedLink) sayRemembered();
    armLazyBoot();
  }

  // ----- the runtime, when it is needed ------------------------------------
  // bootReason (data-boot-reason): "link" (a link whose plan needs Python),
  // "remembered" (a bare visit opening on the GPU chosen last, not pre-rendered),
  // "interaction" (a control touched), "idle" (a top-level page idle and
  // visible IDLE_MS); until then nothing of the runtime is fetched.
  const IDLE_MS = 2000;
  const embedded = Boolean(view.embed) || window.top !== window;
  function bootRuntime(reason) {
    if (worker || integrityBroken || app.dataset.bootReason) return;
    app.dataset.bootReason = reason;
    if (statusEl.dataset.state === "idle") setStatus("loading", "Loading the composer in your browser…");
    // A runtime file that never arrives (or a wasm module that fails to
    // compile) can leave Pyodide waiting forever: give up after a while.
    setTimeout(() => { if (!viewFn) failed("it did not finish loading within 180 s"); }, 180_000);
    try {
      startWorker("snapshot", null);
    } catch (err) {
      failed(err.message);
    }
  }
  function armLazyBoot() {
    const controls = document.getElementById("controls");
    const touched = () => bootRuntime("interaction");
    for (const type of ["pointerdown", "keydown", "focusin"]) controls.addEventListener(type, touched, {once: true, passive: true});
    if (embedded) return;  // an embed a reader scrolls past costs nothing more
    let timer = null;
    const idle = () => (window.requestIdleCallback ? requestIdleCallback(() => bootRuntime("idle"), {timeout: 2000})
                                                   : bootRuntime("idle"));
    const watch = () => {
      clearTimeout(timer);
      if (document.visibilityState === "visible") timer = setTimeout(idle, IDLE_MS);
    };
    document.addEventListener("visibilitychange", watch);
    watch();
  }

  const linkQuery = planQuery(location.search);
  // A bare top-level visit opens on the GPU chosen last on any recipe page
  // (never an embed: it shows what its page asked for). That plan is marked a
  // preview from the first paint, as a link's is, and is shown from the
  // build's rendering where there is one, else composed at once: the recipe
  // default must not read as the answer meanwhile (fresh-user finding: the
  // default GPU's plan showed unmarked for seconds, then changed).
  const rememberedLink = !linkQuery && !embedded ? rememberedQuery() : null;
  if (rememberedLink) {
    setPreview(true);
    showQueryInControls(rememberedLink);
    setStatus("loading", "Opening the GPU you chose last…");
    if (prerendered.links[rememberedLink]) showPrerendered(rememberedLink);
    else bootRuntime("remembered");
  } else if (linkQuery) {
    setPreview(true);
    showQueryInControls(linkQuery);
    app.dataset.linkShown = "true";
    if (prerendered.links[linkQuery]) {
      setStatus("loading", "Preparing the configuration of this link…");
      showPrerendered(linkQuery);
    } else {
      setStatus("loading", "Preparing the configuration of this link…");
      bootRuntime("link");
    }
  } else {
    setStatus("idle", "");
    armLazyBoot();
  }
  app.dataset.started = "true";  // this script has set the page up (tests wait for it)
})();
