// Redirects of a static host (composer/routes.py decides them at build time):
// a stub page at a variant's checkpoint id names its recipe in
// <meta name="redirect-to">; 404.html carries the map of lower-case paths
// (recipes, organisations, checkpoint ids) and is served at any unknown path.
// Either way the visitor's query and hash are kept, and a checkpoint's variant
// is added as ?variant=<key> (upstream semantics §12, Routing).
"use strict";
(function () {
  function go(target, variant) {
    const url = new URL(target, location.href);
    const q = new URLSearchParams(location.search);
    if (variant) q.set("variant", variant);  // the address names the variant: it wins
    const s = q.toString().replace(/%2C/g, ",").replace(/%3A/g, ":");
    url.search = s ? "?" + s : "";
    url.hash = location.hash;
    if (url.pathname === location.pathname) return false;  // never a loop
    location.replace(url.href);
    return true;
  }

  const stub = document.querySelector('meta[name="redirect-to"]');
  if (stub) {
    go(stub.content, stub.dataset.variant);
    return;
  }
  const data = document.getElementById("routes");
  if (!data) return;
  const base = data.dataset.base || "/";
  let path;
  try {
    path = decodeURIComponent(location.pathname);
  } catch (err) {
    path = location.pathname;  // a malformed %-escape: match it as it is
  }
  let hit = null;
  const inside = path.toLowerCase().startsWith(base.toLowerCase());
  const key = inside ? path.slice(base.length).replace(/\/index\.html?$/i, "").replace(/^\/+|\/+$/g, "").toLowerCase() : null;
  if (inside) {
    const routes = JSON.parse(data.textContent);
    hit = Object.prototype.hasOwnProperty.call(routes, key) ? routes[key] : null;
  }
  if (hit) {
    go(base + (hit.org || hit.id) + "/", hit.variant);
    return;
  }
  // A recipe the build left out (build.py left_out): say why at its address, as text only.
  const gone = document.getElementById("left-out");
  const missing = gone && inside ? JSON.parse(gone.textContent || "{}") : {};
  const entry = Object.prototype.hasOwnProperty.call(missing, key) ? missing[key] : null;
  const said = document.getElementById("not-found");
  if (entry && said) {
    said.textContent = "The recipe " + entry.id + " is in the recipes directory but was not built: ";
    const list = document.createElement("ul");
    for (const problem of entry.problems) {
      const li = document.createElement("li");
      li.textContent = problem;
      list.appendChild(li);
    }
    said.after(list);
  }
})();
