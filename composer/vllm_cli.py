"""vLLM's ``vllm serve`` CLI as data, and the checks made against it.

The table (``composer/data/vllm_cli.json``) is generated from the pinned vLLM
release wheel by ``python -m composer.buildtime.vllm_cli_gen`` (see there for what is read
from which file). This module answers, as vLLM's own parser would:

* which option a spelling means (``-tp``, ``--max_num_seqs``, ``--no-enable-x``,
  dotted ``--attention-config.backend`` / ``-cc.pass_config.x``), or that vLLM
  does not accept it (``canonical``);
* whether one option with its value would be refused at startup (``check_unit``):
  unknown option, a value missing or given to a boolean, a value outside the
  choices or of the wrong type, JSON that does not parse or holds unknown
  fields or wrong types for that config (a boolean written as ``"false"``),
  a value carrying shell quotes of its own or another flag inside it;
* whether an environment variable named ``VLLM_*`` is one vLLM knows.

Pure and file-free at call time (the JSON is read once, at import), so it runs
in the browser too.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Optional

from composer.cache import MODULE_BOUNDS

# importlib.resources reads it from a directory or a zip (the browser's package).
TABLE: dict = json.loads(resources.files("composer").joinpath("data", "vllm_cli.json").read_text(encoding="utf-8"))
VERSION: str = TABLE["source"]["version"]
"""The vLLM release the commands are checked against (``vllm_cli_gen.VLLM_VERSION``)."""
OPTIONS: dict[str, dict] = TABLE["serve"]
CONFIGS: dict[str, dict] = TABLE["configs"]
ENV: frozenset[str] = frozenset(TABLE["env"])
SHORT: dict[str, str] = {s[1:]: name for name, o in OPTIONS.items() for s in o["spellings"] if not s.startswith("--")}
"""Short aliases (``tp`` → ``tensor-parallel-size``) exactly as vLLM registers them."""
LONG: dict[str, str] = {s[2:]: name for name, o in OPTIONS.items() for s in o["spellings"] if s.startswith("--")}
"""Every long spelling, including second names (``device-memory-utilization``)."""
OMNI: dict = TABLE.get("omni", {"source": {}, "serve": {}})
OMNI_OPTIONS: dict[str, dict] = {k: v for k, v in OMNI["serve"].items() if k not in OPTIONS}
"""Options vLLM-Omni adds to ``vllm serve --omni`` (valid only with ``--omni``)."""
for _name, _o in OMNI_OPTIONS.items():
    for _s in _o["spellings"]:
        if _s.startswith("--"):
            LONG.setdefault(_s[2:], _name)
        else:
            SHORT.setdefault(_s[1:], _name)
LONG["optimization-level"] = "optimization-level"
SHORT.setdefault("O", "optimization-level")  # vLLM's parser turns -O3 / -O 3 into --optimization-level 3

VALUE_KINDS = frozenset({"int", "float", "str", "choice", "json", "json_or_str", "list"})
BOOLEAN_KINDS = frozenset({"bool", "flag"})
HUMAN_INT_OPTIONS = frozenset({"max-model-len", "max-num-batched-tokens", "max-num-scheduled-tokens",
                               "kv-cache-memory-bytes", "safetensors-prefetch-block-size", "max-num-queued-tokens"})
"""Options vLLM parses with ``human_readable_int`` (vllm/engine/arg_utils.py)."""


def human_int(value: str) -> Optional[int]:
    """vLLM's ``human_readable_int``: ``1k`` = 1000, ``1K`` = 1024, ``25.6k`` =
    25600 (decimals only with decimal suffixes), or a plain integer; None if
    it is neither."""
    value = value.strip()
    if value.isdecimal():  # the common case, without the patterns (str.isdecimal is regex's \d+)
        return int(value)
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if m:
        number, suffix = m.groups()
        if suffix in "kmgt":
            return int(float(number) * 10 ** (3 * ("kmgt".index(suffix) + 1)))
        if "." in number:
            return None
        return int(number) * 2 ** (10 * ("KMGT".index(suffix) + 1))
    return int(value) if re.fullmatch(r"-?\d+", value) else None


@dataclass(frozen=True)
class Finding:
    """One problem vLLM would have with an option: ``level`` error (vLLM refuses
    to start) or warning (it starts, but not as the recipe meant), the
    ``flag`` (or variable) concerned, and why (without the version: callers say
    "vLLM <VERSION> rejects <flag>: <message>")."""

    level: str
    flag: str
    message: str

    def sentence(self) -> str:
        """The finding as one sentence naming the pinned vLLM release."""
        verb = "rejects" if self.level == "error" else "warns about"
        return f"vLLM {VERSION} {verb} {self.flag}: {self.message}"


def _norm(name: str) -> str:
    head, dot, tail = name.partition(".")
    return head.replace("_", "-") + dot + tail


@lru_cache(maxsize=MODULE_BOUNDS["vllm_cli.canonical"])
def canonical(flag: str) -> tuple[Optional[str], Optional[bool]]:
    """``(canonical option name, boolean sense)`` of a flag token without its
    ``=value``, or ``(None, None)`` when vLLM has no such option.

    ``--no-enable-x`` → ``("enable-x", False)`` (only for a negatable boolean);
    ``-cc.pass_config.x`` → ``("compilation-config.pass_config.x", None)``."""
    if flag.startswith("--"):
        body = _norm(flag[2:])
    elif flag.startswith("-") and len(flag) > 1:
        head, dot, tail = flag[1:].partition(".")
        if head not in SHORT:
            return None, None
        body = SHORT[head] + dot + tail
    else:
        return None, None
    head, dot, tail = body.partition(".")
    if head in LONG:
        return LONG[head] + dot + tail, None
    if head.startswith("no-") and head[3:] in LONG and _option(LONG[head[3:]]).get("kind") == "bool" and not dot:
        return LONG[head[3:]], False
    return None, None


def _option(name: str) -> dict:
    return OPTIONS.get(name) or OMNI_OPTIONS.get(name) or {}


def suggest(name: str) -> str:
    """`` (did you mean --x?)`` for a misspelt option, or "". Never the
    opposite switch: for ``--disable-log-requests`` (gone from vLLM 0.33.0,
    which has ``--enable-log-requests``) the closest name means the reverse,
    so the hint says that leaving the flag out keeps vLLM's default."""
    name = name.lstrip("-")
    for word, opposite in (("disable-", "enable-"), ("enable-", "disable-")):
        if name.startswith(word) and opposite + name[len(word):] in OPTIONS:
            return (f" (vLLM {VERSION} has only the opposite switch --{opposite}{name[len(word):]}; "
                    "without either, vLLM's default holds)")
    close = difflib.get_close_matches(name, list(OPTIONS), n=1, cutoff=0.75)
    return f" (did you mean --{close[0]}?)" if close else ""


