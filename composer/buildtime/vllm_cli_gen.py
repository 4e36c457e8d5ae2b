"""Generate ``composer/data/vllm_cli.json``: vLLM's ``vllm serve`` CLI as data.

    python -m composer.buildtime.vllm_cli_gen            # the pinned version (VLLM_VERSION)
    python -m composer.buildtime.vllm_cli_gen --wheel PATH/vllm-X-….whl

The release wheels (``vllm`` and ``vllm-omni``, pinned below) are downloaded
with ``pip download <pkg>==<pin> --no-deps`` into ``.cache/vllm/`` and read **statically**: its Python sources are parsed
with ``ast``, nothing is imported (no torch, no GPU). What is read, and from where:

* every option of ``vllm serve`` and its spellings (aliases such as ``-tp``),
  from the ``add_argument`` calls of ``EngineArgs.add_cli_args``,
  ``AsyncEngineArgs.add_cli_args`` (``vllm/engine/arg_utils.py``) and
  ``make_arg_parser`` plus the ``FrontendArgs`` dataclass
  (``vllm/entrypoints/common/cli_args.py``);
* whether it takes a value, its type and choices, following vLLM's own
  ``_compute_kwargs`` rules on the config dataclass field behind it
  (``vllm/config/*.py``): ``bool`` → ``--x``/``--no-x``; ``Literal`` → choices;
  a config dataclass → JSON (also as dotted ``--x.field value``); its help text
  (the field's docstring) and whether the help says it is deprecated;
* the fields of every config dataclass (for JSON-valued options);
* the environment variables vLLM reads (``vllm/envs.py``), the tool-call and
  reasoning parser names and the KV connector names;
* the options vLLM-Omni adds to ``vllm serve --omni``
  (``vllm_omni/entrypoints/cli/serve.py``).

The P/D router (``vllm-router``) is a Rust binary and the LMCache server's
options are not declared in Python source we can read statically; their
commands are not checked.

Not used by the composer at run time: the composer reads the generated JSON
(``composer.vllm_cli``). Not shipped to the browser.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

VLLM_VERSION = "0.33.0"
"""The vLLM release commands are checked against (pinned; README says so)."""

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "composer" / "data" / "vllm_cli.json"
CACHE = ROOT / ".cache" / "vllm"
HELP_CHARS = 400


class Sources:
    """The Python files of a wheel, parsed on demand."""

    def __init__(self, wheel: Path) -> None:
        self.zip = zipfile.ZipFile(wheel)
        self.names = set(self.zip.namelist())

    def text(self, name: str) -> str:
        return self.zip.read(name).decode("utf-8")

    def tree(self, name: str) -> ast.Module:
        return ast.parse(self.text(name))


def _doc(body: list, i: int) -> str:
    """The attribute docstring: a string expression right after statement ``i``."""
    if i + 1 < len(body) and isinstance(body[i + 1], ast.Expr) and isinstance(getattr(body[i + 1], "value", None), ast.Constant) \
            and isinstance(body[i + 1].value.value, str):
        return body[i + 1].value.value
    return ""


def _says_deprecated(text: str) -> bool:
    """Help text that deprecates its own option ("… is deprecated", "will be
    removed"), not one that merely mentions deprecated things."""
    t = text.lower()
    return bool(re.search(r"\b(is|are|has been|will be) deprecated\b|\bdeprecated[:.,]|will be removed|has been replaced by", t))


def _short_help(text: str) -> str:
    text = re.sub(r"\s+", " ", text.split("\n\n")[0]).strip()
    return text if len(text) <= HELP_CHARS else text[:HELP_CHARS - 1].rsplit(" ", 1)[0] + "…"


def collect_classes(src: Sources, files: list[str]) -> dict[str, dict]:
    """``{class name: {"bases": [...], "fields": {name: (annotation AST, doc)}}}``."""
    out = {}
    for name in files:
        for node in src.tree(name).body:
            if not isinstance(node, ast.ClassDef):
                continue
            fields = {}
            for i, stmt in enumerate(node.body):
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    ann = ast.unparse(stmt.annotation)
                    if ann.startswith("ClassVar"):
                        continue
                    fields[stmt.target.id] = (stmt.annotation, _doc(node.body, i))
            out[node.name] = {"bases": [ast.unparse(b) for b in node.bases], "fields": fields}
    return out


def collect_aliases(src: Sources, files: list[str]) -> dict[str, ast.AST]:
    """Module-level type aliases (``CacheDType = Literal[...]``) by name."""
    out: dict[str, ast.AST] = {}
    for name in files:
        for node in src.tree(name).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                out.setdefault(node.targets[0].id, node.value)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None \
                    and "TypeAlias" in ast.unparse(node.annotation):
                out.setdefault(node.target.id, node.value)
            elif type(node).__name__ == "TypeAlias":  # `type X = ...` (3.12)
                out.setdefault(node.name.id, node.value)  # type: ignore[attr-defined]  # ast.TypeAlias is 3.12+
    return out


class Types:
    """vLLM's ``_compute_kwargs`` rules, applied to annotation ASTs."""

    def __init__(self, classes: dict, aliases: dict) -> None:
        self.classes, self.aliases = classes, aliases

    def members(self, ann: ast.AST, depth: int = 0) -> list:
        """Flatten unions and aliases into ``[(kind name, detail)]``."""
        if depth > 12:
            return []
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            try:
                return self.members(ast.parse(ann.value, mode="eval").body, depth + 1)
            except SyntaxError:
                return [("str", None)]
        if isinstance(ann, ast.Constant) and ann.value is None:
            return [("None", None)]
        if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
            return self.members(ann.left, depth + 1) + self.members(ann.right, depth + 1)
        if isinstance(ann, ast.Subscript):
            head = ast.unparse(ann.value).split(".")[-1]
            inner = ann.slice
            if head in ("Optional",):
                return self.members(inner, depth + 1) + [("None", None)]
            if head == "Union":
                elts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
                return [m for e in elts for m in self.members(e, depth + 1)]
            if head == "Annotated":
                return self.members(inner.elts[0] if isinstance(inner, ast.Tuple) else inner, depth + 1)
            if head == "Literal":
                elts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
                values = []
                for e in elts:
                    if isinstance(e, ast.Constant):
                        values.append(e.value)
                    else:  # Literal of an alias
                        values += [v for k, v in self.members(e, depth + 1) if k == "literal" for v in v]
                return [("literal", values)]
            if head in ("list", "List", "tuple", "Tuple", "set", "Set", "Sequence"):
                return [("list", None)]
            if head in ("dict", "Dict", "Mapping"):
                return [("dict", None)]
            return self.members(ann.value, depth + 1)
        name = ast.unparse(ann).split(".")[-1]
        if name in ("bool", "int", "float", "str"):
            return [(name, None)]
        if name == "None" or name == "NoneType":
            return [("None", None)]
        if name in ("dict", "Dict"):
            return [("dict", None)]
        if name in ("list", "tuple", "set"):
            return [("list", None)]
        if any(b.split("[")[0] in ("dict", "Dict") for b in self.classes.get(name, {}).get("bases", [])):
            return [("dict", None)]  # vLLM: "Subclasses of dict (e.g. MultiModalDummyOptions) are CLI dicts"
        if name in self.classes and self.is_config(name):
            return [("config", name)]
        if name in self.aliases:
            return self.members(self.aliases[name], depth + 1)
        return [("other", name)]

    def is_config(self, name: str) -> bool:
        """A dataclass-like config class (has annotated fields)."""
        return bool(self.classes.get(name, {}).get("fields"))

    def kind(self, ann: ast.AST) -> dict:
        """``{"kind": ..., "choices"?, "config"?}`` as vLLM's argparse sees the field."""
        ms = self.members(ann)
        kinds = {k for k, _ in ms}
        config = next((d for k, d in ms if k == "config"), None)
        if config:
            return {"kind": "json", "config": config}
        if kinds - {"None"} == {"bool", "str"}:
            return {"kind": "optional_value"}
        if "bool" in kinds:
            return {"kind": "bool"}
        if "literal" in kinds:
            values = [v for k, d in ms if k == "literal" for v in d]
            return {"kind": "choice", "choices": [str(v) for v in values]}
        if "list" in kinds:
            return {"kind": "list"}
        if "int" in kinds:
            return {"kind": "int"}
        if "float" in kinds:
            return {"kind": "float"}
        if "dict" in kinds:
            return {"kind": "json" if "str" not in kinds and "other" not in kinds else "json_or_str"}
        return {"kind": "str"}

    def fields(self, cls: str, seen: tuple = ()) -> dict:
        """A class's fields including inherited ones (bases first)."""
        info = self.classes.get(cls)
        if info is None or cls in seen:
            return {}
        out = {}
        for base in info["bases"]:
            out.update(self.fields(base.split(".")[-1], seen + (cls,)))
        out.update(info["fields"])
        return out


def _kwargs_source(node: ast.Call, kwargs_vars: dict[str, str], local_dicts: dict[str, tuple]) -> tuple[str | None, str | None, dict]:
    """``(config class, field, explicit keywords)`` of one ``add_argument`` call."""
    cls = field = None
    explicit: dict[object, ast.expr] = {}
    for kw in node.keywords:
        if kw.arg is not None:
            explicit[kw.arg] = kw.value
            continue
        v = kw.value
        if isinstance(v, ast.Dict):  # **{**x_kwargs["f"], "default": None, ...}
            for k, val in zip(v.keys, v.values):
                if k is None:
                    v = val
                elif isinstance(k, ast.Constant):
                    explicit[k.value] = val
        if isinstance(v, ast.Name) and v.id in local_dicts:
            cls, field = local_dicts[v.id]
        elif isinstance(v, ast.Subscript) and isinstance(v.value, ast.Name) and v.value.id in kwargs_vars \
                and isinstance(v.slice, ast.Constant):
            cls, field = kwargs_vars[v.value.id], v.slice.value
    return cls, field, explicit


def serve_flags(src: Sources, types: Types, constants: dict[str, str],
                where=(("vllm/engine/arg_utils.py", ("add_cli_args",)), ("vllm/entrypoints/common/cli_args.py", ("make_arg_parser",))),
                frontend: bool = True) -> dict[str, dict]:
    """Every option registered by the ``add_argument`` calls of the functions
    ``where`` names (file, function names): canonical name (without dashes) →
    its entry. With ``frontend``, the ``FrontendArgs`` fields too (``vllm serve``)."""
    flags: dict[str, dict] = {}

    def add(spellings: list[str], entry: dict) -> None:
        longs = [s for s in spellings if s.startswith("--")]
        if not longs:
            return
        name = longs[0][2:]
        entry["spellings"] = spellings
        flags[name] = entry

    for file, funcs in where:
        tree = src.tree(file)
        for fn in ast.walk(tree):
            if not (isinstance(fn, ast.FunctionDef) and fn.name in funcs):
                continue
            kwargs_vars: dict[str, str] = {}
            local_dicts: dict[str, tuple] = {}
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    v = node.value
                    if isinstance(v, ast.Call) and ast.unparse(v.func).endswith("get_kwargs") and v.args:
                        kwargs_vars[node.targets[0].id] = ast.unparse(v.args[0]).split(".")[-1]
                    elif isinstance(v, ast.Subscript) and isinstance(v.value, ast.Name) and isinstance(v.slice, ast.Constant):
                        local_dicts[node.targets[0].id] = (v.value.id, v.slice.value)
            local_dicts = {k: (kwargs_vars.get(var), f) for k, (var, f) in local_dicts.items()}
            for node in ast.walk(fn):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"):
                    continue
                spellings = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                if not spellings or not spellings[0].startswith("-"):
                    continue  # the positional model_tag
                cls, field, explicit = _kwargs_source(node, kwargs_vars, local_dicts)
                entry: dict = {"group": cls or "serve"}
                doc = ""
                if cls and field:
                    ann, doc = types.fields(cls).get(field, (None, ""))
                    entry.update(types.kind(ann) if ann is not None else {"kind": "str"})
                else:
                    entry["kind"] = "str"
                action = ast.unparse(explicit["action"]) if "action" in explicit else ""
                if action.strip("'\"") in ("store_true", "store_false") or action.endswith(("store_true", "store_false")):
                    entry = {**entry, "kind": "flag"}
                elif action.endswith("BooleanOptionalAction"):
                    entry = {**entry, "kind": "bool"}
                if "type" in explicit and entry["kind"] in ("str", "flag") and not action:
                    t = ast.unparse(explicit["type"])
                    entry["kind"] = {"int": "int", "float": "float"}.get(t, "str")
                if "choices" in explicit and isinstance(explicit["choices"], (ast.List, ast.Tuple)):
                    entry.update(kind="choice", choices=[str(e.value) for e in explicit["choices"].elts if isinstance(e, ast.Constant)])
                help_node = explicit.get("help")
                help_text = doc
                if isinstance(help_node, ast.Constant) and isinstance(help_node.value, str):
                    help_text = help_node.value
                elif isinstance(help_node, ast.Name) and help_node.id in constants:
                    help_text = constants[help_node.id]
                elif isinstance(help_node, ast.JoinedStr) or isinstance(help_node, ast.BinOp):
                    help_text = "".join(c.value for c in ast.walk(help_node) if isinstance(c, ast.Constant) and isinstance(c.value, str))
                entry["help"] = _short_help(help_text)
                entry["deprecated"] = _says_deprecated(help_text) or "deprecated" in explicit
                add(spellings, entry)
    # FrontendArgs: every field is --field-name (cli_args.add_cli_args).
    for field, (ann, doc) in (types.fields("FrontendArgs").items() if frontend else ()):
        entry = {"group": "FrontendArgs", **types.kind(ann), "help": _short_help(doc),
                 "deprecated": _says_deprecated(doc)}
        add(["--" + field.replace("_", "-")], entry)
    return dict(sorted(flags.items()))


def config_fields(types: Types) -> dict[str, dict]:
    """Fields of every config class a JSON option uses, recursively."""
    out: dict[str, dict] = {}
    todo = [c for c in types.classes if types.is_config(c) and c.endswith("Config")]
    while todo:
        cls = todo.pop()
        if cls in out:
            continue
        fields = {}
        for name, (ann, _doc) in types.fields(cls).items():
            k = types.kind(ann)
            fields[name] = {key: v for key, v in k.items()}
            if k.get("config") and k["config"] not in out:
                todo.append(k["config"])
        out[cls] = dict(sorted(fields.items()))
    return dict(sorted(out.items()))


def env_vars(src: Sources) -> list[str]:
    """Keys of ``environment_variables`` in ``vllm/envs.py``."""
    for node in src.tree("vllm/envs.py").body:
        target = node.target if isinstance(node, ast.AnnAssign) else (node.targets[0] if isinstance(node, ast.Assign) else None)
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(target, ast.Name) and target.id == "environment_variables" \
                and isinstance(node.value, ast.Dict):
            return sorted(k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
    raise SystemExit("vllm/envs.py: environment_variables not found")


def registry_keys(src: Sources, file: str, var: str) -> list[str]:
    """String keys of a module-level dict ``var`` (the parser registries)."""
    if file not in src.names:
        return []
    for node in src.tree(file).body:
        target = node.target if isinstance(node, ast.AnnAssign) else (node.targets[0] if isinstance(node, ast.Assign) else None)
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(target, ast.Name) and target.id == var \
                and isinstance(node.value, ast.Dict):
            return sorted(k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
    return []


def kv_connectors(src: Sources) -> list[str]:
    text = src.text("vllm/distributed/kv_transfer/kv_connector/factory.py")
    return sorted(set(re.findall(r'register_connector\(\s*"([A-Za-z0-9_]+)"', text)))


def module_constants(src: Sources, file: str) -> dict[str, str]:
    out = {}
    for node in src.tree(file).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            v = node.value
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                out[node.targets[0].id] = v.value
            elif isinstance(v, (ast.JoinedStr, ast.BinOp)):
                out[node.targets[0].id] = "".join(c.value for c in ast.walk(v) if isinstance(c, ast.Constant) and isinstance(c.value, str))
    return out


def generate(wheel: Path, version: str) -> dict:
    """The table for one wheel (see the module docstring)."""
    src = Sources(wheel)
    config_files = sorted(n for n in src.names if n.startswith("vllm/config/") and n.endswith(".py"))
    files = config_files + ["vllm/engine/arg_utils.py", "vllm/entrypoints/common/cli_args.py"]
    types = Types(collect_classes(src, files), collect_aliases(src, files))
    constants = module_constants(src, "vllm/engine/arg_utils.py")
    return {
        "source": {"package": "vllm", "version": version, "wheel": wheel.name,
                   "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()},
        "regenerate": f"python -m composer.buildtime.vllm_cli_gen --version {version}",
        "serve": serve_flags(src, types, constants),
        "configs": config_fields(types),
        "env": env_vars(src),
        "tool_parsers": registry_keys(src, "vllm/tool_parsers/__init__.py", "_TOOL_PARSERS_TO_REGISTER"),
        "reasoning_parsers": registry_keys(src, "vllm/reasoning/__init__.py", "_REASONING_PARSERS_TO_REGISTER"),
        "kv_connectors": kv_connectors(src),
    }


OMNI_VERSION = "0.30.0"
"""The vLLM-Omni release whose ``vllm serve --omni`` additions are checked."""


def omni_flags(wheel: Path, version: str) -> dict:
    """The options vLLM-Omni adds to ``vllm serve`` (``subparser_init`` of
    ``vllm_omni/entrypoints/cli/serve.py``)."""
    src = Sources(wheel)
    flags = serve_flags(src, Types({}, {}), {}, where=(("vllm_omni/entrypoints/cli/serve.py", ("subparser_init",)),),
                        frontend=False)
    return {"source": {"package": "vllm-omni", "version": version, "wheel": wheel.name,
                       "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()}, "serve": flags}


def fetch(package: str, version: str) -> Path:
    """A wheel of ``package==version`` from PyPI (``pip download``), cached."""
    CACHE.mkdir(parents=True, exist_ok=True)
    stem = package.replace("-", "_")
    found = sorted(CACHE.glob(f"{stem}-{version}-*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", f"{package}=={version}", "--no-deps", "--only-binary=:all:",
                        "-d", str(CACHE), "--quiet"], check=True)
        found = sorted(CACHE.glob(f"{stem}-{version}-*.whl"))
    if not found:
        raise SystemExit(f"no wheel of {package} {version} in {CACHE}")
    return found[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m composer.buildtime.vllm_cli_gen", description=__doc__.splitlines()[0])
    ap.add_argument("--version", default=VLLM_VERSION, help=f"vLLM release (default: the pin, {VLLM_VERSION})")
    ap.add_argument("--wheel", type=Path, help="a downloaded wheel instead of pip download")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    wheel = args.wheel or fetch("vllm", args.version)
    table = generate(wheel, args.version)
    table["omni"] = omni_flags(fetch("vllm-omni", OMNI_VERSION), OMNI_VERSION)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(table, indent=1, sort_keys=False) + "\n")
    print(f"{args.out}: {len(table['serve'])} options, {len(table['configs'])} configs, {len(table['env'])} env vars "
          f"from {wheel.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
