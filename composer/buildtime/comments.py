"""The reasons a recipe gives in its YAML comments, by key path.

Recipe authors explain their choices in comments ("# DSpark does not compose
with pipeline parallelism yet (vllm-project/vllm#50098) …" above a strategy
override, "# REQUIRED on ROCm: …" after an env var). YAML parsers drop them,
so Explain could say who set a value but never why (issue 21). ``comments``
reads them back from the text, next to the keys they belong to:

* the comment lines right above a mapping key (no blank line between) and a
  comment at the end of the key's own line belong to that key's path
  (``strategy_overrides.multi_node_tp_pp``,
  ``variants.default.hardware_overrides.mi355x.extra_env.VLLM_X``);
* inside an argv list, the comment lines above an item and at the end of its
  line belong to the flag the item starts (``…extra_args#--moe-backend``), or,
  for a value item, to the flag before it.

Composing reads them through the recipe's ``reasons`` (``composer.schema``;
an entry the recipe writes there itself wins), and Explain shows the nearest
one for each value (``composer.context.RecipeContext.reason``). Build time
only: the browser gets them inside the recipe's JSON.
"""

from __future__ import annotations

import yaml

MAX_REASON = 600
"""Characters kept of one key's comment (longer text is cut with "…")."""


def _comment_above(lines: list[str], line: int) -> list[str]:
    """The comment lines directly above 0-based ``line`` (stopping at a blank
    or non-comment line), in order, without their ``#``."""
    out: list[str] = []
    i = line - 1
    while i >= 0 and lines[i].strip().startswith("#"):
        out.append(lines[i].strip().lstrip("#").strip())
        i -= 1
    return out[::-1]


def _comment_after(lines: list[str], line: int, column: int) -> str:
    """A ``# …`` comment after ``column`` on 0-based ``line`` (the text after a
    value node's end, or after a key and its ``:`` when the value is a block
    below), or ""."""
    if line >= len(lines):
        return ""
    rest = lines[line][column:]
    if rest.startswith(":"):
        rest = rest[1:]
    stripped = rest.lstrip()
    return stripped[1:].strip() if stripped.startswith("#") and (not rest or rest[0] in " \t") else ""


def _text(parts: list[str]) -> str:
    text = " ".join(p for p in parts if p)
    return text if len(text) <= MAX_REASON else text[:MAX_REASON - 1] + "…"


def comments(text: str) -> dict[str, str]:
    """``{key path: comment text}`` of a recipe's YAML ``text`` (the rules of
    the module docstring); {} for text that is not a YAML mapping. Never
    raises for any text (the loader reports what it cannot read)."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError, ValueError):
        return {}
    return comments_of(root, text.splitlines())


def comments_of(root: yaml.Node | None, lines: list[str]) -> dict[str, str]:
    """``comments`` of an already composed node tree ``root`` and the text's
    ``lines`` (the loader's own tree: the file is parsed once)."""
    if not isinstance(root, yaml.MappingNode):
        return {}
    found: dict[str, str] = {}

    def add(path: str, parts: list[str]) -> None:
        said = _text(parts)
        if said:
            found[path] = f"{found[path]} {said}" if path in found else said

    def walk(node: yaml.Node, path: str, depth: int) -> None:
        if depth > 32:
            return
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if not isinstance(key, yaml.ScalarNode):
                    continue
                sub = f"{path}.{key.value}" if path else str(key.value)
                inline = isinstance(value, yaml.ScalarNode) or getattr(value, "flow_style", False)
                end = value if inline else key  # a block value starts below: the comment follows the key
                add(sub, _comment_above(lines, key.start_mark.line)
                    + [_comment_after(lines, end.end_mark.line, end.end_mark.column)])
                walk(value, sub, depth + 1)
        elif isinstance(node, yaml.SequenceNode):
            flag = None
            for i, item in enumerate(node.value):
                if not isinstance(item, yaml.ScalarNode):
                    walk(item, f"{path}[{i}]", depth + 1)  # advanced_options[0].args, as the layers name it
                    continue
                token = str(item.value)
                if token.startswith("-") and not token[1:2].isdigit():
                    flag = token.split("=", 1)[0]
                said = _comment_above(lines, item.start_mark.line) + [
                    _comment_after(lines, item.end_mark.line, item.end_mark.column)]
                add(f"{path}#{flag}" if flag else path, said)

    walk(root, "", 0)
    return found