def check_unit(key: str, value: Optional[str], enabled: bool = True, omni: bool = False) -> list[Finding]:
    """Findings for one option: ``key`` is the composer's canonical name (for a
    spelling vLLM does not accept, the spelling itself, starting with ``-``),
    ``value`` its value or None for a bare flag, ``enabled`` False for ``--no-x``;
    ``omni``: the command runs vLLM-Omni (``--omni``), whose options count too."""
    shown = key if key.startswith("-") else ("--" if enabled or value is not None else "--no-") + key
    head, dot, path = key.partition(".")
    opt = OPTIONS.get(head) or (OMNI_OPTIONS.get(head) if omni else None)
    if opt is None and head in OMNI_OPTIONS:
        return [Finding("error", shown, "a vLLM-Omni option, accepted only with --omni (and vllm-omni installed)")]
    if opt is None:
        return [Finding("error", shown, f"no such option{suggest(head)}")]
    if not enabled and value is None and opt["kind"] != "bool":
        return [Finding("error", shown, f"no such option: --{head} cannot be negated")]
    out: list[Finding] = []
    if opt.get("deprecated"):
        out.append(Finding("warning", shown, f"deprecated: {opt.get('help', '')}".rstrip(": ")))
    kind = opt["kind"]
    if dot:
        if kind not in ("json", "json_or_str"):
            return out + [Finding("error", shown, f"--{head} is not a JSON config option, so {shown} is not accepted")]
        if value is None:
            return out + [Finding("error", shown, f"{shown} needs a value (vLLM reads the next argument as its value)")]
        return out + _check_config_path(shown, opt.get("config"), path.split("."), _json_or_text(value))
    if kind in BOOLEAN_KINDS:
        if value is not None and re.match(r"^--?[A-Za-z]", value):
            out.append(Finding("error", shown, f"the argv element {value!r} after {shown} holds a flag and its value in one "
                                                "element; write them as two"))
        elif value is not None:
            out.append(Finding("error", shown, f"--{head} is a switch and takes no value; {value!r} would be an extra argument"))
        return out
    if kind == "optional_value":
        return out
    if value is None:
        return out + [Finding("error", shown, f"--{head} needs a value ({_describe(opt)})")]
    out += _check_text(shown, value)
    if kind == "choice" and value not in opt["choices"]:
        out.append(Finding("error", shown, f"--{head} {value!r} is not one of vLLM's choices ({', '.join(opt['choices'][:12])}"
                                            f"{', …' if len(opt['choices']) > 12 else ''})"))
    elif kind == "int" and not (re.fullmatch(r"-?\d+", value) or (head in HUMAN_INT_OPTIONS and human_int(value) is not None)
                                or (head == "max-model-len" and value == "auto")):
        out.append(Finding("error", shown, f"--{head} takes a whole number, not {value!r}"))
    elif kind == "float":
        try:
            float(value)
        except ValueError:
            out.append(Finding("error", shown, f"--{head} takes a number, not {value!r}"))
    elif kind == "json_or_str" and value.lstrip()[:1] in "{[":
        try:
            json.loads(value)
        except json.JSONDecodeError as exc:
            out.append(Finding("error", shown, f"--{head} looks like JSON but {value!r:.60} does not parse ({exc.msg})"))
        except ValueError as exc:  # not a syntax error: e.g. an integer past Python's digit limit
            out.append(Finding("error", shown, f"--{head} looks like JSON but {value!r:.60} does not parse ({exc})"))
    elif kind == "json":
        try:
            data = json.loads(value)
        except json.JSONDecodeError as exc:
            out.append(Finding("error", shown, f"--{head} takes JSON; {value!r:.60} does not parse ({exc.msg} at column {exc.colno})"))
        except ValueError as exc:  # not a syntax error: e.g. an integer past Python's digit limit
            out.append(Finding("error", shown, f"--{head} takes JSON; {value!r:.60} does not parse ({exc})"))
        else:
            if opt.get("config"):
                out += _check_config(shown, opt["config"], data)
    elif head == "tool-call-parser" and value not in TABLE["tool_parsers"]:
        out.append(Finding("error", shown, f"{value!r} is not a tool-call parser this release ships"
                                            f"{_close(value, TABLE['tool_parsers'])}"))
    elif head == "reasoning-parser" and value not in TABLE["reasoning_parsers"]:
        out.append(Finding("error", shown, f"{value!r} is not a reasoning parser this release ships"
                                            f"{_close(value, TABLE['reasoning_parsers'])}"))
    return out


