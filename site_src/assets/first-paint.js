// Runs before first paint (a file, not an inline script, so pages can forbid
// inline script): the theme (?theme=light|dark|auto, else the toggle's last choice), the embed layout
// (?embed=1), and for a link with plan parameters the preview marking, so the
// pre-rendered recipe default is never shown, even for one frame, as the
// link's answer (app.js lifts it once the link's own plan is rendered).
(function () {
  var q = new URLSearchParams(location.search), t = q.get("theme");
  if (t === null) {  // no theme in the link: the one last chosen with the page's toggle
    try { t = localStorage.getItem("vllm-configurator:theme"); } catch (e) { t = null; }
  }
  if (t === "light" || t === "dark") document.documentElement.dataset.theme = t;
  if (q.get("embed") === "1") document.documentElement.classList.add("embed");
  q.delete("theme");
  q.delete("embed");
  if (q.toString()) document.documentElement.classList.add("link-preview");
})();
