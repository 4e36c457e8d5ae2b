// Theme and embed before first paint (?theme=light|dark|auto, ?embed=1); any
// other value is ignored. A file, not an inline script, so the pages can
// forbid inline script.
(function () {
  var q = new URLSearchParams(location.search), t = q.get("theme");
  if (t === "light" || t === "dark") document.documentElement.dataset.theme = t;
  if (q.get("embed") === "1") document.documentElement.classList.add("embed");
})();