def _close(value: str, names: list[str]) -> str:
    close = difflib.get_close_matches(value, names, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def _describe(opt: dict) -> str:
    kind = opt["kind"]
    if kind == "choice":
        return "one of " + ", ".join(opt["choices"][:8]) + (", …" if len(opt["choices"]) > 8 else "")
    return {"int": "a whole number", "float": "a number", "json": "JSON", "json_or_str": "JSON or a name",
            "list": "one or more values"}.get(kind, "a value")


def _check_text(shown: str, value: str) -> list[Finding]:
    """A value with quotes of its own or a flag inside it: the recipe author
    wrote shell text into one argv element."""
    out = []
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"" and not _is_json(value):
        out.append(Finding("error", shown, f"the value of {shown} carries its own quotes ({value!r}); argv elements are not shell text"))
    if re.search(r"(^|\s)--?[A-Za-z]", value) and not _is_json(value):
        out.append(Finding("error", shown, f"the value of {shown} holds another flag ({value!r}); give each flag its own argv element"))
    return out


def _is_json(value: str) -> bool:
    try:
        json.loads(value)
        return value.lstrip()[:1] in "{["
    except ValueError:
        return False


def _json_or_text(value: str):
    try:
        return json.loads(value)
    except ValueError:
        return value


BOOL_TEXT = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False, "on": True, "off": False}
"""Strings pydantic's lax mode (which vLLM's configs use) turns into booleans."""


def _check_config(shown: str, config: str, data) -> list[Finding]:
    """JSON ``data`` against the fields of vLLM config dataclass ``config``."""
    fields = CONFIGS.get(config)
    if fields is None:
        return []
    if not isinstance(data, dict):
        return [Finding("error", shown, f"{shown} takes a JSON object for {config}, not {json.dumps(data)[:40]}")]
    out = []
    for k, v in data.items():
        out += _check_config_path(shown, config, [k], v, in_json=True)
    return out


def _check_config_path(shown: str, config: Optional[str], keys: list[str], value, in_json: bool = False) -> list[Finding]:
    """``keys`` (a dotted path) and its value against config class ``config``."""
    cls = config
    for i, key in enumerate(keys):
        fields = CONFIGS.get(cls or "")
        if fields is None:
            return []
        spec = fields.get(key)
        if spec is None:
            near = difflib.get_close_matches(key, list(fields), n=1, cutoff=0.7)
            hint = f" (did you mean {near[0]}?)" if near else ""
            return [Finding("error", shown, f"{cls} has no field {key!r}{hint}")]
        if i < len(keys) - 1:
            if spec.get("kind") != "json" or not spec.get("config"):
                return []  # a free-form dict: vLLM does not type its keys
            cls = spec["config"]
            continue
        return _check_value(shown, cls, key, spec, value, in_json)
    return []


