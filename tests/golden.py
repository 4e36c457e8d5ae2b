"""Characterization of the composer's outputs: a golden file of plans.

Before a restructuring, today's outputs are pinned here (issue 17): for a fixed
list of selections — every recipe default of ours and of the public corpus,
every option of our recipes' default pages, and seeded random click walks over
Kimi K3, our other recipes and a sample of corpus recipes — the file
``tests/golden/plans.jsonl`` records, per selection, the status, the summary,
the notice codes and one short digest per part of the plan (commands with argv,
env, text and scripts; notices; capacity; install; client checks; placeholders;
URLs; the Kubernetes manifests; the page's controls). ``test_golden.py``
recomposes every line and compares.

The selection list is part of the file, so the walks are not re-drawn from the
code under test. A deliberate change of output regenerates the file in the same
commit (``python -m tests.golden --write``) and says why; ``--diff`` lists which
parts of which selections differ from the committed file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from composer.api import compose_page, make_context  # noqa: E402
from composer.buildtime.loader import load_catalog, load_recipe, recipe_paths  # noqa: E402

OURS = ROOT / "recipes"
CORPUS = ROOT.parent / "shared" / "upstream-recipes"
GOLDEN = ROOT / "tests" / "golden" / "plans.jsonl"
SOURCES = {"ours": OURS, "corpus": CORPUS}

PARTS = ("selection", "commands", "blocked", "notices", "capacity", "install", "companions", "client",
         "placeholders", "urls", "checkpoint", "verification", "kubernetes", "options")
"""The digested parts of a plan, in the file's order."""


def digest(value) -> str:
    """A 16-hex-digit SHA-256 of ``value``'s canonical JSON."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


_CONTEXTS: dict = {}


def context(source: str, rid: str):
    """The recipe context of ``rid`` in ``source`` (``ours`` or ``corpus``), cached."""
    key = (source, rid)
    if key not in _CONTEXTS:
        root = SOURCES[source]
        cats = _CONTEXTS.setdefault(("catalog", source), load_catalog(root))
        _CONTEXTS[key] = make_context(rid, load_recipe(root, rid), cats)
    return _CONTEXTS[key]


def record(source: str, rid: str, query: str) -> dict:
    """One golden line: the plan of ``query`` (with its Kubernetes form) and
    the page's controls, as status, summary, notice codes and part digests."""
    ctx = context(source, rid)
    plan = page = compose_page(ctx, query, every_form=True)  # compose(ctx, query) and the controls, composed once
    parts = {
        "selection": plan["selection"],
        "commands": plan["commands"],
        "blocked": plan["blocked_commands"],
        "notices": plan["notices"],
        "capacity": plan["capacity"],
        "install": plan["install"],
        "companions": plan["companions"],
        "client": plan["client"],
        "placeholders": plan["placeholders"],
        "urls": [plan["url"], plan["query"], plan["share_url"]],
        "checkpoint": [plan["recipe"], plan["checkpoint"]],
        "verification": [plan["verified"], plan["verification"]],
        "kubernetes": plan["kubernetes"],
        "options": [page["options"], page["groups"]],
    }
    return {
        "source": source, "recipe": rid, "query": query, "status": plan["status"], "summary": plan["summary"],
        "codes": [n["code"] for n in plan["notices"]],
        "digests": {p: digest(parts[p]) for p in PARTS},
    }


def _walk(source: str, rid: str, rng: random.Random, depth: int) -> list[str]:
    """Queries of a random click walk from the recipe default: each step
    follows an enabled, unselected option of the current page."""
    ctx = context(source, rid)
    query, out = "", []
    for _ in range(depth):
        page = compose_page(ctx, query)
        opts = [o["query"] for items in page["options"].values() for o in items
                if not o["disabled"] and not o["selected"]]
        if not opts:
            break
        query = rng.choice(opts)
        out.append(query)
    return out


def selections() -> list[tuple[str, str, str]]:
    """The characterized ``(source, recipe id, query)`` triples, deterministic.
    Each recipe's walks have their own seed, so a deliberate change of one
    recipe's options leaves the other recipes' walks (and golden lines) where
    they were (one shared generator once moved 1,561 lines of other recipes)."""
    out: list[tuple[str, str, str]] = []
    ours = sorted(recipe_paths(OURS))
    for rid in ours:
        rng = random.Random(f"17:ours:{rid}")
        out.append(("ours", rid, ""))
        page = compose_page(context("ours", rid), "")
        out += [("ours", rid, o["query"]) for items in page["options"].values() for o in items]
        walks = 160 if rid == "moonshotai/Kimi-K3" else 40
        for _ in range(walks):
            out += [("ours", rid, q) for q in _walk("ours", rid, rng, 8)]
    if CORPUS.exists():
        corpus = sorted(recipe_paths(CORPUS))
        out += [("corpus", rid, "") for rid in corpus]
        for k, rid in enumerate(random.Random(17).sample(corpus, 50) + ["moonshotai/Kimi-K3"] * 10):
            if rid not in corpus:
                continue
            rng = random.Random(f"17:corpus:{rid}:{k}")
            for _ in range(4):
                out += [("corpus", rid, q) for q in _walk("corpus", rid, rng, 6)]
    seen, unique = set(), []
    for item in out:
        if item not in seen:
            seen.add(item)
            unique.append(item)
    return unique


def load() -> list[dict]:
    """The committed golden lines."""
    return [json.loads(line) for line in GOLDEN.read_text().splitlines() if line.strip()]


BLOCK, THIRDS = 24, 3
"""The CI sample of the golden lines: blocks of 24 (a walk's neighbouring steps
share the controls' cached error checks, so contiguous blocks cost about a
third less than scattered lines), one block in three."""


def sampled(lines: list[dict], third: int) -> list[dict]:
    """What a walk over the golden lines checks in CI's run: every default
    (query "") and the blocks ``third`` (0, 1 or 2) of every three; every line
    with ``COMPOSER_FULL_TESTS=1``. The golden test takes third 0, the
    capacity and launch-rule properties thirds 1 and 2, so a CI run recomposes
    each line about once and every line is checked by one of them."""
    from tests.plan_space import FULL

    return [x for i, x in enumerate(lines) if FULL or not x["query"] or (i // BLOCK) % THIRDS == third]


def write() -> int:
    lines = [record(*sel) for sel in selections()]
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text("".join(json.dumps(x, ensure_ascii=False, separators=(",", ":")) + "\n" for x in lines))
    return len(lines)


def diff() -> list[str]:
    """Where today's outputs differ from the committed file, one line each."""
    out = []
    for want in load():
        got = record(want["source"], want["recipe"], want["query"])
        parts = [p for p in PARTS if got["digests"][p] != want["digests"].get(p)]
        for key in ("status", "summary", "codes"):
            if got[key] != want[key]:
                parts.append(key)
        if parts:
            out.append(f"{want['source']} {want['recipe']} ?{want['query']}: {', '.join(parts)}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.golden")
    ap.add_argument("--write", action="store_true", help="regenerate tests/golden/plans.jsonl")
    ap.add_argument("--diff", action="store_true", help="list selections whose outputs differ from the file")
    args = ap.parse_args(argv)
    if args.write:
        print(f"{write()} selections written to {GOLDEN.relative_to(ROOT)}")
        return 0
    if args.diff:
        rows = diff()
        print("\n".join(rows) or "no differences")
        return 1 if rows else 0
    ap.print_help()
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
