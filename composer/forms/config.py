"""The config-file form: each ``vllm serve`` command as a YAML file for
``vllm serve --config FILE`` plus the env it needs and a one-line command.

vLLM 0.33.0 reads the file with ``FlexibleArgumentParser.load_config_file``
(vllm/utils/argparse_utils.py:606-684) and inserts the options it yields right
after the model (``_pull_args_from_config``, same file :516-604, "cli > config
> defaults"). Its rules, which this module writes for:

* a key ``k`` with a string or number value ``v`` becomes ``--k str(v)``;
* ``true`` becomes ``--k``; ``false`` becomes ``--no-k`` only when the parser
  has that option (a ``BooleanOptionalAction``), else nothing;
* a mapping becomes ``--k json.dumps(mapping)``; a list ``--k item …``;
* ``model: ID`` stands for the positional model (``vllm serve --config f.yaml``
  with no model on the command line uses it, :592-600).

So each option of the plan's argv goes into the file as: a boolean as
``true`` / ``false`` (``no-k: true`` where vLLM has no ``--no-k``); an integer
written canonically as an int; a JSON object value as a YAML mapping when
every leaf is a string, an integer, a boolean or null (vLLM writes it back as
``json.dumps`` of the same object: the same value, Python's default spacing);
every other value as a YAML string (``str`` gives it back unchanged). A value
that holds a ``$PLACEHOLDER`` (``--master-addr $HEAD_IP``) stays on the
command line, after ``--config``, where the shell expands it; YAML would not.
The router and anything else that is not ``vllm serve MODEL`` keeps its
ordinary command. The YAML is written by ``composer.yaml_text`` (strings are
quoted unless YAML 1.1 and 1.2 both read them back as the same string).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Optional

from composer import vllm_cli
from composer.argv import parse_tokens
from composer.forms import FormInput, OutputForm, script_name
from composer.outputs import Artifact, Command
from composer.shell import PLACEHOLDER_RE, comment, quote
from composer.yaml_text import dump

_INT = re.compile(r"^-?(0|[1-9][0-9]*)\Z")


@dataclass(frozen=True)
class ConfigFile:
    """One command's config file: ``file_name`` (``head-node-0.yaml``), the
    ``data`` it holds (key → YAML value, ``model`` first) and the
    ``cli`` tokens that stay on the command line (placeholder values and
    spellings vLLM has no long name for)."""

    file_name: str
    data: dict
    cli: tuple[str, ...]


def _json_leaves_ok(value: Any) -> bool:
    """Every leaf of a JSON value is one ``composer.yaml_text`` writes exactly
    (string, int, bool, null; no float, whose text could change)."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_leaves_ok(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_json_leaves_ok(v) for v in value)
    return value is None or isinstance(value, (str, bool, int))


def _yaml_value(value: str) -> Any:
    """The YAML value that vLLM's ``load_config_file`` turns back into ``value``
    (see the module docstring)."""
    if _INT.match(value):
        return int(value)
    if value.startswith("{"):
        try:
            data = json.loads(value)
        except ValueError:
            data = None
        if isinstance(data, dict) and data and _json_leaves_ok(data):
            return data
    return value


def _has_negative(key: str) -> bool:
    """vLLM's parser has ``--no-<key>`` (a ``BooleanOptionalAction``: kind
    ``bool`` in the CLI table; ``flag`` is ``store_true``)."""
    opt = vllm_cli.OPTIONS.get(key) or vllm_cli.OMNI_OPTIONS.get(key)
    return opt is not None and opt["kind"] == "bool"


def config_file(cmd: Command) -> Optional[ConfigFile]:
    """The config file of ``cmd``, or None when it is not ``vllm serve MODEL
    …`` (the router). Pure; the argv is the plan's, already checked — and
    checked again here (``composer.positions``, as every form does): vLLM
    turns each file entry back into ``--key value`` argv
    (``FlexibleArgumentParser.load_config_file``), so a value that would read
    as an option there, or a model that is no positional, gets no file
    (None: the command stays on the command line, where the plan's own
    checks refuse it)."""
    from composer.positions import check

    argv = list(cmd.argv)
    if argv[:2] != ["vllm", "serve"] or len(argv) < 3 or check(argv[2], "positional") is not None:
        return None
    if any(u.value is not None and check(u.value, "option") for u in parse_tokens(argv[3:])):
        return None
    data: dict[str, Any] = {"model": argv[2]}
    cli: list[str] = []
    if PLACEHOLDER_RE.search(argv[2]):
        return None
    for unit in parse_tokens(argv[3:]):
        if unit.key.startswith("-") or unit.key in data or unit.key == "config":
            cli += unit.tokens()  # a short spelling vLLM does not know, as written; never a duplicate key
        elif unit.value is None:
            if unit.enabled:
                data[unit.key] = True
            elif _has_negative(unit.key):
                data[unit.key] = False
            elif "no-" + unit.key not in data:
                data["no-" + unit.key] = True
            else:
                cli += unit.tokens()
        elif PLACEHOLDER_RE.search(unit.value):
            cli += unit.tokens()  # the shell expands it on the command line
        else:
            data[unit.key] = _yaml_value(unit.value)
    return ConfigFile(script_name(cmd.label)[:-3] + ".yaml", data, tuple(cli))


def run_line(cfg: ConfigFile) -> str:
    """``vllm serve --config FILE`` and the options kept on the command line."""
    return " ".join(["vllm", "serve", "--config", quote(cfg.file_name)] + [quote(t) for t in cfg.cli])


def command_text(cmd: Command) -> str:
    """A command's tab in this form: its env exports and the one-line command
    (the router's ordinary command)."""
    cfg = config_file(cmd)
    if cfg is None:
        return cmd.pip_text
    line = run_line(cfg)
    return f"{cmd.env_text}\n{line}" if cmd.env_text else line


def files(inp: FormInput, detail: object) -> tuple[tuple[Artifact, ...], Optional[str]]:
    """One YAML file per ``vllm serve`` command, each tied to its command's tab
    (``Artifact.command``)."""
    out = []
    for i, cmd in enumerate(inp.commands):
        cfg = config_file(cmd)
        if cfg is None:
            continue
        head = [f"{inp.ctx.recipe.meta.title}: {inp.summary}", f"{cmd.label}: {run_line(cfg)}"]
        if cmd.env:
            head.append("Export the environment variables of this command's tab first.")
        if inp.blocked:
            head.append("The plan has errors; this file is NOT expected to work.")
        text = dump(cfg.data, {(): [comment(h) for h in head]})
        note = f"Save as {cfg.file_name} next to where you run: {run_line(cfg)}"
        out.append(Artifact(cfg.file_name, "application/yaml", text, command=i, note=note))
    return tuple(out), None if out else "The plan has no vllm serve command."


FORM: OutputForm = OutputForm(
    id="config", label="Config file",
    describe=lambda image: "Install vLLM with pip (uv) on each node and start each command from a YAML file "
                           "(vllm serve --config).",
    needs_image=False, vllm_from="host",
    command_text=command_text, files=files,
)