def _check_value(shown: str, cls: Optional[str], field: str, spec: dict, value, in_json: bool) -> list[Finding]:
    """One config field's value. vLLM validates configs with pydantic in lax
    mode, so ``"true"`` or ``"8"`` are coerced: in JSON that is a warning (the
    recipe should write the JSON type), on the dotted command line it is how
    values are written; anything that cannot be coerced is an error."""
    kind = spec.get("kind")
    where = f"{cls}.{field}"
    if value is None:
        return []
    if kind == "bool" and not isinstance(value, bool):
        if isinstance(value, str) and value.lower() in BOOL_TEXT:
            return [Finding("warning", shown, f"{where} is a boolean; write {json.dumps(BOOL_TEXT[value.lower()])}, "
                                              f"not the string {json.dumps(value)}")] if in_json else []
        if isinstance(value, int) and value in (0, 1):
            return []
        return [Finding("error", shown, f"{where} must be true or false; got {json.dumps(value)[:40]}")]
    if kind in ("int", "float") and (isinstance(value, bool) or not isinstance(value, (int, float))):
        text = str(value)
        if isinstance(value, str) and (human_int(text) is not None or _is_number(text)):
            return [Finding("warning", shown, f"{where} is a number; write {text} without quotes")] if in_json else []
        return [Finding("error", shown, f"{where} must be a number; got {json.dumps(value)[:40]}")]
    if kind == "int" and isinstance(value, float) and not value.is_integer():
        return [Finding("error", shown, f"{where} must be a whole number; got {value}")]
    if kind == "choice" and str(value) not in spec.get("choices", []):
        return [Finding("error", shown, f"{where} must be one of {', '.join(spec.get('choices', [])[:10])}; got {json.dumps(value)[:40]}")]
    if kind == "json" and spec.get("config") and isinstance(value, dict):
        return _check_config(shown, spec["config"], value)
    return []


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


@lru_cache(maxsize=MODULE_BOUNDS["vllm_cli._checked_unit"])
def _checked_unit(key: str, value: Optional[str], enabled: bool, omni: bool) -> tuple[Finding, ...]:
    """``check_unit``, kept: a page's options compose the same flags again and
    again (~70 per plan), and the answer depends on nothing else."""
    return tuple(check_unit(key, value, enabled, omni))


def check_command(units) -> list[Finding]:
    """Findings for one ``vllm serve`` command, given its options as
    ``(key, value, enabled)`` triples: each option (``check_unit``) plus the
    rules that involve two of them, from vLLM's own startup checks:
    ``--model`` beside the positional model (vLLM moves it to the front, so two
    models are given); ``--enable-auto-tool-choice`` without
    ``--tool-call-parser`` (vLLM refuses to start)."""
    out: list[Finding] = []
    units = list(units)
    omni = any(key == "omni" for key, _, _ in units)
    plugins = {key for key, _, _ in units if key in ("tool-parser-plugin", "reasoning-parser-plugin")}
    keys = {}
    for key, value, enabled in units:
        found = _checked_unit(key, value, enabled, omni)
        if f"{key}-plugin" in plugins:  # a plugin registers its own parser names
            found = tuple(f for f in found if "parser this release ships" not in f.message)
        out += found
        keys[key] = (value, enabled)
    if "model" in keys:
        out.append(Finding("error", "--model", "vllm serve takes the model as its first argument; "
                                               "--model in the args gives it a second one"))
    auto = keys.get("enable-auto-tool-choice")
    if auto is not None and auto[1] and "tool-call-parser" not in keys:
        out.append(Finding("error", "--enable-auto-tool-choice",
                           "--enable-auto-tool-choice needs --tool-call-parser (vLLM refuses to start without it)"))
    return out


def check_env(name: str) -> list[Finding]:
    """A ``VLLM_*`` variable vLLM does not read is a typo or a removed knob."""
    if name.startswith("VLLM_") and name not in ENV:
        close = difflib.get_close_matches(name, sorted(ENV), n=1, cutoff=0.8)
        return [Finding("warning", name, "not an environment variable this release reads"
                                         + (f" (did you mean {close[0]}?)" if close else ""))]
    return []


def help_text(name: str) -> str:
    """vLLM's own help for option ``name`` (first paragraph), or ""."""
    return OPTIONS.get(name, {}).get("help", "")
