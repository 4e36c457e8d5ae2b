"""Import a command: read the ``vllm serve`` lines a person already runs, say
what vLLM 0.33.0 would refuse, and find the recipe's closest plan with the
difference flag by flag (issue 20, item 4).

Three steps, each pure (no I/O, nothing is ever run; the same code runs in
Pyodide):

* ``read_text(text)`` → ``Reading``: the pasted text split into commands with
  ``shlex`` as a POSIX shell would split words (``\\`` continuations joined,
  ``export``/``VAR=value`` assignments kept as the command's env, ``;``/``&&``
  separate commands, a pipe or a redirection is dropped with a note). It
  unwraps ``python -m vllm.entrypoints.openai.api_server …`` (model from
  ``--model``) and a simple ``docker run … IMAGE …`` (env from ``-e``; the
  vLLM images' entrypoint is ``vllm serve``) into ``vllm serve`` argv.
  Command substitution (``$(…)``, backticks), subshells, NUL bytes and text
  over the limits (``LIMITS``) are refused with a message: nothing of such a
  command is read.
* ``model_ids(reading)``: the models the commands serve (one recipe page is
  looked up by them: the recipe id or a variant's checkpoint id).
* ``import_commands(ctx, reading, hint)`` → ``ImportReport``: every flag read
  with vLLM's CLI table (``composer.vllm_cli``: unknown options, spellings
  normalised to the canonical name), vLLM's start-up rules
  (``composer.launch.check_command``), the layout the flags give (TP, PP, DP,
  EP, nodes, P/D role), the closest plan (a search of the recipe's selection
  space: each offered hardware × strategy at the command's node count, then
  one option of the page at a time while the difference shrinks) and, per
  pasted command, the difference with the plan's command, each entry with
  the layer and recipe key of the recipe's value (the plan's provenance,
  ``composer.layers``) and what the pasted value costs where we know it.

The plan link is the plan's pinned query (``composer.canonical``): it is
built from the recipe's own ids only, never from pasted text.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from composer import vllm_cli
from composer.argv import ArgvError, Unit, is_flag_token, parse_tokens

LIMITS: Mapping[str, int] = {
    "text_chars": 400_000,   # the whole pasted text
    "line_chars": 20_000,    # one logical line (after joining ``\\`` continuations)
    "commands": 256,         # commands read from one text (our largest plans: 16 nodes × KV-store instances)
    "tokens": 2_000,         # words of one command
}
"""Size limits of ``read_text``: text beyond them is refused with a message
(the whole text, or the one line or command), never read in part."""

PLACEHOLDER = re.compile(r"\$\{?([A-Z][A-Z0-9_]*)\}?")
_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)\Z", re.S)
_OPERATORS = frozenset({";", "&&", "||", "&", "|", "|&", ";;"})
_REDIRECTS = frozenset({">", ">>", "<", ">&", "<&", "&>", "&>>", "<<", "<<<", "<>", ">|"})
_PREFIXES = frozenset({"sudo", "nohup", "exec", "time", "command", "stdbuf"})
_API_SERVER = "vllm.entrypoints.openai.api_server"
# ``docker run`` options that take no value (the rest take the next word, or =value).
_DOCKER_SWITCHES = frozenset({"--rm", "-d", "--detach", "-i", "--interactive", "-t", "--tty", "-it", "-ti", "--init",
                              "--privileged", "-P", "--publish-all", "--read-only", "--sig-proxy", "--no-healthcheck",
                              "-q", "--quiet", "--oom-kill-disable"})


@dataclass(frozen=True)
class Problem:
    """A message about the pasted text: ``level`` error (nothing of that
    command is read, or no plan can be found), warning or info; ``code``
    stable for tests; ``line`` the 1-based line it starts on (0: the whole text)."""

    level: str
    code: str
    message: str
    line: int = 0


@dataclass(frozen=True)
class Pasted:
    """One command read from the text. ``argv``: for a vLLM server
    (``serve``) ``["vllm", "serve", model, flags…]`` whatever the wrapper
    (``wrapper``: "" | "docker" | "api_server"); for anything else
    (``other``: the P/D router, an install line) its words. ``env``: the
    assignments in force for it (``export`` lines since the previous
    command, ``VAR=value`` before it, ``docker -e``); ``line`` where it starts."""

    kind: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    line: int
    wrapper: str = ""

    @property
    def model(self) -> Optional[str]:
        return self.argv[2] if self.kind == "serve" and len(self.argv) > 2 and not self.argv[2].startswith("-") else None

    @property
    def program(self) -> str:
        return " ".join(self.argv[:2]) if self.kind == "serve" else (self.argv[0] if self.argv else "")


@dataclass(frozen=True)
class Reading:
    """What ``read_text`` found: the commands, and the problems of the text."""

    commands: tuple[Pasted, ...]
    problems: tuple[Problem, ...]

    @property
    def serve(self) -> tuple[Pasted, ...]:
        return tuple(c for c in self.commands if c.kind == "serve")


# ── Reading the text ─────────────────────────────────────────────────────────

def _short(text: str, limit: int = 60) -> str:
    """User text for a message: one line, at most ``limit`` characters,
    control characters shown as escapes (``repr``). Rendering escapes it again
    for HTML (Jinja's autoescape) or a shell comment (``composer.shell.comment``)."""
    t = text if len(text) <= limit else text[:limit] + "…"
    return repr(t)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """``(first line number, text)`` of each line, ``\\``-newline joined."""
    out: list[tuple[int, str]] = []
    buf, start = "", 0
    for no, raw in enumerate(text.split("\n"), 1):
        if not buf:
            start = no
        if raw.endswith("\\") and not raw.endswith("\\\\"):
            buf += raw[:-1] + " "
            continue
        out.append((start, buf + raw))
        buf = ""
    if buf:
        out.append((start, buf))
    return out


def _words(line: str) -> list[str]:
    """The words of one line as a POSIX shell splits them (quotes removed),
    operators (``;``, ``&&``, ``|``, ``>``, ``(`` …) as words of their own, a
    comment (a word starting with ``#``) dropped with the rest of the line.
    Raises ValueError for an unclosed quote."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=";&|<>()")
    lex.whitespace_split = True
    lex.commenters = ""
    out = []
    for w in lex:
        if w.startswith("#"):
            break
        out.append(w)
    return out


def read_text(text: str) -> Reading:
    """Split ``text`` into commands (see the module doc). Never raises and
    never runs anything; every refusal is a ``Problem``."""
    problems: list[Problem] = []
    if not isinstance(text, str):
        return Reading((), (Problem("error", "not-text", "The pasted input is not text."),))
    if "\x00" in text:
        return Reading((), (Problem("error", "nul-byte", "The text holds a NUL byte (binary data?); nothing was read."),))
    if len(text) > LIMITS["text_chars"]:
        return Reading((), (Problem("error", "too-long", f"The text is {len(text):,} characters long; at most "
                                                         f"{LIMITS['text_chars']:,} are read. Paste only the commands."),))
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    commands: list[Pasted] = []
    exported: dict[str, str] = {}
    for line_no, line in _logical_lines(text):
        if not line.strip():
            continue
        if len(line) > LIMITS["line_chars"]:
            problems.append(Problem("error", "line-too-long", f"Line {line_no} is {len(line):,} characters long (at most "
                                                              f"{LIMITS['line_chars']:,}); it was not read.", line_no))
            continue
        try:
            words = _words(line)
        except ValueError as exc:
            problems.append(Problem("error", "unclosed-quote", f"Line {line_no} could not be split into words ({exc}); "
                                                               "it was not read.", line_no))
            continue
        for seg in _segments(words, line_no, problems):
            if len(commands) >= LIMITS["commands"]:
                problems.append(Problem("error", "too-many-commands", f"More than {LIMITS['commands']} commands; the rest "
                                                                      "were not read.", line_no))
                return Reading(tuple(commands), tuple(problems))
            cmd = _command(seg, line_no, exported, problems)
            if cmd is not None:
                commands.append(cmd)
                exported = {}
    if not any(c.kind == "serve" for c in commands) and not any(p.level == "error" for p in problems):
        problems.append(Problem("error", "no-serve", "No `vllm serve` command was found in the text."))
    return Reading(tuple(commands), tuple(problems))


def _segments(words: list[str], line: int, problems: list[Problem]) -> list[list[str]]:
    """The simple commands of one line: split at ``;``/``&&``/``||``/``&``;
    what follows a pipe and redirections (with their targets) dropped; a
    subshell or command substitution refuses the whole line."""
    bad = next((w for w in words if w in ("(", ")") or "$(" in w or "`" in w or "<(" in w or ">(" in w), None)
    if bad is not None:
        problems.append(Problem("error", "substitution", f"Line {line} holds a subshell or command substitution "
                                                         f"({_short(bad, 30)}); such text is never run or read here, "
                                                         "so the line was skipped. Paste the command with its values.", line))
        return []
    out: list[list[str]] = []
    cur: list[str] = []
    piped = False
    skip_next = False
    for i, w in enumerate(words):
        if skip_next:
            skip_next = False
            continue
        if w in _OPERATORS:
            if w in ("|", "|&"):
                if not piped:
                    problems.append(Problem("info", "pipe", f"Line {line}: the output pipe (| …) was not read.", line))
                piped = True
                continue
            if cur:
                out.append(cur)
            cur, piped = [], False
            continue
        if w in _REDIRECTS or (w and set(w) <= set("<>&|")):
            if cur and cur[-1] in ("0", "1", "2") and i > 0 and words[i - 1] == cur[-1]:
                cur.pop()  # the descriptor of 2>&1
            skip_next = True
            continue
        if not piped:
            cur.append(w)
    if cur:
        out.append(cur)
    return out


def _command(words: list[str], line: int, exported: dict[str, str], problems: list[Problem]) -> Optional[Pasted]:
    """One simple command, or None for an ``export`` line (its assignments
    are kept in ``exported`` for the next command) and empty words."""
    if len(words) > LIMITS["tokens"]:
        problems.append(Problem("error", "too-many-words", f"The command on line {line} has {len(words):,} words (at most "
                                                           f"{LIMITS['tokens']:,}); it was not read.", line))
        return None
    env: dict[str, str] = dict(exported)
    rest = list(words)
    if rest and rest[0] == "export":
        for w in rest[1:]:
            m = _ASSIGN.match(w)
            if m:
                exported[m.group(1)] = m.group(2)
        return None
    while rest:
        m = _ASSIGN.match(rest[0])
        if m:
            env[m.group(1)] = m.group(2)
            rest.pop(0)
        elif rest[0] in _PREFIXES or rest[0] == "env":
            rest.pop(0)
        else:
            break
    if not rest:
        exported.update({k: v for k, v in env.items() if k not in exported})
        return None
    prog = rest[0].rsplit("/", 1)[-1]
    if prog == "docker" and len(rest) > 1 and rest[1] in ("run", "create"):
        return _docker(rest, line, env, problems)
    if prog.startswith("python") and len(rest) > 2 and rest[1] == "-m" and rest[2] == _API_SERVER:
        return _api_server(rest[3:], line, env, problems)
    if prog == "vllm" and len(rest) > 1 and rest[1] == "serve":
        return Pasted("serve", ("vllm", "serve", *rest[2:]), tuple(env.items()), line)
    return Pasted("other", tuple(rest), tuple(env.items()), line)


def _api_server(args: list[str], line: int, env: dict[str, str], problems: list[Problem]) -> Pasted:
    """``python -m vllm.entrypoints.openai.api_server --model M …`` as ``vllm serve M …``."""
    model, out, i = None, [], 0
    while i < len(args):
        a = args[i]
        if a == "--model" and i + 1 < len(args):
            model, i = args[i + 1], i + 2
            continue
        if a.startswith("--model="):
            model, i = a.split("=", 1)[1], i + 1
            continue
        out.append(a)
        i += 1
    problems.append(Problem("info", "api-server", f"Line {line}: read `python -m {_API_SERVER}` as `vllm serve`, "
                                                  "which serves the same OpenAI-compatible API.", line))
    return Pasted("serve", ("vllm", "serve", *([model] if model else []), *out), tuple(env.items()), line, "api_server")


def _docker(words: list[str], line: int, env: dict[str, str], problems: list[Problem]) -> Optional[Pasted]:
    """``docker run [options] IMAGE [args]``: ``-e``/``--env`` become the env,
    ``args`` (after an optional ``vllm serve``) the server's argv."""
    i, image = 2, None
    while i < len(words):
        w = words[i]
        if not w.startswith("-"):
            image = w
            break
        name, eq, val = w.partition("=")
        takes = not eq and w not in _DOCKER_SWITCHES and not (re.fullmatch(r"-[dit]+", w))
        if takes:
            val, i = (words[i + 1] if i + 1 < len(words) else ""), i + 2
        else:
            i += 1
        if name in ("-e", "--env"):
            m = _ASSIGN.match(val)
            if m:
                env[m.group(1)] = m.group(2)
            elif val:
                problems.append(Problem("info", "docker-env-passthrough", f"Line {line}: `-e {_short(val, 40)}` passes the "
                                                                          "host's value on; it is not known here.", line))
        elif name == "--entrypoint":
            problems.append(Problem("warning", "docker-entrypoint", f"Line {line}: the container's entrypoint is replaced "
                                                                    "(--entrypoint); the arguments are read as `vllm serve`'s.", line))
    if image is None:
        problems.append(Problem("error", "docker-no-image", f"Line {line}: `docker run` without an image was not read.", line))
        return None
    args = words[i + 1:]
    if args[:2] == ["vllm", "serve"]:
        args = args[2:]
    elif args and args[0].rsplit("/", 1)[-1].startswith("python") and args[1:3] == ["-m", _API_SERVER]:
        return _api_server(args[3:], line, env, problems)
    if "vllm" not in image:
        problems.append(Problem("warning", "docker-image", f"Line {line}: image {_short(image, 50)} is not one of vLLM's; "
                                                           "its arguments are read as `vllm serve`'s.", line))
    return Pasted("serve", ("vllm", "serve", *args), tuple(env.items()), line, "docker")


def model_ids(reading: Reading) -> tuple[str, ...]:
    """The distinct models the ``vllm serve`` commands serve, in order."""
    return tuple(dict.fromkeys(c.model for c in reading.serve if c.model))


# ── One command read with vLLM's table ───────────────────────────────────────

@dataclass(frozen=True)
class Finding:
    """What vLLM 0.33.0 says about one pasted command: ``level`` error (it
    refuses to start) or warning; ``rule``: a start-up rule id
    (``composer.launch.RULES``) or ``cli`` (the option table); ``flags`` the
    options or variables concerned; ``cost`` what a warning costs."""

    level: str
    rule: str
    message: str
    flags: tuple[str, ...] = ()
    cost: str = ""


def _units(argv: Sequence[str]) -> tuple[Optional[list[Unit]], str]:
    """The option units after the model, or (None, why) when they do not parse."""
    rest = list(argv[3:]) if len(argv) > 2 and not argv[2].startswith("-") else list(argv[2:])
    try:
        return parse_tokens(rest), ""
    except ArgvError as exc:
        return None, str(exc)


def check_pasted(cmd: Pasted, facts=None, target=None) -> tuple[Finding, ...]:
    """Every finding for one pasted ``vllm serve`` command: each option
    against vLLM's CLI table (``vllm_cli.check_command``: unknown options,
    values vLLM's parser refuses), every ``VLLM_*`` variable it does not read,
    then vLLM's start-up rules (``launch.check_command``)."""
    from composer import launch

    out: list[Finding] = []
    if cmd.model is None:
        out.append(Finding("error", "cli", "no model: `vllm serve` takes the model id as its first argument", ("model",)))
    units, why = _units(cmd.argv)
    if units is None:
        return (*out, Finding("error", "cli", f"the options do not parse: {why}"))
    for f in vllm_cli.check_command([(u.key, u.value, u.enabled) for u in units]):
        if f.flag == "--model" and cmd.wrapper == "api_server":
            continue
        out.append(Finding(f.level, "cli", f"{f.flag}: {f.message}", (f.flag,)))
    for name, _ in cmd.env:
        for f in vllm_cli.check_env(name):
            out.append(Finding(f.level, "cli", f"{name}: {f.message}", (name,)))
    if not any(f.level == "error" for f in out):
        for v in launch.check_command(list(cmd.argv), dict(cmd.env), facts, target):
            rule = launch.RULE.get(v.rule)
            out.append(Finding(v.level, v.rule, v.message, tuple(rule.flags) if rule else (),
                               (rule.cost if rule else "") or ""))
    return tuple(out)


@dataclass(frozen=True)
class Layout:
    """The parallel layout one ``vllm serve`` command states (vLLM's defaults
    of 1): TP, PP, DP (total and on this node), EP on or off, DCP, the node
    count and this node's rank, whether it is a headless follower, and its
    P/D role from ``--kv-transfer-config``'s ``kv_role`` (kv_producer →
    prefill, kv_consumer → decode; "" otherwise)."""

    tp: int
    pp: int
    dp: int
    dp_local: int
    ep: bool
    dcp: int
    nodes: int
    node_rank: int
    headless: bool
    role: str

    @property
    def gpus_per_node(self) -> int:
        return self.tp * self.pp * self.dp_local if self.nodes == 1 or self.dp > 1 else self.tp * self.pp // self.nodes

    def text(self) -> str:
        parts = [f"TP {self.tp}"]
        if self.pp > 1:
            parts.append(f"PP {self.pp}")
        if self.dp > 1:
            parts.append(f"DP {self.dp}" + (f" ({self.dp_local} on this node)" if self.dp_local != self.dp else ""))
        if self.ep:
            parts.append("EP")
        if self.dcp > 1:
            parts.append(f"DCP {self.dcp}")
        where = f"{self.nodes} nodes, node {self.node_rank}" + (" (headless follower)" if self.headless else "") \
            if self.nodes > 1 else "one node"
        role = f"; P/D {self.role}" if self.role else ""
        return " · ".join(parts) + f"; {where}{role}"


def layout_of(cmd: Pasted) -> Optional[Layout]:
    """The ``Layout`` of a pasted ``vllm serve`` command (None if its options
    do not parse). Nodes: ``--nnodes``, else DP / local DP for a DP layout."""
    from composer import launch

    s = launch.parse_serve(list(cmd.argv), dict(cmd.env))
    if s is None:
        return None
    tp, pp, _, dcp = launch.parallel_sizes(s)
    dp = s.int("data-parallel-size") or 1
    local = s.int("data-parallel-size-local") or dp
    nodes = s.int("nnodes") or (max(1, dp // local) if dp > 1 and local else 1)
    start = s.int("data-parallel-start-rank")
    given_rank = s.int("node-rank")
    rank = given_rank if given_rank is not None else ((start // local) if start and local else 0)
    kv = s.conf("kv-transfer-config")
    # A MultiConnector's own role is kv_both; its P/D connector says which side this is.
    nested = (kv.get("kv_connector_extra_config") or {}).get("connectors") if isinstance(kv, Mapping) else None
    roles = [str(kv.get("kv_role", ""))] + [str(c.get("kv_role", "")) for c in nested or () if isinstance(c, Mapping)]
    role = next((r for r in ({"kv_producer": "prefill", "kv_consumer": "decode"}.get(x, "") for x in roles) if r), "")
    return Layout(tp, pp, dp, local, bool(s.flag("enable-expert-parallel")), dcp, nodes, rank,
                  bool(s.flag("headless")), role)


# ── The difference with a plan ───────────────────────────────────────────────

@dataclass(frozen=True)
class Difference:
    """One flag or variable where a pasted command and the plan's differ.

    ``what``: ``flag`` | ``env`` | ``model``; ``name`` its canonical name
    (``--max-num-seqs``, ``VLLM_X``); ``change``: ``value`` (both set, other
    values), ``missing`` (the recipe sets it, the command does not) or
    ``extra`` (the command sets it, the recipe does not); ``yours`` /
    ``recipe`` the values (None: not set; ``""`` a switch); ``source`` where the
    recipe's value comes from (``<layer>: <recipe key>`` from the plan's
    provenance); ``cost`` what the pasted value costs, where known."""

    what: str
    name: str
    change: str
    yours: Optional[str]
    recipe: Optional[str]
    source: str = ""
    cost: str = ""


def _show(u: Unit) -> str:
    return u.value if u.value is not None else ("" if u.enabled else "(off)")


def _same_value(key: str, mine: Unit, theirs: Unit) -> bool:
    """Whether two units of the same option mean the same to vLLM: a switch's
    sense; numbers by value (``0.90`` = ``0.9``, ``8k`` = ``8000`` where vLLM
    reads human-readable ints); JSON by content; a recipe ``$PLACEHOLDER``
    matches any word (the person's own address, interface …)."""
    if mine.value is None or theirs.value is None:
        return mine.value is None and theirs.value is None and mine.enabled == theirs.enabled
    a, b = mine.value, theirs.value
    if a == b or _placeholder_match(b, a):
        return True
    kind = vllm_cli.OPTIONS.get(key.partition(".")[0], {}).get("kind")
    if kind == "int":
        ha, hb = vllm_cli.human_int(a), vllm_cli.human_int(b)
        return ha is not None and ha == hb
    if kind == "float":
        try:
            return float(a) == float(b)
        except ValueError:
            return False
    if kind in ("json", "json_or_str") or key.count("."):
        try:
            return json.loads(a) == json.loads(b)
        except ValueError:
            return False
    return False


def _placeholder_match(recipe: str, yours: str) -> bool:
    """``recipe`` holds ``$NAME``s and ``yours`` is it with each filled by a
    non-empty word (or left as written)."""
    if "$" not in recipe:
        return False
    pattern = "".join(r"[^\s]+" if m else re.escape(t)
                      for t, m in _split_placeholders(recipe))
    return re.fullmatch(pattern, yours) is not None


def _split_placeholders(text: str) -> list[tuple[str, bool]]:
    out, pos = [], 0
    for m in PLACEHOLDER.finditer(text):
        if m.start() > pos:
            out.append((text[pos:m.start()], False))
        out.append((m.group(0), True))
        pos = m.end()
    if pos < len(text):
        out.append((text[pos:], False))
    return out


_COSTS: Mapping[str, tuple[str, str]] = {
    "gpu-memory-utilization": ("less memory for the KV cache: fewer tokens and concurrent sequences fit",
                               "less headroom for activations, CUDA graphs and other processes: out-of-memory risk"),
    "max-model-len": ("requests longer than this are refused", "more KV cache per sequence: fewer sequences fit, or vLLM does not start"),
    "max-num-seqs": ("fewer requests are decoded at once: lower throughput", "more sequences at once: more memory for CUDA graphs and the KV cache"),
    "max-num-batched-tokens": ("smaller prefill chunks: slower time to first token", "larger prefill batches: more activation memory"),
    "tensor-parallel-size": ("", ""),
}
"""What a lower / higher value of a tuning option costs (the direction from
vLLM's own help for the option)."""


def _cost(name: str, mine: Optional[Unit], recipe: Optional[Unit], findings: Sequence[Finding], source: str = "") -> str:
    """What the pasted value costs: a start-up rule it breaks (its message or
    cost), else the direction of a tuning option, else what vLLM's help says
    the option does (an extra option) or that vLLM's default applies (a
    missing one)."""
    flag = "--" + name
    for f in findings:
        if flag in f.flags or name in f.flags:
            return ("vLLM refuses to start: " if f.level == "error" else "") + (f.cost or f.message)
    if mine is not None and recipe is not None and mine.value is not None and recipe.value is not None:
        lower_higher = _COSTS.get(name)
        try:
            a, b = float(vllm_cli.human_int(mine.value) or mine.value), float(vllm_cli.human_int(recipe.value) or recipe.value)
        except ValueError:
            a = b = 0.0
        if lower_higher and a != b and lower_higher[0 if a < b else 1]:
            return lower_higher[0 if a < b else 1]
        return ""
    if mine is None:
        m = re.match(r"features: features\.([^.]+)\.", source)
        if m:
            return f"without it the recipe's feature {m.group(1)} is off"
        return "vLLM's default applies instead"
    if recipe is None:
        helptext = vllm_cli.help_text(name.partition(".")[0])
        return helptext.split(". ")[0].rstrip(".") if helptext else ""
    return ""


def diff_command(mine: Pasted, plan_cmd: Mapping[str, Any], findings: Sequence[Finding] = ()) -> list[Difference]:
    """The differences between a pasted ``vllm serve`` command and one of a
    plan's commands (its ``argv``, ``env``, ``provenance``,
    ``env_provenance``): the model, each option by canonical name, each env
    variable. Empty when vLLM would read them the same way. Raises nothing;
    options that do not parse count as one difference."""
    out: list[Difference] = []
    theirs_argv = list(plan_cmd.get("argv") or ())
    if theirs_argv[:2] != ["vllm", "serve"]:
        if list(mine.argv) != theirs_argv and not _argv_placeholder_equal(mine.argv, theirs_argv):
            out.append(Difference("flag", " ".join(theirs_argv[:1]), "value", " ".join(mine.argv), " ".join(theirs_argv)))
        return out
    if (mine.model or "") != (theirs_argv[2] if len(theirs_argv) > 2 else ""):
        out.append(Difference("model", "model", "value", mine.model, theirs_argv[2] if len(theirs_argv) > 2 else None,
                              "variant: the checkpoint", "another checkpoint: other weights"))
    units, _ = _units(mine.argv)
    if units is None:
        out.append(Difference("flag", "(options)", "value", " ".join(mine.argv[3:])[:200], None, "", "the options do not parse"))
        return out
    their_units, _ = _units(theirs_argv)
    yours = {u.key: u for u in units}
    recipe = {u.key: u for u in (their_units or [])}
    prov = {p.get("name"): p for p in plan_cmd.get("provenance") or ()}
    for key in list(recipe) + [k for k in yours if k not in recipe]:
        a, b = yours.get(key), recipe.get(key)
        if a is not None and b is not None and _same_value(key, a, b):
            continue
        p = prov.get(key) or {}
        source = f"{p['layer']}: {p['key']}" if p else ""
        change = "value" if a is not None and b is not None else ("missing" if a is None else "extra")
        name = key if key.startswith("-") else "--" + key
        out.append(Difference("flag", name, change, None if a is None else _show(a), None if b is None else _show(b),
                              source, _cost(key, a, b, findings, source)))
    env_prov = {e.get("name"): e for e in plan_cmd.get("env_provenance") or ()}
    my_env, their_env = dict(mine.env), dict(plan_cmd.get("env") or {})
    for name in list(their_env) + [k for k in my_env if k not in their_env]:
        va, vb = my_env.get(name), their_env.get(name)
        if va is not None and vb is not None and (va == vb or _placeholder_match(vb, va)):
            continue
        p = env_prov.get(name) or {}
        change = "value" if va is not None and vb is not None else ("missing" if va is None else "extra")
        cost = next(((f.cost or f.message) for f in findings if name in f.flags), "")
        out.append(Difference("env", name, change, va, vb, f"{p['layer']}: {p['key']}" if p else "", cost))
    return out


def _argv_placeholder_equal(mine: Sequence[str], theirs: Sequence[str]) -> bool:
    return len(mine) == len(theirs) and all(a == b or _placeholder_match(b, a) for a, b in zip(mine, theirs))


@dataclass(frozen=True)
class Pair:
    """A pasted command matched with one of the plan's: indices into the
    reading's ``commands`` and the plan's ``commands``, the plan command's
    label, and the differences."""

    yours: int
    recipe: int
    label: str
    differences: tuple[Difference, ...]


def match_commands(reading: Reading, plan: Mapping[str, Any], findings: Mapping[int, Sequence[Finding]] | None = None
                   ) -> tuple[tuple[Pair, ...], tuple[int, ...], tuple[int, ...]]:
    """Pair the pasted commands with the plan's (``plan["commands"]``, else
    its ``blocked_commands``): the pairs with the fewest differences first,
    each command used once; a pasted command that is no server and matches no
    plan command (an install line) is left out. Returns ``(pairs, pasted
    commands without a partner, plan commands without a partner)``."""
    findings = findings or {}
    theirs = list(plan.get("commands") or plan.get("blocked_commands") or ())
    mine = list(enumerate(reading.commands))
    costs = []
    for i, c in mine:
        for j, t in enumerate(theirs):
            t_serve = list(t.get("argv") or ())[:2] == ["vllm", "serve"]
            if (c.kind == "serve") != t_serve:
                continue
            if not t_serve and (not c.argv or c.argv[0] != (t.get("argv") or [""])[0]):
                continue
            d = diff_command(c, t, findings.get(i, ()))
            costs.append((len(d), j, i, d))
    costs.sort(key=lambda x: (x[0], x[2], x[1]))
    used_m: set[int] = set()
    used_t: set[int] = set()
    pairs = []
    for _, j, i, d in costs:
        if i in used_m or j in used_t:
            continue
        used_m.add(i)
        used_t.add(j)
        pairs.append(Pair(i, j, str(theirs[j].get("label", "")), tuple(d)))
    pairs.sort(key=lambda p: p.yours)
    left_m = tuple(i for i, c in mine if i not in used_m and c.kind == "serve")
    left_t = tuple(j for j in range(len(theirs)) if j not in used_t)
    return tuple(pairs), left_m, left_t


def score(reading: Reading, plan: Mapping[str, Any]) -> float:
    """How far ``plan`` is from the pasted commands: one per difference, 5
    per pasted server the plan has no command for, ½ per plan command not
    pasted (a person may paste one node of several)."""
    pairs, left_m, left_t = match_commands(reading, plan)
    return sum(len(p.differences) for p in pairs) + 5 * len(left_m) + 0.5 * len(left_t)


# ── The closest plan ─────────────────────────────────────────────────────────

MAX_STEPS = 12
"""Steps of the option-by-option search (each tries every option of a page)."""
SIDEWAYS = 2
"""Of those, steps to an as-close plan when no option is closer."""


@dataclass(frozen=True)
class ImportReport:
    """What ``import_commands`` found.

    ``problems``: about the text and the recipe lookup; ``commands``: the
    reading's commands; ``findings``: per pasted command index, what vLLM
    0.33.0 says (``Finding``); ``layouts``: per server index, its ``Layout``;
    ``plan``: the closest plan (the plan dict of ``composer.api.compose``) or
    None; ``pairs``/``unpasted``/``unmatched``: the command pairs with their
    differences, the plan commands not pasted and the pasted servers the plan
    has none for; ``hardware_note``: how the hardware was chosen (a command
    does not say which GPUs it runs on) and ``alternatives``: other hardware
    whose plan is as close (``(id, pinned query)``)."""

    recipe: Optional[str]
    problems: tuple[Problem, ...]
    commands: tuple[Pasted, ...] = ()
    findings: Mapping[int, tuple[Finding, ...]] = field(default_factory=dict)
    layouts: Mapping[int, Layout] = field(default_factory=dict)
    plan: Optional[Mapping[str, Any]] = None
    pairs: tuple[Pair, ...] = ()
    unpasted: tuple[int, ...] = ()
    unmatched: tuple[int, ...] = ()
    hardware_note: str = ""
    alternatives: tuple[tuple[str, str], ...] = ()
    searched: int = 0

    @property
    def differences(self) -> int:
        return sum(len(p.differences) for p in self.pairs)

    @property
    def ok(self) -> bool:
        return self.plan is not None and not any(p.level == "error" for p in self.problems)

    def to_json(self) -> dict:
        """JSON-ready dict: ``recipe``, ``ok``, ``problems``, ``commands``
        (per pasted command: ``line``, ``kind``, ``program``, ``wrapper``,
        ``model``, ``argv``, ``env``, ``findings``, ``layout`` text), ``plan``
        (``summary``, ``selection``, ``query`` and ``url``: the pinned link,
        ``status``) or None, ``pairs`` (``yours``, ``recipe``, ``label``,
        ``differences``), ``unpasted`` (labels), ``unmatched`` (indices),
        ``differences`` (count), ``hardware_note``, ``alternatives``,
        ``limits``."""
        plan = self.plan
        cmds = list(plan.get("commands") or plan.get("blocked_commands") or ()) if plan else []
        return {
            "recipe": self.recipe, "ok": self.ok,
            "problems": [p.__dict__ for p in self.problems],
            "commands": [{"index": i, "line": c.line, "kind": c.kind, "program": c.program, "wrapper": c.wrapper,
                          "model": c.model, "argv": list(c.argv), "env": dict(c.env),
                          "findings": [f.__dict__ | {"flags": list(f.flags)} for f in self.findings.get(i, ())],
                          "layout": self.layouts[i].text() if i in self.layouts else ""}
                         for i, c in enumerate(self.commands)],
            "plan": None if plan is None else {"summary": plan["summary"], "selection": plan["selection"],
                                               "query": plan["share_url"].lstrip("?"), "url": plan["share_url"],
                                               "status": plan["status"]},
            "pairs": [{"yours": p.yours, "recipe": p.recipe, "label": p.label,
                       "differences": [d.__dict__ for d in p.differences]} for p in self.pairs],
            "unpasted": [str(cmds[j].get("label", "")) for j in self.unpasted],
            "unmatched": list(self.unmatched),
            "differences": self.differences,
            "hardware_note": self.hardware_note,
            "alternatives": [{"hardware": h, "url": u} for h, u in self.alternatives],
            "searched": self.searched,
            "limits": dict(LIMITS),
        }


def variants_of(ctx, model: str) -> tuple[str, ...]:
    """The variant keys of ``ctx``'s recipe whose checkpoint is ``model`` (any
    case; several variants may serve one checkpoint, e.g. one with
    ``--quantization fp8``): ``("default",)`` for the recipe's own id, ``()``
    when the recipe does not serve it."""
    low = model.lower()
    keys = tuple(k for k in ctx.recipe.variants if ctx.model_id(k).lower() == low)
    if keys:
        return keys
    if ctx.recipe.model.model_id.lower() == low or ctx.recipe_id.lower() == low:
        return ("default",) if "default" in ctx.recipe.variants or not ctx.recipe.variants else (next(iter(ctx.recipe.variants)),)
    return ()


def variant_of(ctx, model: str) -> Optional[str]:
    """The first of ``variants_of``, or None."""
    keys = variants_of(ctx, model)
    return keys[0] if keys else None


def import_commands(ctx, reading: Reading, hint: str | None = None, hardware: str | None = None) -> ImportReport:
    """The ``ImportReport`` of ``reading`` against ``ctx``'s recipe.

    ``hint``: a query whose hardware is preferred among equally close plans
    (the page passes the plan it shows); ``hardware``: a hardware id the
    person named (the search keeps it). Never raises for any text."""
    from composer.api import compose
    from composer.query import parse_query

    problems = list(reading.problems)
    serve = [i for i, c in enumerate(reading.commands) if c.kind == "serve"]
    models = model_ids(reading)
    if any(p.level == "error" for p in problems) and not serve:
        return ImportReport(ctx.recipe_id, tuple(problems), reading.commands)
    if len(models) > 1:
        problems.append(Problem("error", "two-models", "The commands serve more than one model ("
                                + ", ".join(_short(m, 50) for m in models[:4]) + "); paste the commands of one deployment."))
        return ImportReport(ctx.recipe_id, tuple(problems), reading.commands)
    if not models:
        problems.append(Problem("error", "no-model", "No model id was found after `vllm serve`."))
        return ImportReport(ctx.recipe_id, tuple(problems), reading.commands)
    variants = variants_of(ctx, models[0])
    variant = variants[0] if variants else None
    if variant is None:
        served = sorted({ctx.model_id(k) for k in ctx.recipe.variants} | {ctx.recipe.model.model_id})
        problems.append(Problem("error", "other-model", f"This recipe ({ctx.recipe_id}) serves {', '.join(served)}; "
                                                        f"the commands serve {_short(models[0], 80)}."))
        return ImportReport(ctx.recipe_id, tuple(problems), reading.commands)
    layouts = {i: lay for i in serve if (lay := layout_of(reading.commands[i])) is not None}
    findings = {i: check_pasted(reading.commands[i]) for i in serve}
    head = next((layouts[i] for i in serve if i in layouts), None)
    docker = any(reading.commands[i].wrapper == "docker" for i in serve)
    base: dict[str, str] = {"variant": variant} if variant != "default" else {}
    if docker:
        base["install"] = "docker"
    roles = {lay.role for lay in layouts.values() if lay.role}

    # Each plan's key: (differences, 1 if the plan has an error): fewer
    # differences first; of as close plans, one that runs.
    plans: dict[str, tuple[tuple[float, int], dict]] = {}

    def evaluate(query: str) -> tuple[tuple[float, int], dict]:
        if query not in plans:
            plan = compose(ctx, query, every_form=False)
            s = score(reading, plan) + (100 if plan["selection"].get("variant") not in variants else 0)
            plans[query] = ((s, int(plan["status"] == "error")), plan)
        return plans[query]

    def q(**vals) -> str:
        return parse_query({**base, **{k: str(v) for k, v in vals.items() if v is not None}}).query()

    from composer.api import compose_page
    page = compose_page(ctx, q(hardware=hardware))
    # Disabled options too: the pasted commands may be a plan the page disables
    # (one vLLM would refuse, e.g. a context the KV cache cannot hold); the
    # ranking puts a plan that runs first among equally close ones.
    hw_ids = [o["id"] for o in page["options"].get("hardware", ())] or [None]
    if hardware:
        hw_ids = [hardware] if hardware in hw_ids else hw_ids
    strategies = [o["id"] for o in page["options"].get("strategy", ())] or [None]
    nodes = head.nodes if head and not roles else None
    pools = _pool_params(reading, layouts) if roles else {}
    hint_hw = _hint_hardware(hint)
    default_hw = evaluate(q())[1]["selection"]["hardware"]
    gpus = head.gpus_per_node if head else None

    def rank(query: str):
        s, plan = evaluate(query)
        hw = plan["selection"]["hardware"]
        per_node = ctx.hw(hw).gpu_count
        return (s, hw != hint_hw, hw != default_hw, per_node != gpus, hw_ids.index(hw) if hw in hw_ids else 99)

    # The strategy on the likeliest hardware (asked, the page's, the
    # recipe's default), then that strategy on every hardware.
    first_hw = hardware or (hint_hw if hint_hw in hw_ids else None)
    shapes = [{"strategy": sid, "nodes": nodes} for sid in strategies] + \
        ([{"strategy": sid, **pools} for sid in strategies] if pools else []) + [{}]
    shape = min(shapes, key=lambda sh: rank(q(hardware=first_hw, **sh)))
    best = min([q(hardware=hw, **shape) for hw in hw_ids] + [q(hardware=first_hw, **shape)]
               + [q(hardware=first_hw, variant=v, **shape) for v in variants[1:]], key=rank)
    seen = {evaluate(best)[1]["share_url"]}
    sideways = 0
    found = best  # the closest plan so far: a sideways step that leads nowhere is undone
    for _ in range(MAX_STEPS):
        cur = evaluate(best)
        if cur[0] == (0, 0):
            break
        page = compose_page(ctx, best)
        # A checked box's query turns it off, so selected options count too.
        tried = [o["query"] for items in page["options"].values() for o in items]
        if nodes:
            # A choice may reset the node count (its dimension's ``resets``,
            # composer.dimensions): try it at the pasted count too.
            tried += [parse_query(t).with_values(nodes=str(nodes)).query() for t in tried if "nodes=" not in t]
        if hardware:
            tried = [t for t in tried if f"hardware={hardware}" in t or "hardware=" not in t]
        better = min(tried, key=lambda t: evaluate(t)[0], default=None)
        if better is None or evaluate(better)[0] >= cur[0]:
            # Every choice of this plan on another hardware: a feature the
            # first hardware cannot run may run on another.
            pinned = parse_query(cur[1]["share_url"])
            swaps = [pinned.with_values(hardware=h).query() for h in hw_ids if h and h != cur[1]["selection"]["hardware"]]
            better = min(swaps, key=lambda t: evaluate(t)[0], default=None)
        if better is None or evaluate(better)[0] >= cur[0]:
            # A plateau: one choice may need another before it shows (a
            # feature on, then its mode). Take an as-close plan not seen yet,
            # at most SIDEWAYS times.
            # Of those, the one whose differences are most often other values
            # of the same flags (a flag present with another value is nearer).
            level = [t for t in tried if evaluate(t)[0] == cur[0] and evaluate(t)[1]["share_url"] not in seen]
            if not level or sideways >= SIDEWAYS:
                break
            sideways += 1
            better = min(level, key=lambda t: sum(d.change != "value" for p in match_commands(reading, evaluate(t)[1])[0]
                                                  for d in p.differences))
        best = better
        seen.add(evaluate(best)[1]["share_url"])
        if evaluate(best)[0] < evaluate(found)[0]:
            found = best
    s, plan = evaluate(found)
    # vLLM's start-up rules again, now that the hardware (memory, platform) and the model's facts are known.
    from composer.launch import plan_targets
    from composer.model_facts import model_facts
    facts, targets = model_facts(ctx, plan["selection"].get("variant")), plan_targets(ctx, plan)
    for i in serve:
        pool = {"prefill": "prefill", "decode": "decode"}.get(layouts[i].role) if i in layouts else None
        findings[i] = check_pasted(reading.commands[i], facts, targets.get(pool) or targets.get(None))
    pairs, left_m, left_t = match_commands(reading, plan, findings)
    chosen = plan["selection"]["hardware"]
    same = sorted({p["selection"]["hardware"] for sc, p in plans.values() if sc == s} - {chosen})
    alternatives = []
    for hw in same:
        alt = next(p for sc, p in plans.values() if sc == s and p["selection"]["hardware"] == hw)
        alternatives.append((hw, alt["share_url"]))
    if hardware:
        note = f"Hardware {chosen}, as asked."
    elif same:
        note = (f"The commands do not say which GPUs they run on; {chosen} was chosen "
                + ("(the page's hardware)" if chosen == hint_hw else "(the recipe's default)" if chosen == default_hw
                   else "(by GPUs per node and the recipe's order)")
                + f"; as close: {', '.join(same)}. Pick yours.")
    else:
        note = f"The commands do not say which GPUs they run on; {chosen} is the only hardware whose plan is this close."
    if plan["status"] == "error" and not hardware:
        # Fresh user's finding: a plain `-tp 8` on the B300 page came out as an H100 plan whose weights do
        # not fit, and the report said vLLM refuses the command, without saying on what GPUs or that the
        # plan itself does not start: both are said, and that another GPU may run the same commands.
        first = next((n["message"] for n in plan["notices"] if n["level"] == "error"), "")
        note += (f" This plan does not start on {chosen}" + (f" ({first.rstrip('.')})" if first else "")
                 + f"; what vLLM refuses above is on {chosen}: on other GPUs the same commands may run.")
    return ImportReport(ctx.recipe_id, tuple(problems), reading.commands, findings, layouts, plan, pairs, left_t,
                        left_m, note, tuple(alternatives), len(plans))


def _pool_params(reading: Reading, layouts: Mapping[int, Layout]) -> dict[str, str]:
    """The P/D pool parameters the pasted commands state: per role its mode
    (DP > 1 → dep, EP → tep, else tp) and its node count (the commands of
    that role, or the first one's node count if more). One command per role,
    each given its own GPUs of a node by ``CUDA_VISIBLE_DEVICES`` (disjoint
    index lists): both pools on one node, ``0`` (``dimensions.HALF_NODE``)."""
    from composer.dimensions import HALF_NODE
    from composer.positions import device_indices

    out: dict[str, str] = {}
    lists = []
    for role in ("prefill", "decode"):
        mine = [(i, lay) for i, lay in sorted(layouts.items()) if lay.role == role]
        if not mine:
            continue
        first = mine[0][1]
        out[f"{role}_mode"] = "dep" if first.dp > 1 else ("tep" if first.ep else "tp")
        out[f"{role}_nodes"] = str(max(len(mine), first.nodes))
        env = dict(reading.commands[mine[0][0]].env)
        ids = device_indices("CUDA_VISIBLE_DEVICES", env.get("CUDA_VISIBLE_DEVICES", ""))
        lists.append(ids if len(mine) == 1 and first.nodes == 1 else None)
    if len(lists) == 2 and all(lists) and not set(lists[0] or ()) & set(lists[1] or ()):
        out.update(prefill_nodes=str(HALF_NODE), decode_nodes=str(HALF_NODE))
    return out


def _hint_hardware(hint: str | None) -> Optional[str]:
    if not hint:
        return None
    from composer.query import parse_query
    return parse_query(hint).get("hardware")


def is_option(word: str) -> bool:
    """Whether a pasted word is an option (``--x``, ``-x``), not a value."""
    return is_flag_token(word)
