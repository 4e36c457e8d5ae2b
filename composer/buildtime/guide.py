"""A recipe's ``guide`` (Markdown) as HTML for its page, at build time only.

Rendered with markdown-it-py (CommonMark, plus GitHub tables and
strikethrough; pinned in pyproject.toml), configured so that recipe text from
strangers cannot reach the page as markup:

* raw HTML in the guide is escaped, never passed through (``html: False``);
* a link or image is kept only when its URL is ``http``, ``https`` or
  ``mailto``, or relative to this site (``../../org/repo``, ``#fragment``;
  never ``//host``) (``safe_url``); anything else (``javascript:``,
  ``data:``, ``vbscript:``, obfuscated schemes) is left as plain text;
* images become links to the image: the page's Content-Security-Policy
  loads no remote images;
* links get ``rel="nofollow noopener noreferrer"``;
* headings move one level down (``#`` → ``<h2>``) to sit under the page's
  own headings; code blocks and tables (wrapped) can take the keyboard focus,
  since they may scroll sideways; table column alignment is a class, not an
  inline style (the page's CSP allows none).

Not shipped to the browser (``composer/buildtime/`` is left out of the site's zip): the worker never
renders a guide, the build writes it into the page once.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from markdown_it import MarkdownIt

SAFE_SCHEMES = frozenset({"http", "https", "mailto"})
"""URL schemes a guide may link to."""
LINK_REL = "nofollow noopener noreferrer"


def safe_url(url: str) -> bool:
    """Whether a guide may link to ``url`` (already normalised by markdown-it:
    percent-encoded, so hidden control characters cannot split a scheme):
    an absolute ``http``/``https``/``mailto`` URL with a host (mailto: an
    address), or a path or ``#fragment`` relative to this site (no scheme, and
    not ``//host`` or a backslash, which browsers read as another host)."""
    url = url.strip()
    if not url or "\\" in url or url.lower().startswith("%5c"):
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    if not parts.scheme and not parts.netloc and not url.startswith("//") and ":" not in url.split("/", 1)[0]:
        return True
    if parts.scheme.lower() not in SAFE_SCHEMES:
        return False
    return bool(parts.netloc) if parts.scheme.lower() != "mailto" else bool(parts.path)


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.validateLink = safe_url  # type: ignore[method-assign]
    rules = md.renderer.rules  # type: ignore[attr-defined]

    def link_open(tokens, idx, options, env):
        tokens[idx].attrSet("rel", LINK_REL)
        return md.renderer.renderToken(tokens, idx, options, env)

    def image(tokens, idx, options, env):
        token = tokens[idx]
        alt = md.renderer.renderInlineAsText(token.children or [], options, env) or "image"
        src = md.utils.escapeHtml(token.attrGet("src") or "")
        return f'<a href="{src}" rel="{LINK_REL}">{md.utils.escapeHtml(alt)} (image)</a>'

    def heading(tokens, idx, options, env):
        token = tokens[idx]
        if not token.meta.get("shifted"):
            token.tag = f"h{min(6, int(token.tag[1:]) + 1)}"
            token.meta["shifted"] = True
        return md.renderer.renderToken(tokens, idx, options, env)

    fence, code_block = rules["fence"], rules["code_block"]

    def focusable(render):
        # A code block may scroll sideways: keyboard users must reach it (axe scrollable-region-focusable).
        return lambda tokens, idx, options, env: render(tokens, idx, options, env).replace("<pre>", '<pre tabindex="0">', 1)

    def table_open(tokens, idx, options, env):
        return '<div class="table-wrap" tabindex="0">' + md.renderer.renderToken(tokens, idx, options, env)

    def table_close(tokens, idx, options, env):
        return md.renderer.renderToken(tokens, idx, options, env) + "</div>\n"

    def cell(tokens, idx, options, env):
        # Column alignment as a class: the page's CSP allows no inline style attributes.
        token = tokens[idx]
        style = token.attrGet("style") or ""
        if style:
            token.attrs.pop("style", None)
            align = style.removeprefix("text-align:")
            if align in ("left", "center", "right"):
                token.attrSet("class", f"align-{align}")
        return md.renderer.renderToken(tokens, idx, options, env)

    rules["th_open"] = cell
    rules["td_open"] = cell
    rules["fence"] = focusable(fence)
    rules["code_block"] = focusable(code_block)
    rules["table_open"] = table_open
    rules["table_close"] = table_close
    rules["link_open"] = link_open
    rules["image"] = image
    rules["heading_open"] = heading
    rules["heading_close"] = heading
    return md


_MD = None


def render_guide(text: str | None) -> str:
    """The HTML of a guide in Markdown ("" for none). Safe to insert into the
    page as markup: see the module docstring for what is escaped or refused."""
    global _MD
    if not text or not str(text).strip():
        return ""
    if _MD is None:
        _MD = _parser()
    return _MD.render(str(text))
