"""Reading a recipes directory from disk (YAML, via PyYAML). Not used in the browser.

A recipes directory holds ``taxonomy.yaml``, ``strategies/*.yaml``,
``kv_store/*.yaml`` (optional) and ``models/<org>/<repo>.yaml``.
"""

from __future__ import annotations

import re
import reprlib
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import ValidationError

from composer.parallel import kind_warning
from composer.schema import Catalog, Recipe
from composer.buildtime.validate import validate_catalog, validate_recipe


class _UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """PyYAML's safe loader (libyaml's C parser when available: 10× faster) that
    rejects a key given twice in one mapping (plain PyYAML keeps the last one
    silently)."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                continue
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping", node.start_mark,
                    f"found the key {key!r} twice (first on line {seen[key] + 1})", key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep)


_LOADER = _UniqueKeyLoader


@dataclass
class RecipeError:
    """One problem in one file: ``file``, dotted key path ``key``, ``message``
    and ``level`` (``error``: the recipe is refused; ``warning``: it builds)."""

    file: str
    key: str
    message: str
    level: str = "error"

    def __str__(self) -> str:
        tag = "warning: " if self.level == "warning" else ""
        return f"{self.file}: {self.key or '(top level)'}: {tag}{self.message}"


class RecipeLoadError(Exception):
    """Raised with every ``RecipeError`` found; ``errors`` lists them all."""

    def __init__(self, errors: list[RecipeError]) -> None:
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))


MAX_FILE_BYTES = 1024 * 1024
"""Largest recipe, taxonomy or strategy file read (1 MiB; ours are < 20 KiB)."""
MAX_NODES = 100_000
"""Largest YAML document, in nodes after aliases are expanded (a few hundred
bytes of nested ``&a``/``*a`` references can stand for billions of nodes)."""


def _expanded_size(node, limit: int) -> int:
    """Nodes of a composed YAML graph counted as a tree (aliases expanded),
    memoised per node so the count itself stays linear; stops past ``limit``."""
    memo: dict[int, int] = {}

    def size(n) -> int:
        key = id(n)
        if key in memo:
            return memo[key]
        memo[key] = limit + 1  # a cycle counts as too large
        total = 1
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                total += size(k) + size(v)
                if total > limit:
                    break
        elif isinstance(n, yaml.SequenceNode):
            for v in n.value:
                total += size(v)
                if total > limit:
                    break
        memo[key] = min(total, limit + 1)
        return memo[key]

    return size(node)


def _read_yaml(path: Path, root: Path, errors: list[RecipeError]):
    rel = str(path.relative_to(root))
    if path.is_symlink() or not path.is_file():
        errors.append(RecipeError(rel, "", "is not a regular file (a link, device or pipe is never read)"))
        return None
    if path.stat().st_size > MAX_FILE_BYTES:
        errors.append(RecipeError(rel, "", f"is {path.stat().st_size:,} bytes; recipe files are at most {MAX_FILE_BYTES:,}"))
        return None
    try:
        with path.open(encoding="utf-8") as fh:
            loader = _LOADER(fh)
            try:
                node = loader.get_single_node()
                try:
                    too_big = node is not None and _expanded_size(node, MAX_NODES) > MAX_NODES
                except RecursionError:
                    errors.append(RecipeError(rel, "", "is nested too deeply (hundreds of levels)"))
                    return None
                if too_big:
                    errors.append(RecipeError(rel, "", f"expands to more than {MAX_NODES:,} values through YAML "
                                                      "aliases (&anchor / *alias); write the values out"))
                    return None
                return loader.construct_document(node) if node is not None else None
            finally:
                loader.dispose()
    except (OSError, yaml.YAMLError) as exc:
        errors.append(RecipeError(str(path.relative_to(root)), "", f"cannot be read as YAML: {exc}"))
        return None
    except UnicodeDecodeError as exc:
        errors.append(RecipeError(str(path.relative_to(root)), "", f"is not UTF-8 text ({exc.reason} at byte {exc.start})"))
        return None


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 60
_REPR.maxlevel, _REPR.maxdict, _REPR.maxlist = 2, 3, 3


def _short_repr(value) -> str:
    """A bounded repr: never walks more than a few items of a large value."""
    return _REPR.repr(value)


def _validation_errors(exc: ValidationError, file: str) -> list[RecipeError]:
    out = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"])
        # Sequences are tuples in the types but lists in YAML: say what the author writes.
        msg = "Input should be a valid list" if err["type"] == "tuple_type" else err["msg"]
        out.append(RecipeError(file, key, f"{msg} (got {_short_repr(err.get('input'))})"))
    return out


def load_catalog_data(root: Path) -> tuple[dict, list[RecipeError]]:
    """The raw catalogue dict ``{taxonomy, strategies}`` and the problems found:
    errors, and a warning (key ``kind``) for every strategy or KV-store file
    that declares no parallel kind (``composer.parallel.kind_warning``: the
    public corpus's files, whose kind is derived from their content)."""
    errors: list[RecipeError] = []
    taxonomy = _read_yaml(root / "taxonomy.yaml", root, errors) if (root / "taxonomy.yaml").exists() else None
    if taxonomy is None and not errors:
        errors.append(RecipeError("taxonomy.yaml", "", "is missing"))
    strategies = {}
    for sub in ("strategies", "kv_store"):
        if (root / sub).is_symlink():
            errors.append(RecipeError(f"{sub}/", "", "is a linked folder, which is never read"))
            continue
        for path in sorted((root / sub).glob("*.yaml")):
            data = _read_yaml(path, root, errors)
            if isinstance(data, dict):
                strategies[data.get("name") or path.stem] = data
                if data.get("kind") is None:
                    errors.append(RecipeError(str(path.relative_to(root)), "kind", kind_warning(data), "warning"))
    return {"taxonomy": taxonomy or {}, "strategies": strategies}, errors


def load_catalog(root: Path) -> Catalog:
    """The validated catalogue of ``root``; raises RecipeLoadError on errors
    (warnings are not reported here: ``composer.buildtime.checks.check_catalog``)."""
    data, problems = load_catalog_data(root)
    errors = [p for p in problems if p.level == "error"]
    if errors:
        raise RecipeLoadError(errors)
    try:
        return validate_catalog(data)
    except ValidationError as exc:
        raise RecipeLoadError(_validation_errors(exc, "taxonomy.yaml / strategies")) from None


SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}\Z")
"""An org or repo name as Hugging Face allows it (letters, digits, ``-``, ``_``,
``.``; at most 96): recipe ids become URLs, file names and page links."""


