"""The recipe page (issue 12, item 3): the guide rendered from Markdown at
build time with raw HTML escaped and unsafe links refused (for every corpus
guide and for hostile ones), the header facts and links, and the selected
variant's description and checkpoint link (a fragment the worker renders too)."""

from __future__ import annotations

import shutil
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from markupsafe import escape

import build
from composer.api import compose, compose_page, make_context
from composer.buildtime.guide import render_guide
from composer.buildtime.loader import load_catalog, load_recipe, recipe_paths

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "upstream-recipes"
corpus = pytest.mark.skipif(not CORPUS.exists(), reason="shared corpus not present")
QWEN = "Qwen/Qwen3-235B-A22B-Instruct-2507"


class _Elements(HTMLParser):
    """Every start tag with its attributes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {k: (v or "") for k, v in attrs}))


def elements(html: str) -> list[tuple[str, dict]]:
    p = _Elements()
    p.feed(html)
    p.close()
    return p.tags


ALLOWED_TAGS = {"h2", "h3", "h4", "h5", "h6", "p", "a", "ul", "ol", "li", "pre", "code", "em", "strong", "s",
                "blockquote", "hr", "br", "div", "table", "thead", "tbody", "tr", "th", "td"}


def assert_safe_guide_html(html: str) -> None:
    """Only Markdown's own elements; no event handlers or styles; every link
    http(s), mailto or relative to the site (never another scheme or host-relative)."""
    for tag, attrs in elements(html):
        assert tag in ALLOWED_TAGS, (tag, attrs)
        assert not [a for a in attrs if a.startswith("on") or a in ("style", "src", "srcdoc", "formaction")], (tag, attrs)
        if "href" in attrs:
            href = attrs["href"].strip()
            parts = urlsplit(href)
            assert parts.scheme in ("http", "https", "mailto") or (not parts.scheme and not href.startswith("//")), href
            assert attrs.get("rel") == "nofollow noopener noreferrer"
    assert "<script" not in html.lower() and "javascript:" not in "".join(
        a.get("href", "").lower() for _, a in elements(html))


@corpus
def test_every_corpus_guide_renders_to_safe_html():
    rendered = with_links = linked = 0
    for rid in recipe_paths(CORPUS):
        raw = yaml.safe_load((CORPUS / "models" / f"{rid}.yaml").read_text())
        guide = raw.get("guide") or ""
        html = render_guide(guide)
        assert_safe_guide_html(html)
        if guide.strip():
            assert html.strip(), rid
            rendered += 1
        if "](https://" in guide:
            with_links += 1
            linked += '<a href="https://' in html  # not when the link sits inside a code block
    assert rendered >= 150  # every corpus recipe has a guide
    assert linked >= 0.9 * with_links > 0


HOSTILE_GUIDES = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<a href=\"javascript:alert(1)\">x</a>",
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x](java\tscript:alert(1))",
    "[x](  javascript:alert(1))",
    "[x](vbscript:msgbox(1))",
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[x](//evil.example/path)",
    "[x](\\\\evil.example)",
    "![x](javascript:alert(1))",
    "![x](https://example.org/a.png \"t\" onerror=alert(1))",
    "<javascript:alert(1)>",
    "[x][r]\n\n[r]: javascript:alert(1)",
    "```\"><script>alert(1)</script>\nbody\n```",
    "| a |\n|---|\n| <iframe src=x></iframe> |",
    "<style>body{display:none}</style>",
    "[x](https://ok.example/\" onmouseover=\"alert(1))",
    "# <b onclick=alert(1)>t</b>",
]


@pytest.mark.parametrize("guide", HOSTILE_GUIDES)
def test_a_hostile_guide_stays_text(guide):
    html = render_guide(guide)
    assert_safe_guide_html(html)


def test_the_guide_is_markdown_with_safe_links_and_shifted_headings():
    html = render_guide("# Top\n\n## Sub\n\n[docs](https://docs.vllm.ai/) and [sibling](../../Org/Other)\n\n"
                        "![plot](https://example.org/p.png)\n\n```bash\nvllm serve x\n```\n")
    assert "<h2>Top</h2>" in html and "<h3>Sub</h3>" in html
    assert '<a href="https://docs.vllm.ai/" rel="nofollow noopener noreferrer">docs</a>' in html
    assert 'href="../../Org/Other"' in html
    assert "<img" not in html and 'href="https://example.org/p.png"' in html  # CSP loads no remote images
    assert '<pre tabindex="0"><code class="language-bash">vllm serve x' in html
    assert render_guide("") == render_guide(None) == ""


def test_the_markdown_library_is_not_shipped_to_the_browser():
    import io
    import zipfile

    names = zipfile.ZipFile(io.BytesIO(build.site_python_zip())).namelist()
    assert "composer/buildtime/guide.py" not in names and not [n for n in names if n.startswith("markdown_it/")]


# ----------------------------------------------------------------- header
@corpus
def test_header_facts_and_links_for_every_corpus_recipe():
    for rid in recipe_paths(CORPUS):
        recipe = load_recipe(CORPUS, rid)
        h = build.recipe_header(recipe, rid, f"models/{rid}.yaml", "https://github.com/o/r", "main")
        m = recipe.model
        assert h["hf_url"] == (None if m.model_id.startswith("/") else f"https://huggingface.co/{m.model_id}")
        labels = {t["label"]: t["value"] for t in h["tags"]}
        assert ("Architecture" in labels) == bool(m.architecture)
        assert ("Size" in labels) == bool(m.parameter_count)
        assert ("Context" in labels) == bool(m.context_length)
        if m.min_vllm_version:
            assert labels["vLLM"] == f"≥ {m.min_vllm_version}"
        assert h["edit_url"] == f"https://github.com/o/r/edit/main/models/{rid}.yaml"
        assert h["report_url"].startswith("https://github.com/o/r/issues/new?title=")


@pytest.mark.parametrize("url", ["javascript:alert(1)", "http://github.com/o/r", "https://", "https://x/\"onmouseover=1",
                                 "https://x/<script>", "https://x/r?q=1", "file:///etc"])
def test_the_repository_url_setting_refuses_what_is_not_an_https_repository(url):
    with pytest.raises(build.BuildError):
        build.check_repo_url(url)


def test_table_alignment_is_a_class_not_an_inline_style():
    html = render_guide("| a | b | c |\n|:--|:-:|--:|\n| 1 | 2 | 3 |\n")
    assert "style=" not in html and 'class="align-right"' in html and 'class="align-center"' in html


def test_context_labels():
    assert [build.context_label(n) for n in (131072, 200000, 1048576, 32768, 12345)] == ["128K", "200K", "1M", "32K", "12,345"]


# ------------------------------------------------------------- checkpoint
@pytest.fixture(scope="module")
def qwen():
    recipes = ROOT / "recipes"
    return make_context(QWEN, load_recipe(recipes, QWEN), load_catalog(recipes))


def test_the_checkpoint_follows_the_variant(qwen):
    default = compose(qwen, "", every_form=False)["checkpoint"]
    assert default["variant"] == "default" and default["model_id"] == qwen.recipe.model.model_id
    assert default["url"] == f"https://huggingface.co/{qwen.recipe.model.model_id}"
    fp8 = compose(qwen, "variant=fp8", every_form=False)["checkpoint"]
    assert fp8["model_id"] == qwen.recipe.variants["fp8"].model_id != default["model_id"]
    assert fp8["description"] == qwen.recipe.variants["fp8"].description and fp8["url"].endswith(fp8["model_id"])


def test_the_checkpoint_fragment_is_rendered_by_the_one_renderer(qwen):
    from jinja2 import FileSystemLoader

    from composer.render import FRAGMENTS, PageRenderer, environment

    assert "checkpoint" in FRAGMENTS
    renderer = PageRenderer(environment(FileSystemLoader(ROOT / "site_src")))
    html = renderer.fragments(compose_page(qwen, "variant=fp8"), ("checkpoint",))["checkpoint"]
    fp8 = qwen.recipe.variants["fp8"]
    assert f'href="https://huggingface.co/{fp8.model_id}"' in html and str(escape(fp8.description)) in html
    app_js = (ROOT / "site_src" / "assets" / "app.js").read_text()
    assert '"checkpoint"' in app_js  # the page swaps it in after every click


def test_explain_json_renders_the_command_it_is_sent_and_nothing_else(monkeypatch):
    """Issue 22: the page sends a command of the plan on screen and gets its
    Explain table, the macro's, with nothing composed again; the index and
    query are echoed only as an int and a string (an adversarial finding: 1.0
    raised, True read as 1), and a value never reaches the HTML unescaped."""
    import json

    from jinja2 import FileSystemLoader

    from composer import render
    from composer.api import make_context
    from composer.buildtime.loader import load_catalog, load_recipe

    renderer = render.PageRenderer(render.environment(FileSystemLoader(ROOT / "site_src")))
    monkeypatch.setattr(render, "_BROWSER", renderer)
    rid = "moonshotai/Kimi-K3"
    ctx = make_context(rid, load_recipe(ROOT / "recipes", rid), load_catalog(ROOT / "recipes"))
    plan = compose_page(ctx, "hardware=gb200&strategy=pd_cluster")
    cmd = plan["commands"][2]
    got = json.loads(render.explain_json(json.dumps(cmd), 2, plan["query"]))
    assert got == {"index": 2, "query": plan["query"], "fragments": {"explain": renderer.macro("explain_body", cmd)}}
    assert got["fragments"]["explain"].count("<tr data-flag=") == len(cmd["provenance"])
    for index in (1.0, True, "2", None):
        assert json.loads(render.explain_json(json.dumps(cmd), index, 7))["index"] == -1
    assert json.loads(render.explain_json("[1, 2]", 0, ""))["fragments"]["explain"] == ""
    hostile = {"provenance": [{"flag": "<script>x</script>", "help": "", "value": "<img src=x>", "layer": "a", "key": "b",
                               "replaced": [], "why": ""}], "env_provenance": []}
    html = json.loads(render.explain_json(json.dumps(hostile), 0, ""))["fragments"]["explain"]
    assert "<script>" not in html and "<img" not in html and "&lt;script&gt;" in html


def test_the_capacity_line_leads_with_what_vllm_would_log():
    """A fresh user's finding: the tokens and the concurrency sat in the middle
    of a hundred-word paragraph. Each pool's item starts with the lines vLLM
    would log (with several pools, after the pool's name), then the account."""
    import re

    from jinja2 import FileSystemLoader

    from composer.api import make_context
    from composer.buildtime.loader import load_catalog, load_recipe
    from composer.render import PageRenderer, environment

    rid = "moonshotai/Kimi-K3"
    ctx = make_context(rid, load_recipe(ROOT / "recipes", rid), load_catalog(ROOT / "recipes"))
    renderer = PageRenderer(environment(FileSystemLoader(ROOT / "site_src")))
    for query, pools in (("hardware=h200", 1), ("hardware=gb200&strategy=pd_cluster", 2)):
        plan = compose_page(ctx, query)
        html = renderer.fragments(plan, ("capacity",))["capacity"]
        items = re.split(r"<li class=\"[^\"]*\" data-scope=\"[^\"]*\">", html)[1:]  # each pool's item, whole
        assert len(items) == pools == len(plan["capacity"])
        for item, cap in zip(items, plan["capacity"]):
            log = item.index('<pre class="vllm-log"')
            assert log < item.index(str(escape(cap["message"]))[:40]) and "GPU KV cache size" in item[log:]
            assert ('class="cap-where"' in item[:log]) == (pools > 1)
            # several engines (the decode pool's DP ranks): the whole pool's total is a line of its own between
            # the log and the account (a fresh user found it mid-paragraph, beside the per-rank figure)
            total = f'<div class="cap-total">{escape(cap["total"])}</div>'
            assert (total in item) == bool(cap["total"]) and (cap["scope"] == "decode") == bool(cap["total"])
            if cap["total"]:
                assert log < item.index(total) < item.index(str(escape(cap["message"]))[:40])
            # a plan that fits folds the account under the result (issue 21: a P/D plan's two accounts put
            # its commands 2,000 px down at 1280 px); the assumptions are in the same disclosure
            how = item.index('<details class="cap-how">')
            assert log < how < item.index(str(escape(cap["message"]))[:40])
            assert all(str(escape(a)) in item[how:] for a in cap["assumptions"]) and 'class="assumptions"' not in item
        # where the plan does not fit, the account is the reason: shown, not folded
        bad = compose_page(ctx, "hardware=h100&nodes=1&strategy=single_node_tp")
        html = renderer.fragments(bad, ("capacity",))["capacity"]
        assert bad["status"] == "error" and 'class="cap-how"' not in html
        assert str(escape(bad["capacity"][0]["message"]))[:60] in html.split("<details")[0]


# ------------------------------------------------------------------ build
def test_the_built_page_has_guide_header_and_checkpoint(tmp_path):
    recipes = tmp_path / "recipes"
    shutil.copytree(ROOT / "recipes", recipes)
    path = recipes / "models" / f"{QWEN}.yaml"
    data = yaml.safe_load(path.read_text())
    data["guide"] = "## Notes\n\n<script>window.__x=1</script>\n\n[bad](javascript:alert(1)) [good](https://docs.vllm.ai/)\n"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "site"
    build.build(recipes, out, repo_url="https://git.example.org/team/recipes/", repo_branch="dev", neighbours=0, precompress=False)
    html = (out / QWEN / "index.html").read_text()
    assert '<section id="guide"' in html and "<h3>Notes</h3>" in html
    assert "&lt;script&gt;window.__x=1&lt;/script&gt;" in html and "<script>window.__x" not in html
    assert 'href="https://docs.vllm.ai/"' in html and 'href="javascript:' not in html
    assert f'href="https://git.example.org/team/recipes/edit/dev/models/{QWEN}.yaml"' in html
    assert 'href="https://git.example.org/team/recipes/issues/new?' in html
    assert f'href="https://huggingface.co/{data["model"]["model_id"]}"' in html
    scripts = [a for t, a in elements(html) if t == "script"]
    assert all(a.get("src") or a.get("type") == "application/json" for a in scripts)


def test_what_the_context_choice_changes_stays_in_view():
    """An adversarial finding: with the account folded, the Context control
    changed nothing visible. The concurrency at the chosen length is a line
    of its own over the fold, and a length over --max-model-len says vLLM
    refuses it."""
    from pathlib import Path

    from jinja2 import FileSystemLoader

    from composer.api import make_context
    from composer.buildtime.loader import load_catalog, load_recipe
    from composer.render import PageRenderer, environment

    renderer = PageRenderer(environment(FileSystemLoader(ROOT / "site_src")))
    rid = "moonshotai/Kimi-K3"
    k3 = make_context(rid, load_recipe(ROOT / "recipes", rid), load_catalog(ROOT / "recipes"))
    seen = {}
    for context, tokens in (("8k", "8,192"), ("128k", "131,072")):
        plan = compose_page(k3, f"context={context}")
        html = renderer.fragments(plan, ("capacity",))["capacity"]
        shown = html.split('<details class="cap-how">')[0]
        assert f"Concurrency for {tokens}-token requests (Context): {plan['capacity'][0]['context_concurrency']:.2f}x" in shown
        seen[context] = shown
    assert seen["8k"] != seen["128k"]
    corpus = Path(ROOT.parent / "shared" / "upstream-recipes")
    lfm = make_context("LiquidAI/LFM2.5-1.2B-Base", load_recipe(corpus, "LiquidAI/LFM2.5-1.2B-Base"), load_catalog(corpus))
    plan = compose_page(lfm, "hardware=h100&context=128k")
    html = renderer.fragments(plan, ("capacity",))["capacity"]
    assert plan["capacity"][0]["max_model_len"] < 131_072
    assert ("The 131,072-token requests asked for (Context) are longer than --max-model-len "
            f"{plan['capacity'][0]['max_model_len']:,}: vLLM refuses them.") in html.split('<details class="cap-how">')[0]
