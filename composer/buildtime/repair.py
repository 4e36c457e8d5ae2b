"""Reading a stranger's recipe the way its author meant it, where that is certain.

The public corpus is real data written by others: its faults are warnings,
never a recipe left out (DEVELOPERS.md). Two faults of that corpus have exactly
one reading, and the public site shows that reading; refusing the whole recipe
for them left MiniMax-M3 and MiMo-V2.5-Pro out of the site (a fresh user's
finding, 2026-12-02):

* **An option and its value in one argv word** (``"--max-model-len auto"``,
  upstream-recipe-semantics.md §16 W4). The public site joins argv with spaces,
  so its text form works, but as argv it is one word, which vLLM's argparse
  reads as a positional argument (CPython ``Lib/argparse.py``
  ``_parse_optional``: "if it contains a space, it was meant to be a
  positional"). Read here as the words a shell would split it into
  (``shlex.split``), when the first of them is a flag and no quoting is
  involved.
* **A ``docker_image`` written as the command that pulls it**
  (``"docker pull vllm/vllm-openai-rocm:nightly"``): read as the image it
  names.

Anything else that does not fit its place (``--privileged`` as an image, an
option as a value, ``vllm/x:1; touch canary``) has no certain reading and
stays the recipe error ``composer.buildtime.validate.check_recipe_positions``
reports: guessing would run something its author did not write.

Each repair is a warning naming the file, the key path, what was written and
how it is read. With ``strict`` (recipes this project owns) nothing is
repaired: the checks report the value as the error it is.

Runs on the raw YAML mapping, before validation (``repair``), so the validated
recipe, the JSON the browser reads and every form see the same values.
"""

from __future__ import annotations

import copy
import re
import shlex
from typing import Any, Iterator

from composer.argv import is_flag_token
from composer.positions import check

ARG_KEYS = frozenset({"base_args", "extra_args", "vllm_args", "args"})
"""Recipe keys that hold an argv token list (``composer.layers`` patterns)."""
IMAGE_KEY = "docker_image"
_PULL = re.compile(r"^\s*docker\s+pull\s+(\S+)\s*\Z")
_QUOTING = re.compile(r"[\"'\\$`]")


def split_word(token: Any) -> tuple[str, ...] | None:
    """The words an argv token holding an option and its value stands for
    (``"--max-model-len auto"`` → ``("--max-model-len", "auto")``), or None
    when ``token`` is not such a word: not text, no blank (space or tab)
    inside, the first word not a flag, or quotes, backslashes, ``$``, line
    breaks or control characters that would make the reading a guess."""
    if not isinstance(token, str) or not token.startswith("-") or not any(ch in " \t" for ch in token.strip()):
        return None
    if _QUOTING.search(token) or any(not ch.isprintable() and ch != "\t" for ch in token):
        return None  # quoting, a line break or another control character: no certain reading
    words = tuple(shlex.split(token))
    if len(words) < 2 or not is_flag_token(words[0]) or "=" in words[0]:
        return None
    return words


def _value_of_previous(tokens: list, i: int) -> bool:
    """Whether argparse reads ``tokens[i]`` (a word with a blank) as the value
    of the option before it: a word with a blank is never an option string
    (``_parse_optional``), so an option that takes a value consumes it
    (``["--served-model-name", "--max-model-len auto"]`` names the model
    "--max-model-len auto"). Options are read from vLLM's table
    (``composer.vllm_cli``); an unknown one counts as taking a value (the
    reading is then not certain)."""
    from composer import vllm_cli

    prev = tokens[i - 1] if i > 0 else None
    if not isinstance(prev, str) or not is_flag_token(prev) or "=" in prev:
        return False
    name, sense = vllm_cli.canonical(prev)
    opt = vllm_cli.OPTIONS.get(name or "") or vllm_cli.OMNI_OPTIONS.get(name or "")
    return opt is None or (sense is None and opt["kind"] not in ("bool", "flag"))


def _starts_cleanly(words: tuple[str, ...]) -> bool:
    """Whether the split words are one option vLLM accepts with its value
    (``vllm_cli.check_unit`` finds no error): ``"--enforce-eager evil/model"``
    splits into a switch and a stray word, which is no repair."""
    from composer import vllm_cli
    from composer.argv import ArgvError, parse_tokens

    try:
        units = parse_tokens(list(words))
    except ArgvError:
        return False
    return all(not [f for f in vllm_cli.check_unit(u.key, u.value, u.enabled) if f.level == "error"] for u in units)


def pulled_image(value: Any) -> str | None:
    """The image of a ``docker pull IMAGE`` value when IMAGE is an image
    reference (``composer.positions`` ``image``), else None."""
    m = _PULL.match(value) if isinstance(value, str) else None
    return m.group(1) if m and check(m.group(1), "image") is None else None


def _walk(node: Any, path: str) -> Iterator[tuple[str, Any, Any, Any]]:
    """``(key path, parent, key, value)`` for every mapping entry and list item."""
    if isinstance(node, dict):
        for k, v in node.items():
            p = f"{path}.{k}" if path else str(k)
            yield p, node, k, v
            yield from _walk(v, p)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            p = f"{path}[{i}]"
            yield p, node, i, v
            yield from _walk(v, p)


def repair(data: dict, strict: bool = False) -> tuple[dict, list[tuple[str, str]]]:
    """``(data, [(key path, message)])``: the raw recipe mapping with the two
    certain readings above applied, and a warning for each. ``data`` itself
    is never changed (a copy is returned when anything is repaired); with
    ``strict`` it is returned as it is, with no warnings."""
    if strict or not isinstance(data, dict):
        return data, []
    out = copy.deepcopy(data)
    notes: list[tuple[str, str]] = []
    arg_lists, images = [], []
    for path, parent, key, value in _walk(out, ""):
        if isinstance(parent, dict) and key in ARG_KEYS and isinstance(value, list):
            arg_lists.append((path, value))
        elif isinstance(parent, dict) and key == IMAGE_KEY:
            images.append((path, parent, key, value))
    for path, tokens in arg_lists:
        i = 0
        while i < len(tokens):
            words = split_word(tokens[i])
            if words and (_value_of_previous(tokens, i) or not _starts_cleanly(words)):
                words = None  # another reading exists, or the words would not start: no repair
            if words:
                notes.append((f"{path}[{i}]", f"{tokens[i]!r} is one argv word with a blank in it, which vLLM's parser "
                                             f"would read as a positional argument (argparse), not as {words[0]}; "
                                             f"read as the words {' '.join(words)}"))
                tokens[i:i + 1] = list(words)
                i += len(words)
            else:
                i += 1
    for path, parent, key, value in images:
        _repair_image(path, parent, key, value, notes)
    return (out, notes) if notes else (data, [])


def _repair_image(path: str, parent: Any, key: Any, value: Any, notes: list[tuple[str, str]]) -> None:
    """Repair one ``docker_image`` value in place (a string, or a brand /
    CUDA map of strings, ``composer.schema.image_names``) when it is
    ``docker pull IMAGE``."""
    if isinstance(value, dict):
        for k in list(value):
            _repair_image(f"{path}.{k}", value, k, value[k], notes)
        return
    if not isinstance(value, str) or check(value, "image") is None:
        return
    image = pulled_image(value)
    if image:
        parent[key] = image
        notes.append((path, f"{value!r} is the command that pulls an image, not an image reference; read as {image}"))
