"""The page's one renderer: the Jinja2 macros of ``site_src/_macros.html``.

The build renders whole pages with them (``build.py``); in the browser the Web
Worker renders the same macros with the same Jinja2 after every click and
sends the HTML fragments to the page, which only swaps them in. The Jinja2
environment is configured here once for both, so the two renderings are equal
byte for byte (a test compares them).

Jinja2 and MarkupSafe are pure Python here (MarkupSafe without its optional C
speedups), so the environment and its compiled templates can live in the
Pyodide memory snapshot the build writes (``site_src/snapshot.mjs``).
"""

from __future__ import annotations

import json

from composer.cache import MODULE_BOUNDS
from jinja2 import BaseLoader, DictLoader, Environment, StrictUndefined, select_autoescape
from markupsafe import Markup, escape

# Imported here, not where they are used: the worker's memory snapshot holds
# only the modules imported at boot (its file system has no composer/ after a
# restore), and "Paste a command" and "Compare with…" run these.
import composer.compare  # noqa: F401
import composer.importer  # noqa: F401

FRAGMENTS = ("controls", "summary", "notices", "capacity", "placeholders", "commands", "extras", "checkpoint")
"""Containers of recipe.html (element ids) whose inner HTML the worker renders;
each is the macro ``<name>_block`` of ``_macros.html``."""
PLAN_FRAGMENTS = FRAGMENTS[1:]
"""The fragments that show the plan; ``controls`` comes second (it costs the
most: every option's query is resolved) so a click shows its plan first."""
MACROS = "_macros.html"


def environment(loader: BaseLoader) -> Environment:
    """The Jinja2 environment of the site: HTML autoescaped, undefined names an
    error, block tags trimmed, the ``sentence``, ``why_lines``
    (``composer.controls.why_lines``), ``val``, ``keypath`` and ``context_line``
    (``composer.memory.context_line``) filters."""
    env = Environment(loader=loader, autoescape=select_autoescape(["html"]), undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, cache_size=MODULE_BOUNDS["jinja-templates"])
    env.filters["sentence"] = sentence
    env.filters["why_lines"] = _why_lines
    env.filters["val"] = val_html
    env.filters["keypath"] = keypath_html
    from composer.memory import context_line

    env.filters["context_line"] = context_line
    from composer.vllm_cli import VERSION

    env.globals["vllm_version"] = VERSION  # the release the commands are checked against
    return env


def _why_lines(options):
    from composer.controls import why_lines

    return why_lines(options)


def _wrapping_code(text: object, breaks: tuple[str, str], cls: str = "") -> Markup:
    """``text`` (``None``: empty) escaped in a ``<code>``, with a ``<wbr>``
    (a line may break there, only if it must) after each character of
    ``breaks``."""
    html = str(escape("" if text is None else str(text)))
    for ch in breaks:
        html = html.replace(ch, ch + "<wbr>")
    return Markup(f'<code{cls}>{html}</code>')


def val_html(value: object) -> Markup:
    """Filter ``val``: a flag's or variable's value as a monospace block that
    wraps after a JSON comma or colon (``"a,b"`` → ``<code class="val">a,<wbr>b</code>``)."""
    return _wrapping_code(value, (",", ":"), ' class="val"')


def keypath_html(key: object) -> Markup:
    """Filter ``keypath``: a recipe key path (``variants.default.args``) as code
    that wraps after its dots and slashes."""
    return _wrapping_code(key, (".", "/"))


def sentence(text: str) -> str:
    """``text`` as a sentence: a full stop added unless it ends in one (or
    ``!``, ``?``, ``…``), so joined hint parts never run together (issue 21)."""
    text = str(text).strip()
    return text if not text or text[-1] in ".!?…" else text + "."