def recipe_paths(root: Path) -> dict[str, Path]:
    """``{recipe_id: path}`` for every ``models/<org>/<repo>.yaml`` whose org and
    repo are safe names (``unsafe_recipe_files`` lists the others)."""
    return {f"{p.parent.name}/{p.stem}": p for p in sorted((root / "models").glob("*/*.yaml")) if _safe_path(p)}


def _safe_path(p: Path) -> bool:
    """A recipe file with a safe org/repo name, in a real folder of ``models/``
    (a linked folder could lead anywhere on the machine)."""
    return (SAFE_NAME.match(p.parent.name) is not None and SAFE_NAME.match(p.stem) is not None and ".." not in p.stem
            and not p.parent.is_symlink())


def unsafe_recipe_files(root: Path) -> list[RecipeError]:
    """An error for every recipe file whose org or repo is not a safe name."""
    out = []
    for p in sorted((root / "models").glob("*/*.yaml")):
        if not _safe_path(p):
            shown = repr(f"{p.parent.name}/{p.stem}")[:80]
            why = ("is in a linked folder, which is never read" if p.parent.is_symlink() else
                   "has a recipe id (org/repo from the file path) that is not letters, digits, '-', '_' and '.' as on Hugging Face")
            out.append(RecipeError(f"models/{shown}", "", f"{why}; the file is not built"))
    return out


def load_recipe_data(root: Path, recipe_id: str, path: Path | None = None) -> dict:
    """The raw YAML mapping of one recipe (``path`` saves the directory scan);
    raises RecipeLoadError naming the file."""
    errors: list[RecipeError] = []
    path = path or recipe_paths(root).get(recipe_id)
    if path is None:
        raise RecipeLoadError([RecipeError(f"models/{recipe_id}.yaml", "", "no such recipe")])
    data = _read_yaml(path, root, errors)
    if errors:
        raise RecipeLoadError(errors)
    if not isinstance(data, dict):
        raise RecipeLoadError([RecipeError(str(path.relative_to(root)), "", f"must be a mapping of keys, not {type(data).__name__}")])
    return data


def load_recipe(root: Path, recipe_id: str) -> Recipe:
    data = load_recipe_data(root, recipe_id)
    try:
        return validate_recipe(data)
    except ValidationError as exc:
        raise RecipeLoadError(_validation_errors(exc, f"models/{recipe_id}.yaml")) from None
