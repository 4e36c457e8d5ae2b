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
from composer.schema import CHOICE_ID, Catalog, Recipe
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
        """One line for a terminal: control characters of recipe text (a key
        named ``"\\x1b]0;pwned\\x07"`` retitled the terminal) are shown escaped."""
        tag = "warning: " if self.level == "warning" else ""
        return _printable(f"{self.file}: {self.key or '(top level)'}: {tag}{self.message}")


def _printable(text: str) -> str:
    """``text`` with every non-printable character as ``\\xNN`` / ``\\uNNNN``."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


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


MAX_DEPTH = 64
"""Deepest nesting of mappings and lists read (ours and the corpus's are under 10)."""


def _key_text(node) -> str:
    return str(node.value)[:60] if isinstance(node, yaml.ScalarNode) else "?"


def _children(node, path: str) -> list:
    """``(child node, its key path)`` of a mapping or sequence node (the keys
    of a mapping are scalars in any file we read; they are not entered)."""
    if isinstance(node, yaml.MappingNode):
        return [(v, f"{path}.{_key_text(k)}" if path else _key_text(k)) for k, v in node.value]
    if isinstance(node, yaml.SequenceNode):
        return [(v, f"{path}[{i}]") for i, v in enumerate(node.value)]
    return []


def _too_deep(root) -> str | None:
    """The key path of the first place a composed YAML graph nests deeper than
    ``MAX_DEPTH`` (iterative: a deep file cannot exhaust Python's stack), or None."""
    stack = [(root, "", 0)]
    seen: set[int] = set()
    while stack:
        node, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            return path if len(path) <= 80 else path[:77] + "…"
        if id(node) in seen:  # reached again through an alias (a cycle ends here)
            continue
        seen.add(id(node))
        stack.extend((c, p, depth + 1) for c, p in reversed(_children(node, path)))
    return None


def _expanded_size(node, limit: int, memo: dict[int, int] | None = None) -> int:
    """Nodes of a composed YAML graph counted as a tree (aliases expanded),
    memoised per node so the count itself stays linear; stops past ``limit``.
    Iterative (post-order): depth is never a problem here."""
    memo = {} if memo is None else memo
    stack = [(node, False)]
    while stack:
        n, done = stack.pop()
        if done:
            total = 1 + (len(n.value) if isinstance(n, yaml.MappingNode) else 0)  # the node and its keys
            for c, _ in _children(n, ""):
                total += memo.get(id(c), limit + 1)
                if total > limit:
                    break
            memo[id(n)] = min(total, limit + 1)
            continue
        if id(n) in memo:
            continue
        memo[id(n)] = limit + 1  # a cycle counts as too large
        stack.append((n, True))
        stack.extend((c, False) for c, _ in _children(n, "") if id(c) not in memo)
    return memo[id(node)]


def _alias_bombs(root, limit: int) -> list[str]:
    """Key paths where the graph expands past ``limit`` values: each top-level
    branch that is too large is followed down its first too-large child while
    that is a mapping reached only once, so the path ends at the key that holds
    the ``*alias`` (``model.base_args``). At most 8 paths."""
    counts: dict[int, int] = {}
    stack = [root]
    while stack:  # how often each node is reached: more than once = through an alias
        n = stack.pop()
        counts[id(n)] = counts.get(id(n), 0) + 1
        if counts[id(n)] == 1:
            stack.extend(c for c, _ in _children(n, ""))
    memo: dict[int, int] = {}
    out = []
    for child, path in _children(root, ""):
        if _expanded_size(child, limit, memo) <= limit:
            continue
        node = child
        while isinstance(node, yaml.MappingNode) and counts.get(id(node), 0) == 1:
            big = [(c, p) for c, p in _children(node, path) if _expanded_size(c, limit, memo) > limit]
            if not big:
                break
            node, path = big[0]
        out.append(path)
        if len(out) == 8:
            break
    return out or ["(top level)"]


def _read_yaml(path: Path, root: Path, errors: list[RecipeError], reasons: dict | None = None):
    """The YAML document of ``path`` (None, with ``errors``, when it cannot be
    read safely). With ``reasons``, also fills it with the document's comments
    by key path (``composer.buildtime.comments.comments_of``), read from the
    same composed node tree."""
    rel = str(path.relative_to(root))
    if path.is_symlink() or not path.is_file():
        errors.append(RecipeError(rel, "", "is not a regular file (a link, device or pipe is never read)"))
        return None
    if path.stat().st_size > MAX_FILE_BYTES:
        errors.append(RecipeError(rel, "", f"is {path.stat().st_size:,} bytes; recipe files are at most {MAX_FILE_BYTES:,}"))
        return None
    try:
        with path.open(encoding="utf-8") as fh:  # a stream: error marks name the file
            loader = _LOADER(fh)
            try:
                try:
                    node = loader.get_single_node()
                except RecursionError:
                    errors.append(RecipeError(rel, "", f"is nested too deeply (more than {MAX_DEPTH} levels)"))
                    return None
                if node is None:
                    return None
                deep = _too_deep(node)
                if deep is not None:
                    errors.append(RecipeError(rel, deep, f"is nested too deeply (more than {MAX_DEPTH} levels "
                                                         "of mappings and lists)"))
                    return None
                if _expanded_size(node, MAX_NODES) > MAX_NODES:
                    for where in _alias_bombs(node, MAX_NODES):
                        errors.append(RecipeError(rel, where, f"expands to more than {MAX_NODES:,} values through "
                                                              "YAML aliases (&anchor / *alias); write the values out"))
                    return None
                if reasons is not None:
                    from composer.buildtime.comments import comments_of

                    reasons.update(comments_of(node, path.read_text(encoding="utf-8").splitlines()))
                return loader.construct_document(node)
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


_UNION_TAG = re.compile(r"^(?:constrained-)?(?:int|str|float|bool|bytes)$|^[\w-]+\[.*\]$|^function-\w+\[")
"""A member tag pydantic puts in an error's location when a value may take
several forms (``tp: 8`` or ``tp: {h100: 8}`` gives ``…tp.constrained-int``
and ``…tp.dict[str,constrained-int].h100``): not a key the author wrote."""


def _union_cleaned(errors: list) -> list[dict]:
    """Pydantic's errors with union member tags taken out of their locations,
    and, of one union's errors, the member-level wrong-form ones
    (``int_type`` at ``tp`` when ``tp`` is a mapping) dropped where another
    member gave an error inside the value (``tp: {h100: 10**38}`` is "less
    than or equal" at ``tp.h100``, not also "should be a valid integer" at
    ``tp``). A part is a tag only where the errors of one location differ in
    it (each union member names itself there): a variant or hardware key that
    happens to be called ``int`` is the author's and stays (adversarial
    finding)."""
    locs = [tuple(err["loc"]) for err in errors]
    tags: set[tuple[tuple, int]] = set()
    for loc in locs:
        for i, part in enumerate(loc):
            if isinstance(part, str) and _UNION_TAG.match(part):
                seen = {other[i] for other in locs if len(other) > i and other[:i] == loc[:i]
                        and isinstance(other[i], str) and _UNION_TAG.match(other[i])}
                if len(seen) > 1:
                    tags.add((loc[:i], i))
    groups: dict[tuple, list[tuple[dict, bool]]] = {}
    for err, loc in zip(errors, locs):
        at = next((i for i in range(len(loc)) if (loc[:i], i) in tags), None)
        clean = {**err, "loc": tuple(p for i, p in enumerate(loc) if (loc[:i], i) not in tags)}
        member_level = at is not None and len(loc) == at + 1 and err["type"].endswith("_type")
        groups.setdefault(loc[:at] if at is not None else loc + ("#",), []).append((clean, member_level))
    out = []
    for group in groups.values():
        inside = [e for e, member_level in group if not member_level]
        out += inside or [group[0][0]]
    return out


def _validation_errors(exc: ValidationError, file: str) -> list[RecipeError]:
    out = []
    for err in _union_cleaned(exc.errors()):
        key = ".".join(str(p) for p in err["loc"])
        # Sequences are tuples in the types but lists in YAML: say what the author writes.
        msg = "Input should be a valid list" if err["type"] == "tuple_type" else err["msg"]
        msg = msg.removeprefix("Value error, ")  # our validators' own words need no pydantic prefix
        out.append(RecipeError(file, key, f"{msg} (got {_short_repr(err.get('input'))})"))
    return out


def catalog_validation_errors(exc: ValidationError, files: dict[str, str]) -> list[RecipeError]:
    """``_validation_errors`` of the catalogue, each named by the file it is
    in: ``strategies.<id>.…`` → that strategy's (or KV store's) file (``files``:
    id → path from ``load_catalog_data``) and the key path inside it,
    ``taxonomy.…`` → ``taxonomy.yaml``."""
    out = []
    for e in _validation_errors(exc, "taxonomy.yaml"):
        parts = e.key.split(".")
        if parts[0] == "strategies" and len(parts) > 1 and parts[1] in files:
            out.append(RecipeError(files[parts[1]], ".".join(parts[2:]), e.message, e.level))
        elif parts[0] == "taxonomy":
            out.append(RecipeError("taxonomy.yaml", ".".join(parts[1:]), e.message, e.level))
        else:
            out.append(e)
    return out


def load_catalog_data(root: Path, files: dict[str, str] | None = None) -> tuple[dict, list[RecipeError]]:
    """The raw catalogue dict ``{taxonomy, strategies}`` and the problems found:
    errors, and a warning (key ``kind``) for every strategy or KV-store file
    that declares no parallel kind (``composer.parallel.kind_warning``: the
    public corpus's files, whose kind is derived from their content).
    ``files``, when given, is filled with strategy id → file path (relative to
    ``root``), so later errors name the file (``catalog_validation_errors``)."""
    files = {} if files is None else files
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
                sid = data.get("name") or path.stem
                if not isinstance(sid, str):
                    why = "is not text"
                elif sid in strategies:
                    why = f"is also the id of {files.get(sid)}"
                elif not CHOICE_ID.match(sid):  # it names site files (strategies/<id>.json): "../x" wrote outside --out
                    why = ("must be letters, digits and _ . + - (at most 64, not starting with a punctuation mark): it "
                           "names files of the site and goes into links")
                else:
                    why = ""
                if why:
                    errors.append(RecipeError(str(path.relative_to(root)), "name", f"the strategy id {_short_repr(sid)} {why}"))
                    continue
                strategies[sid] = data
                files[sid] = str(path.relative_to(root))
                if data.get("kind") is None:
                    errors.append(RecipeError(str(path.relative_to(root)), "kind", kind_warning(data), "warning"))
    return {"taxonomy": taxonomy or {}, "strategies": strategies}, errors


def load_catalog(root: Path) -> Catalog:
    """The validated catalogue of ``root``; raises RecipeLoadError on errors
    (warnings are not reported here: ``composer.buildtime.checks.check_catalog``)."""
    files: dict[str, str] = {}
    data, problems = load_catalog_data(root, files)
    errors = [p for p in problems if p.level == "error"]
    if errors:
        raise RecipeLoadError(errors)
    try:
        return validate_catalog(data)
    except ValidationError as exc:
        raise RecipeLoadError(catalog_validation_errors(exc, files)) from None


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
    found: dict[str, str] = {}
    data = _read_yaml(path, root, errors, found)
    if errors:
        raise RecipeLoadError(errors)
    if not isinstance(data, dict):
        raise RecipeLoadError([RecipeError(str(path.relative_to(root)), "", f"must be a mapping of keys, not {type(data).__name__}")])
    said = data.get("reasons", {})
    if found and isinstance(said, dict):  # another type is the schema's error to report
        data = {**data, "reasons": {**found, **said}}  # the YAML comments, under what the recipe writes itself
    return data


def load_recipe(root: Path, recipe_id: str) -> Recipe:
    from composer.buildtime.repair import repair

    data, _ = repair(load_recipe_data(root, recipe_id))
    try:
        return validate_recipe(data)
    except ValidationError as exc:
        raise RecipeLoadError(_validation_errors(exc, f"models/{recipe_id}.yaml")) from None
