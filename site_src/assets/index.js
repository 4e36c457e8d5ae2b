// Index page filters: text, provider, task and verified hardware, kept in the URL
// query (?q=&provider=&task=&hardware=) so a filtered list can be shared.
"use strict";
(function () {
  const form = document.getElementById("filters");
  const items = [...document.querySelectorAll("#recipes > li")];
  if (!form) return;
  form.addEventListener("submit", (ev) => ev.preventDefault());
  const count = document.getElementById("count");
  const fields = ["q", "provider", "task", "hardware"];

  function apply() {
    const q = form.q.value.trim().toLowerCase();
    const provider = form.provider.value, task = form.task.value, hw = form.hardware.value;
    let shown = 0;
    for (const li of items) {
      const ok = (!q || q.split(/\s+/).every((w) => li.dataset.text.includes(w))) &&
        (!provider || li.dataset.provider === provider) &&
        (!task || li.dataset.tasks.split(" ").includes(task)) &&
        (!hw || li.dataset.hardware.split(" ").includes(hw));
      li.hidden = !ok;
      if (ok) shown++;
    }
    count.textContent = `${shown} of ${items.length} recipes`;
    document.getElementById("none").hidden = shown > 0;
    const params = new URLSearchParams();
    for (const f of fields) if (form[f].value) params.set(f, form[f].value);
    const qs = params.toString();
    history.replaceState(null, "", location.pathname + (qs ? "?" + qs : ""));
  }

  const start = new URLSearchParams(location.search);
  for (const f of fields) {
    const v = start.get(f);
    if (v === null) continue;
    const el = form[f];
    if (el.tagName === "SELECT" && ![...el.options].some((o) => o.value === v)) continue;  // ignore unknown values
    el.value = v.slice(0, 200);
  }
  form.addEventListener("input", apply);
  apply();
})();