class PageRenderer:
    """Renders the fragments of a recipe page from a page view (the dict of
    ``composer.api.compose_page``)."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.macros = env.get_template(MACROS).module

    def macro(self, name: str, value: dict) -> str:
        """The HTML of macro ``name`` of ``_macros.html`` for ``value``."""
        return str(getattr(self.macros, name)(value))

    def fragments(self, view: dict, names=FRAGMENTS) -> dict[str, str]:
        """``{fragment name: inner HTML}`` for every name in ``names``."""
        return {name: str(getattr(self.macros, f"{name}_block")(view)) for name in names}


_BROWSER: PageRenderer | None = None


def install_templates(sources: dict[str, str]) -> None:
    """Compile the site's templates (``{file name: source}``) for the browser's
    renderer. Run by the build before it takes the memory snapshot, so a page
    boots with the templates already compiled."""
    global _BROWSER
    _BROWSER = PageRenderer(environment(DictLoader(sources)))


def page_json(recipe_json: str, catalog_json: str, query: str | None) -> str:
    """The page view of ``query`` rendered, as JSON ``{plan, fragments, text}``:
    ``plan`` is the plan dict (argv, scripts, URL: what Copy, Download and
    Share act on), ``fragments`` the HTML of every container, ``text`` what
    Copy all copies (``composer.plan_text``). The worker asks
    for it in two parts (``plan_json`` then ``controls_json``); this is both."""
    first = json.loads(plan_json(recipe_json, catalog_json, query))
    first["fragments"].update(json.loads(controls_json(recipe_json, catalog_json, query))["fragments"])
    first.pop("next", None)
    first["fragments"] = {name: first["fragments"][name] for name in FRAGMENTS}
    return json.dumps(first)


def _renderer() -> PageRenderer:
    if _BROWSER is None:
        raise RuntimeError("install_templates() was not called")
    return _BROWSER


def plan_json(recipe_json: str, catalog_json: str, query: str | None) -> str:
    """The plan of ``query``, its fragments (all but the controls) and its
    text (``composer.plan_text``: what the CLI prints, which Copy all copies),
    as JSON ``{plan, fragments, text}``."""
    from composer.api import context_from_json
    from composer.outputs import to_json
    from composer.plan import plan_and_selection
    from composer.plan_text import plan_text

    ctx = context_from_json(recipe_json, catalog_json)
    plan, sel, canon = plan_and_selection(ctx, query)
    ctx.cache("page-selection").put(query, (sel, canon, plan.notices))  # its controls_json follows
    data = to_json(plan)
    return json.dumps({"plan": data, "fragments": _renderer().fragments(data, PLAN_FRAGMENTS), "text": plan_text(data)})


def explain_json(command_json: str, index: object = -1, query: object = "") -> str:
    """The Explain table of one command of the plan on screen, rendered with
    the macro ``explain_body``: JSON ``{index, query, fragments: {explain}}``
    (``index`` and ``query`` say which panel and plan it is for: an int, else
    -1; a string, else ""). ``command_json`` is that command as the plan's
    JSON has it (``commands[i]``: its ``provenance`` and ``env_provenance``);
    the page sends it, so nothing is composed again (an adversarial finding:
    composing the plan anew for each open table, 38–67 ms in CPython, delayed
    the next click by 118–203 ms). The macro escapes every value. The page
    asks for it when a reader opens a panel's Explain that the plan's HTML
    left out (every command but the first: ``explain`` in ``_macros.html``)."""
    command = json.loads(command_json)
    html = _renderer().macro("explain_body", command) if isinstance(command, dict) else ""
    index = index if isinstance(index, int) and not isinstance(index, bool) else -1
    return json.dumps({"index": index, "query": query if isinstance(query, str) else "", "fragments": {"explain": html}})


def controls_json(recipe_json: str, catalog_json: str, query: str | None) -> str:
    """The page's controls for ``query``, rendered: JSON ``{fragments: {controls}}``."""
    from composer.api import context_from_json
    from composer.controls import build_options, group_kinds, groups
    from composer.outputs import to_json
    from composer.plan import plan_and_selection

    ctx = context_from_json(recipe_json, catalog_json)
    found = ctx.cache("page-selection").peek(query)
    if found:
        sel, canon, notices = found
    else:
        plan, sel, canon = plan_and_selection(ctx, query)
        notices = plan.notices
    options = to_json(build_options(ctx, sel, canon, notices))
    view = {"options": options, "groups": groups(ctx), "kinds": group_kinds(ctx)}
    # The queries a next click can send: the worker composes their plans ahead.
    nxt = [o["query"] for items in options.values() for o in items if not o["disabled"] and not o["selected"]]
    return json.dumps({"fragments": _renderer().fragments(view, ("controls",)), "next": nxt})


def import_json(recipe_json: str, catalog_json: str, text: str, hint: str | None = None) -> str:
    """The page's "Paste a command": the import report of ``text`` against
    this page's recipe (``composer.api.import_report``; a model this recipe
    does not serve is a problem of the report), rendered with the macro
    ``import_block``: JSON ``{report, fragments: {import}}``. ``hint``: the
    query of the plan on screen (its hardware wins a tie). The text stays in
    the browser: it is an argument here, never part of a URL."""
    from composer.api import context_from_json, import_report
    from composer.importer import variant_of

    ctx = context_from_json(recipe_json, catalog_json)
    report = import_report(text, lambda model: ctx if variant_of(ctx, model) is not None else None, hint)
    html = _renderer().macro("import_block", report)
    return json.dumps({"report": report, "fragments": {"import": html}})


def compare_json(recipe_json: str, catalog_json: str, query_a: str, query_b: str) -> str:
    """The page's "Compare with…": plan A (``query_a``, the kept plan) beside
    plan B (``query_b``, the plan on screen), ``composer.api.compare``,
    rendered with the macro ``compare_block``: JSON ``{comparison, fragments: {compare}}``."""
    from composer.api import compare, context_from_json

    ctx = context_from_json(recipe_json, catalog_json)
    c = compare(ctx, query_a, query_b)
    return json.dumps({"comparison": c, "fragments": {"compare": _renderer().macro("compare_block", c)}})
