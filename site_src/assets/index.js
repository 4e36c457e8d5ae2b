// Index page: text search (names, provider, description, tags, hardware),
// multi-select facets with live counts, and sort, kept in the URL query
// (?q=&provider=a,b&task=&hardware=&precision=&sort=) so a filtered list can
// be shared. Within a facet any chosen value matches (OR); across facets all
// must (AND). A facet's counts are of the recipes the other filters leave.
"use strict";
(function () {
  const form = document.getElementById("filters");
  const list = document.getElementById("recipes");
  if (!form || !list) return;
  const items = [...list.querySelectorAll(":scope > li")];
  const original = items.slice();
  form.addEventListener("submit", (ev) => ev.preventDefault());
  const count = document.getElementById("count");
  const facets = [...form.querySelectorAll("details.facet")].map((d) => d.dataset.facet);
  const values = (li, facet) => (facet === "provider" ? [li.dataset.provider] : li.dataset[facet].split(" ").filter(Boolean));

  function chosen(facet) {
    return [...form.querySelectorAll(`input[name="${facet}"]:checked`)].map((i) => i.value);
  }
  function textOk(li, words) {
    return words.every((w) => li.dataset.text.includes(w));
  }
  function facetOk(li, facet, want) {
    return !want.length || values(li, facet).some((v) => want.includes(v));
  }

  function sortItems(how) {
    const byName = (a, b) => a.dataset.title.localeCompare(b.dataset.title);
    const size = (li) => (li.dataset.size === "" ? null : Number(li.dataset.size));
    const cmp = {
      "provider": (a, b) => a.dataset.provider.localeCompare(b.dataset.provider) || byName(a, b),
      "size-desc": (a, b) => (size(b) ?? -1) - (size(a) ?? -1) || byName(a, b),
      "size-asc": (a, b) => (size(a) ?? Infinity) - (size(b) ?? Infinity) || byName(a, b),
    }[how];
    const order = cmp ? original.slice().sort(cmp) : original;
    // Moves the existing nodes (nothing is re-rendered), and only when the
    // order changes: a node moved between mousedown and mouseup loses the
    // click (the search field's blur fires `change` exactly then).
    const now = [...list.children];
    if (order.length === now.length && order.every((li, i) => li === now[i])) return;
    list.append(...order);
  }

  function apply() {
    const words = form.q.value.trim().toLowerCase().split(/\s+/).filter(Boolean);
    const want = Object.fromEntries(facets.map((f) => [f, chosen(f)]));
    let shown = 0;
    for (const li of items) {
      const ok = textOk(li, words) && facets.every((f) => facetOk(li, f, want[f]));
      li.hidden = !ok;
      if (ok) shown++;
    }
    // Counts: how many recipes each value would give with the other filters as they are.
    for (const f of facets) {
      const rest = items.filter((li) => textOk(li, words) && facets.every((g) => g === f || facetOk(li, g, want[g])));
      for (const input of form.querySelectorAll(`input[name="${f}"]`)) {
        const n = rest.filter((li) => values(li, f).includes(input.value)).length;
        const label = input.closest("label");
        label.querySelector("[data-count]").textContent = String(n);
        label.classList.toggle("empty", n === 0 && !input.checked);
      }
      const d = form.querySelector(`details[data-facet="${f}"]`);
      d.querySelector(".facet-chosen").textContent = want[f].length ? `(${want[f].length})` : "";
    }
    sortItems(form.sort.value);
    const noun = (n) => (n === 1 ? "recipe" : "recipes");
    count.textContent = shown === items.length ? `${items.length} ${noun(items.length)}` : `${shown} of ${items.length} ${noun(items.length)}`;
    document.getElementById("none").hidden = shown > 0;
    const params = new URLSearchParams();
    if (form.q.value.trim()) params.set("q", form.q.value.trim());
    for (const f of facets) if (want[f].length) params.set(f, want[f].join(","));
    if (form.sort.value) params.set("sort", form.sort.value);
    const qs = params.toString().replace(/%2C/g, ",");
    history.replaceState(null, "", location.pathname + (qs ? "?" + qs : ""));
  }

  // A shared link: unknown values are ignored, never an error.
  const start = new URLSearchParams(location.search);
  if (start.get("q") !== null) form.q.value = start.get("q").slice(0, 200);
  if ([...form.sort.options].some((o) => o.value === start.get("sort"))) form.sort.value = start.get("sort");
  for (const f of facets) {
    // Values are matched without regard to case (MI300X, mi300x, nvfp4 …).
    const want = (start.get(f) || "").split(",").map((v) => v.toLowerCase());
    let any = false;
    for (const input of form.querySelectorAll(`input[name="${f}"]`)) {
      input.checked = want.includes(input.value.toLowerCase());
      any = any || input.checked;
    }
    if (any) form.querySelector(`details[data-facet="${f}"]`).open = true;
  }
  form.addEventListener("input", apply);
  // The text field's `change` (on blur) repeats what its `input` events did.
  form.addEventListener("change", (ev) => { if (ev.target !== form.q) apply(); });
  apply();
})();

// "Paste a command": find the recipe by the model the pasted `vllm serve`
// lines serve (a recipe id or a variant's checkpoint id, any case: the
// build's #model-pages map), hand the text to that recipe page through this
// tab's session storage (never a URL, never a request) and open it; the
// recipe page's worker reads it with composer.importer.
(function () {
  const run = document.getElementById("import-run");
  const map = document.getElementById("model-pages");
  if (!run || !map) return;
  const pages = JSON.parse(map.textContent);
  const status = document.getElementById("import-status");
  // The model a command serves: the word after `serve`, or after --model
  // (the api_server entrypoint), or after a vLLM image in `docker run`.
  function models(text) {
    const found = [];
    const words = text.replace(/\\\n/g, " ").split(/\s+/).map((w) => w.replace(/^['"]|['"]$/g, ""));
    for (let i = 0; i < words.length - 1; i++) {
      const w = words[i], next = words[i + 1];
      const hit = (w === "serve" && words[i - 1] === "vllm") || w === "--model" || /^[\w.-]+\/vllm-openai[\w.-]*(:[\w.-]+)?$/.test(w);
      if (hit && next && !next.startsWith("-")) found.push(next.split("=").pop());
      if (w.startsWith("--model=")) found.push(w.slice(8));
    }
    return [...new Set(found)];
  }
  run.addEventListener("click", () => {
    const text = document.getElementById("import-text").value;
    if (text.length > 400000) {
      status.textContent = `The text is ${text.length} characters long; at most 400,000 are read. Paste only the commands.`;
      return;
    }
    const ids = models(text);
    const known = ids.filter((m) => Object.prototype.hasOwnProperty.call(pages, m.toLowerCase()));
    const targets = [...new Set(known.map((m) => pages[m.toLowerCase()]))];
    if (!ids.length) {
      status.textContent = "No `vllm serve MODEL` was found in the text.";
    } else if (targets.length > 1) {
      status.textContent = "The commands serve models of more than one recipe; paste the commands of one deployment.";
    } else if (!targets.length) {
      status.textContent = "No recipe here serves " + ids[0].slice(0, 80) + ".";  // textContent: shown as text
    } else {
      try {
        sessionStorage.setItem("vllm-configurator:import", text);
      } catch (err) {
        status.textContent = "This browser keeps no session storage; open the recipe page and paste the text there.";
        return;
      }
      location.href = new URL(targets[0], location.href).href;
    }
  });
})();
