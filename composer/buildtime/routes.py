"""Addresses that lead to a recipe page besides its own ``/<org>/<repo>/``.

A static host (GitHub Pages and the like) matches paths case-sensitively and
serves ``/404.html`` for any path it does not have. The public site sends a
case-mismatched path to the recipe with the query kept, and a variant's
checkpoint id (``Qwen/Qwen3-235B-A22B-Instruct-2507-FP8``) to its parent recipe
with ``?variant=<key>`` (no query for the ``default`` variant; semantics §12,
Routing). The build writes the map of this module into ``404.html`` and a
redirect stub at every exact variant checkpoint path; the CLI uses
``find_recipe_id`` so a recipe id typed in another case is found too.

Pure logic over recipe ids and validated recipes: no file access.
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping

from composer.schema import Recipe

SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}\Z")
"""One path segment a route may have: the recipe file names' rule (loader.SAFE_NAME)."""
RESERVED = frozenset({"assets", "data", "api", "schema", "runtime", "404.html", "index.html",
                      "models.json", "strategies.json", "taxonomy.json", "strategies", "kv_store.json", "kv_store"})
"""Top-level names of the built site (the public site's API files among them,
``public_api.TOP_LEVEL``): never an org folder of a redirect stub."""


def _safe_id(model_id: str) -> bool:
    """``org/name`` of two safe segments (a local path or a deeper id is no page address)."""
    parts = model_id.split("/")
    return (len(parts) == 2 and all(SEGMENT.match(p) and ".." not in p for p in parts)
            and parts[0].lower() not in RESERVED and parts[1].lower() not in ("index.html", "404.html"))


def checkpoints(rid: str, recipe: Recipe) -> list[tuple[str, str | None]]:
    """``(checkpoint id, variant key or None)`` for every checkpoint ``recipe``
    serves under another id than its own ``rid``: a ``model.model_id`` that
    differs (no variant) and each variant's ``model_id`` (None for ``default``).
    Ids that are no ``org/name`` of safe segments are left out."""
    ours: dict[str, str | None] = {}
    if recipe.model.model_id and recipe.model.model_id != rid:
        ours[recipe.model.model_id] = None
    for key, var in recipe.variants.items():
        if var.model_id and var.model_id != rid:
            ours.setdefault(var.model_id, None if key == "default" else key)
    return [(mid, key) for mid, key in ours.items() if _safe_id(mid)]


def variant_routes(served: Mapping[str, Iterable[tuple[str, str | None]]]) -> dict[str, dict]:
    """``{checkpoint id: {"id": recipe id, "variant": key or None}}`` from
    ``{recipe id: checkpoints(rid, recipe)}``.

    A checkpoint id that is (in any case) itself a recipe id, or that two
    recipes claim, is left out: the address must lead to one page only."""
    ids_lower = {rid.lower() for rid in served}
    found: dict[str, dict] = {}
    claimed: dict[str, int] = {}
    for rid, pairs in served.items():
        for mid, key in pairs:
            if mid.lower() in ids_lower:
                continue
            claimed[mid.lower()] = claimed.get(mid.lower(), 0) + 1
            found[mid] = {"id": rid, "variant": key}
    return {mid: t for mid, t in sorted(found.items()) if claimed[mid.lower()] == 1}


def route_map(served: Mapping[str, Iterable[tuple[str, str | None]]]) -> dict[str, dict]:
    """What ``404.html`` looks a path up in: ``{lower-case path: target}`` from
    ``{recipe id: checkpoints(rid, recipe)}``.

    Paths are ``org/repo`` (a recipe: ``{"id"}``; a checkpoint id from
    ``variant_routes``: ``{"id", "variant"}``) and ``org`` (an organisation's
    list: ``{"org"}``), all without slashes around them. Two recipes whose ids
    differ only in case get no entry (which one was meant is unknowable)."""
    out: dict[str, dict] = {}
    seen: dict[str, int] = {}
    for rid in served:
        seen[rid.lower()] = seen.get(rid.lower(), 0) + 1
        out[rid.lower()] = {"id": rid}
    orgs: dict[str, set[str]] = {}
    for rid in served:
        orgs.setdefault(rid.split("/")[0].lower(), set()).add(rid.split("/")[0])
    for low, names in orgs.items():
        if len(names) == 1:
            out[low] = {"org": next(iter(names))}
    for mid, target in variant_routes(served).items():
        out.setdefault(mid.lower(), target)
    return {k: v for k, v in sorted(out.items()) if seen.get(k, 1) == 1}


def find_recipe_id(ids: Iterable[str], name: str) -> str | None:
    """The recipe id ``name`` means: itself if it is one, else the one id equal
    to it ignoring case; None when there is none or more than one."""
    ids = list(ids)
    if name in ids:
        return name
    hits = [rid for rid in ids if rid.lower() == name.lower()]
    return hits[0] if len(hits) == 1 else None


def public_api_ids(ids: Iterable[str]) -> list[str]:
    """The recipe ids that get the public site's API files (``/<id>.json`` and
    the ``/<id>/hw/…`` subtree beside the page ``/<id>/``): all but those
    whose organisation is a top-level name of the site (``RESERVED``) and those
    whose ``<id>.json`` would be the page folder of another recipe (a recipe
    named ``org/x.json`` next to ``org/x``), in any case."""
    ids = list(ids)
    folders = {rid.lower() for rid in ids}
    return [rid for rid in ids if rid.split("/")[0].lower() not in RESERVED
            and (rid + ".json").lower() not in folders]
