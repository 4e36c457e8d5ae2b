"""``python -m composer import [FILE] [--format text|json] [--hardware HW] [--recipes DIR]``
and the text of ``python -m composer RECIPE --query A --compare B``.

Thin layers over ``composer.api.import_report`` and ``composer.api.compare``:
this module reads stdin or the file, looks the recipe up by the model the
commands serve (a recipe id in any case or a variant's checkpoint id, as the
site's addresses and the compose command do), and prints the report. Nothing
read is ever run. Exit status: 0 the commands are a plan of the recipe (no
difference, nothing vLLM refuses), 1 they differ from the closest plan or vLLM
0.33.0 would refuse them, 2 no plan could be found (no recipe serves the model,
text refused: see the messages).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from composer.api import compare, import_report, make_context
from composer.shell import comment


def _finder(recipes: Path):
    """``find_context(model_id)`` over the recipes directory ``recipes``."""
    from composer.buildtime.checks import check_recipe, load_catalog_checked
    from composer.buildtime.cli import _checkpoint_recipe
    from composer.buildtime.loader import RecipeLoadError, recipe_paths
    from composer.buildtime.routes import find_recipe_id

    def find(model_id: str):
        try:
            catalog = load_catalog_checked(recipes)
            paths = recipe_paths(recipes)
            rid = find_recipe_id(paths, model_id) or _checkpoint_recipe(recipes, paths, model_id)[0]
            if rid is None:
                return None
            recipe, _ = check_recipe(recipes, rid, paths[rid], catalog)
            return make_context(rid, recipe, catalog) if recipe is not None else None
        except RecipeLoadError:
            return None

    return find


def _value(v) -> str:
    return "(not set)" if v is None else ("(switch)" if v == "" else v)


def render_import_text(r: dict) -> str:
    """The report as text: problems, per pasted command its findings and
    layout, the closest plan and its link, then the differences per command
    (flag, your value, the recipe's, where the recipe's comes from, the cost).
    Every line of pasted text is shown through ``shell.comment`` (one line,
    no control characters)."""
    out = []
    for p in r["problems"]:
        out.append(f"[{p['level']}] {comment(p['message'])}")
    for c in r["commands"]:
        if c["kind"] != "serve":
            continue
        out.append(f"Command {c['index'] + 1} (line {c['line']}): {comment(c['program'])}"
                   + (f" via {c['wrapper']}" if c["wrapper"] else "") + f", model {comment(c['model'] or '?')}")
        if c["layout"]:
            out.append(f"  layout: {comment(c['layout'])}")
        for f in c["findings"]:
            out.append(f"  [{f['level']}] vLLM 0.33.0 ({f['rule']}): {comment(f['message'])}")
    plan = r["plan"]
    if plan is None:
        out.append("No plan: " + ("see the messages above." if r["problems"] else "nothing to compare."))
        return "\n".join(out)
    out.append(f"Closest plan of {r['recipe']}: {plan['summary']}")
    out.append(f"  link: ?{plan['query']}")
    if r["hardware_note"]:
        out.append(f"  {r['hardware_note']}")
    out.append(f"Differences: {r['differences']}")
    for p in r["pairs"]:
        out.append(f"  command {p['yours'] + 1} ↔ {p['label']}: {len(p['differences'])} difference(s)")
        for d in p["differences"]:
            line = (f"    {d['name']}: yours {comment(_value(d['yours']))}, recipe {comment(_value(d['recipe']))}"
                    + (f"  <- {comment(d['source'])}" if d["source"] else ""))
            if d["cost"]:
                line += f"  ({comment(d['cost'])})"
            out.append(line)
    for label in r["unpasted"]:
        out.append(f"  not pasted: {label}")
    for i in r["unmatched"]:
        out.append(f"  command {i + 1}: the plan has no such command")
    return "\n".join(out)


def import_exit(r: dict) -> int:
    if r["plan"] is None:
        return 2
    refused = any(f["level"] == "error" for c in r["commands"] for f in c["findings"])
    return 1 if r["differences"] or refused or r["unmatched"] else 0


def import_main(argv: list[str], default_recipes: Path) -> int:
    """``python -m composer import``."""
    ap = argparse.ArgumentParser(prog="python -m composer import",
                                 description="Read vllm serve commands (stdin or FILE; never run) and compare them "
                                             "with the closest plan of their recipe.")
    ap.add_argument("file", nargs="?", type=Path, help="a file with the commands (default: stdin)")
    ap.add_argument("--format", choices=("text", "json"), default="text")
    ap.add_argument("--hardware", default=None, help="the hardware id the commands run on (default: searched)")
    ap.add_argument("--hint", default=None, help="a query whose hardware wins a tie")
    ap.add_argument("--recipes", type=Path, default=default_recipes, help="recipes directory (default: recipes/)")
    args = ap.parse_args(argv)
    raw = args.file.read_bytes() if args.file else sys.stdin.buffer.read()
    text = raw.decode("utf-8", errors="replace")
    r = import_report(text, _finder(args.recipes), args.hint, args.hardware)
    if args.format == "json":
        print(json.dumps(r, indent=2))
    else:
        print(render_import_text(r))
    return import_exit(r)


def _n(value) -> str:
    """A figure as the page's ``num`` macro (``site_src/_macros.html``) writes it: thousands separated, ``–`` when unknown."""
    return "–" if value is None else f"{value:,}"


def render_compare_text(c: dict) -> str:
    """A comparison as text: both plans and links, per command the
    differences (A's value → B's, B's source), per pool capacity and
    concurrency, notices only one plan has."""
    out = [f"A: {c['a']['summary']}  ?{c['a']['query']}", f"B: {c['b']['summary']}  ?{c['b']['query']}",
           f"Differences: {c['differences']}"]
    for cmd in c["commands"]:
        out.append(f"--- {cmd['label']}: {len(cmd['differences'])} difference(s)")
        for d in cmd["differences"]:
            out.append(f"  {d['name']}: A {comment(_value(d['a']))} → B {comment(_value(d['b']))}"
                       + (f"  <- {comment(d['source'])}" if d["source"] else ""))
    for p in c["pools"]:
        for side in ("a", "b"):
            f = p[side]
            if f is None:
                out.append(f"{p['scope']} {side.upper()}: (none)")
                continue
            per = f"{f['kv_gib']:.2f} GiB per GPU, " if f.get("kv_gib") is not None else ""
            out.append(f"{p['scope']} {side.upper()}: {_n(f['gpus'])} GPUs, KV cache {per}{_n(f['kv_gb'])} GB in all "
                       f"(~{_n(f['kv_tokens'])} tokens), {_n(f['engines'])} engine(s) × max-num-seqs "
                       f"{_n(f['max_num_seqs'])} = {_n(f['concurrency'])} sequences at once; "
                       f"{_n(f['full_sequences'])} full-length sequences ({_n(f['max_model_len'])} tokens each) fit")
    for side in ("only_a", "only_b"):
        for n in c["notices"][side]:
            out.append(f"notice only in {side[-1].upper()}: [{n['level']}] {comment(n['message'])}")
    return "\n".join(out)


def print_compare(ctx, query_a: str, query_b: str, fmt: str) -> int:
    """``--compare QUERY``: the plan of ``--query`` (A) beside QUERY's (B)."""
    c = compare(ctx, query_a, query_b)
    print(json.dumps(c, indent=2) if fmt == "json" else render_compare_text(c))
    return 0
