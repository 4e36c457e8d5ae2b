"""Reading a recipes directory from disk (YAML, via PyYAML). Not used in the browser.

A recipes directory holds ``taxonomy.yaml``, ``strategies/*.yaml``,
``kv_store/*.yaml`` (optional) and ``models/<org>/<repo>.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import ValidationError

from composer.schema import Catalog, Recipe


# libyaml's C parser when PyYAML was built with it (10× faster than the pure
# Python one); same safe semantics either way.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass
class RecipeError:
    """One problem in one file: ``file``, dotted key path ``key`` and ``message``."""

    file: str
    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.key or '(top level)'}: {self.message}"


class RecipeLoadError(Exception):
    """Raised with every ``RecipeError`` found; ``errors`` lists them all."""

    def __init__(self, errors: list[RecipeError]) -> None:
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))


def _read_yaml(path: Path, root: Path, errors: list[RecipeError]):
    try:
        with path.open(encoding="utf-8") as fh:
            return yaml.load(fh, Loader=_LOADER)
    except (OSError, yaml.YAMLError) as exc:
        errors.append(RecipeError(str(path.relative_to(root)), "", f"cannot be read as YAML: {exc}"))
        return None


def _validation_errors(exc: ValidationError, file: str) -> list[RecipeError]:
    out = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"])
        out.append(RecipeError(file, key, f"{err['msg']} (got {err.get('input')!r:.80})"))
    return out


def load_catalog_data(root: Path) -> tuple[dict, list[RecipeError]]:
    """The raw catalogue dict ``{taxonomy, strategies}`` and the errors found."""
    errors: list[RecipeError] = []
    taxonomy = _read_yaml(root / "taxonomy.yaml", root, errors) if (root / "taxonomy.yaml").exists() else None
    if taxonomy is None and not errors:
        errors.append(RecipeError("taxonomy.yaml", "", "is missing"))
    strategies = {}
    for sub in ("strategies", "kv_store"):
        for path in sorted((root / sub).glob("*.yaml")):
            data = _read_yaml(path, root, errors)
            if isinstance(data, dict):
                strategies[data.get("name") or path.stem] = data
    return {"taxonomy": taxonomy or {}, "strategies": strategies}, errors


def load_catalog(root: Path) -> Catalog:
    """The validated catalogue of ``root``; raises RecipeLoadError."""
    data, errors = load_catalog_data(root)
    if errors:
        raise RecipeLoadError(errors)
    try:
        return Catalog.model_validate(data)
    except ValidationError as exc:
        raise RecipeLoadError(_validation_errors(exc, "taxonomy.yaml / strategies")) from None


def recipe_paths(root: Path) -> dict[str, Path]:
    """``{recipe_id: path}`` for every ``models/<org>/<repo>.yaml``."""
    return {f"{p.parent.name}/{p.stem}": p for p in sorted((root / "models").glob("*/*.yaml"))}


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
        return Recipe.model_validate(data)
    except ValidationError as exc:
        raise RecipeLoadError(_validation_errors(exc, f"models/{recipe_id}.yaml")) from None
