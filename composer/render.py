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

from jinja2 import BaseLoader, DictLoader, Environment, StrictUndefined, select_autoescape

FRAGMENTS = ("controls", "summary", "notices", "capacity", "commands", "extras")
"""Containers of recipe.html (element ids) whose inner HTML the worker renders;
each is the macro ``<name>_block`` of ``_macros.html``."""
MACROS = "_macros.html"


def environment(loader: BaseLoader) -> Environment:
    """The Jinja2 environment of the site: HTML autoescaped, undefined names an
    error, block tags trimmed."""
    return Environment(loader=loader, autoescape=select_autoescape(["html"]), undefined=StrictUndefined,
                       trim_blocks=True, lstrip_blocks=True)


class PageRenderer:
    """Renders the fragments of a recipe page from a page view (the dict of
    ``composer.api.compose_page``)."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.macros = env.get_template(MACROS).module

    def fragments(self, view: dict) -> dict[str, str]:
        """``{fragment name: inner HTML}`` for every name in ``FRAGMENTS``."""
        return {name: str(getattr(self.macros, f"{name}_block")(view)) for name in FRAGMENTS}


_BROWSER: PageRenderer | None = None


def install_templates(sources: dict[str, str]) -> None:
    """Compile the site's templates (``{file name: source}``) for the browser's
    renderer. Run by the build before it takes the memory snapshot, so a page
    boots with the templates already compiled."""
    global _BROWSER
    _BROWSER = PageRenderer(environment(DictLoader(sources)))


def page_json(recipe_json: str, catalog_json: str, query: str | None) -> str:
    """Browser entry point: the page view of ``query`` rendered. Returns JSON
    ``{plan, fragments}``: ``plan`` is the plan dict (argv, scripts, URL: what
    Copy, Download and Share act on), ``fragments`` the HTML of each container."""
    from composer.api import compose_page, context_from_json

    if _BROWSER is None:
        raise RuntimeError("install_templates() was not called")
    view = compose_page(context_from_json(recipe_json, catalog_json), query)
    fragments = _BROWSER.fragments(view)
    plan = {k: v for k, v in view.items() if k not in ("options", "groups")}
    return json.dumps({"plan": plan, "fragments": fragments})
