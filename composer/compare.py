"""Compare two plans of one recipe (issue 20, item 5): per node and role the
argv and env as a flag-by-flag difference, per pool the capacity (GPUs, KV
cache, tokens) and the concurrency vLLM would run with, and the notices each
plan has and the other has not.

``compare_plans(ctx, a, b)`` takes two queries and returns ``Comparison``
(``to_json`` for the CLI's ``--compare`` and the page's "Compare with…").
Commands are paired by role, pool and node rank, as ``composer.importer``
pairs a pasted command with a plan's; a command's differences are the
importer's (``importer.diff_command``: the same flag identity, values read as
vLLM reads them, each with the recipe key of plan B's value). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

from composer import importer, launch


@dataclass(frozen=True)
class CommandPair:
    """One node or role in either plan: its ``label``, the index of its
    command in plan A and in plan B (None: that plan has no such command),
    both argv and env, and the differences (A read against B)."""

    label: str
    a: Optional[int]
    b: Optional[int]
    a_argv: tuple[str, ...]
    b_argv: tuple[str, ...]
    a_env: Mapping[str, str]
    b_env: Mapping[str, str]
    differences: tuple[importer.Difference, ...]


@dataclass(frozen=True)
class PoolFigures:
    """Capacity and concurrency of one pool (``deployment`` outside P/D) in
    one plan: GPUs, KV cache (GB over the pool; ``kv_gib`` per GPU, as vLLM
    logs it) and tokens (the memory model's estimate,
    ``composer.memory``; every DP rank's together), the engines (DP ranks, each scheduling its own batch; 1
    without DP), ``max_num_seqs`` in force per engine (the flag or vLLM's
    default for the GPU, ``launch.budget``; None unknown), the max-model-len in
    force, and ``full_sequences``: how many sequences of that length the KV
    cache holds at once."""

    scope: str
    where: str
    gpus: Optional[int]
    kv_gb: Optional[float]
    kv_tokens: Optional[int]
    engines: int
    max_num_seqs: Optional[int]
    max_model_len: Optional[int]
    full_sequences: Optional[int]
    kv_gib: Optional[float] = None

    @property
    def concurrency(self) -> Optional[int]:
        """Sequences decoded at once over the pool: engines × max-num-seqs."""
        return self.engines * self.max_num_seqs if self.max_num_seqs else None


@dataclass(frozen=True)
class Comparison:
    """Plans ``a`` and ``b`` (plan dicts), the command pairs, per pool the
    figures of each plan (``pools``: scope → (A's or None, B's or None)) and
    the notice messages only A / only B has."""

    a: Mapping[str, Any]
    b: Mapping[str, Any]
    commands: tuple[CommandPair, ...]
    pools: tuple[tuple[str, Optional[PoolFigures], Optional[PoolFigures]], ...]
    only_a: tuple[Mapping[str, str], ...]
    only_b: tuple[Mapping[str, str], ...]

    @property
    def differences(self) -> int:
        return sum(len(c.differences) for c in self.commands)

    def to_json(self) -> dict:
        """``{a, b, commands, pools, notices: {only_a, only_b}, differences, same}``;
        ``a``/``b``: ``summary``, ``query`` (pinned), ``status``."""
        def side(p):
            return {"summary": p["summary"], "query": p["share_url"].lstrip("?"), "status": p["status"],
                    "selection": p["selection"]}

        def figs(f: Optional[PoolFigures]):
            return None if f is None else {**f.__dict__, "concurrency": f.concurrency}

        return {
            "a": side(self.a), "b": side(self.b),
            "commands": [{"label": c.label, "a": c.a, "b": c.b, "a_argv": list(c.a_argv), "b_argv": list(c.b_argv),
                          # what each plan's tab shows and copies (quoted, env exported): pasteable
                          "a_text": _cmds(self.a)[c.a].get("text", "") if c.a is not None else "",
                          "b_text": _cmds(self.b)[c.b].get("text", "") if c.b is not None else "",
                          "a_env": dict(c.a_env), "b_env": dict(c.b_env),
                          "differences": [_row(d) for d in c.differences]} for c in self.commands],
            "pools": [{"scope": s, "a": figs(x), "b": figs(y)} for s, x, y in self.pools],
            "notices": {"only_a": list(self.only_a), "only_b": list(self.only_b)},
            "differences": self.differences,
            "same": self.differences == 0 and not self.only_a and not self.only_b
            and all(x == y for _, x, y in self.pools),
        }


def _row(d: importer.Difference) -> dict:
    """A difference as the comparison shows it: plan A's value (``a``: the
    importer's "yours"), plan B's (``b``) and where B's comes from."""
    return {"what": d.what, "name": d.name, "change": d.change, "a": d.yours, "b": d.recipe, "source": d.source,
            "note": d.cost}


def _cmds(plan) -> list[dict]:
    return list(plan.get("commands") or plan.get("blocked_commands") or ())


def _key(c: Mapping[str, Any]) -> tuple:
    return (c.get("role"), c.get("pool"), int(c.get("node_rank") or 0))


def _pasted(c: Mapping[str, Any]) -> importer.Pasted:
    argv = tuple(c.get("argv") or ())
    kind = "serve" if argv[:2] == ("vllm", "serve") else "other"
    return importer.Pasted(kind, argv, tuple((c.get("env") or {}).items()), 0)


def _figures(ctx, plan) -> dict[str, PoolFigures]:
    from composer.model_facts import model_facts

    facts = model_facts(ctx, (plan.get("selection") or {}).get("variant"))
    targets = launch.plan_targets(ctx, plan)
    out: dict[str, PoolFigures] = {}
    for cap in plan.get("capacity") or ():
        scope = cap.get("scope") or "deployment"
        pool = None if scope == "deployment" else scope
        first = next((c for c in _cmds(plan) if (c.get("pool") == pool or pool is None)
                      and list(c.get("argv") or ())[:2] == ["vllm", "serve"]), None)
        s = launch.parse_serve(first["argv"], first.get("env") or {}) if first else None
        engines, seqs, mml = 1, None, None
        if s is not None:
            engines = s.int("data-parallel-size") or 1  # each DP rank schedules its own batch
            b = launch.budget(s, facts, targets.get(pool) or targets.get(None) or launch.Target())
            seqs, mml = b.seqs, b.max_model_len
        tokens = cap.get("kv_tokens")
        # DEP: vLLM logs one DP rank's tokens, and each rank keeps its own sequences (a new user read
        # "1 of 1,048,576" for a decode pool of 16 ranks): the pool holds engines × that.
        ranks = engines if cap.get("kv_tokens_per_dp_rank") else 1
        full = ranks * (tokens // mml) if tokens and mml else None
        tokens = ranks * tokens if tokens else tokens
        out[scope] = PoolFigures(scope, str(cap.get("where", "")), cap.get("gpus"), cap.get("kv_gb"), tokens,
                                 engines, seqs, mml, full, cap.get("kv_gib"))
    return out


def compare_plans(ctx, query_a: str, query_b: str) -> Comparison:
    """The ``Comparison`` of the plans of ``query_a`` and ``query_b`` (any
    queries: each is composed as the page would; never raises)."""
    from composer.api import compose

    a = compose(ctx, query_a, every_form=False)
    b = compose(ctx, query_b, every_form=False)
    ca, cb = _cmds(a), _cmds(b)
    by_key_b = {_key(c): j for j, c in enumerate(cb)}
    used: set[int] = set()
    pairs: list[CommandPair] = []
    for i, c in enumerate(ca):
        j = by_key_b.get(_key(c))
        if j is None:
            j = next((k for k, d in enumerate(cb) if k not in used and d.get("role") == c.get("role")), None)
        if j is not None and j in used:
            j = None
        if j is not None:
            used.add(j)
            d = tuple(importer.diff_command(_pasted(c), cb[j]))
            pairs.append(CommandPair(str(cb[j].get("label", "")), i, j, tuple(c["argv"]), tuple(cb[j]["argv"]),
                                     dict(c.get("env") or {}), dict(cb[j].get("env") or {}), d))
        else:
            pairs.append(CommandPair(str(c.get("label", "")), i, None, tuple(c["argv"]), (), dict(c.get("env") or {}), {},
                                     (importer.Difference("flag", "(command)", "extra", " ".join(c["argv"][:3]), None,
                                                          "", "only plan A runs this command"),)))
    for j, c in enumerate(cb):
        if j not in used:
            pairs.append(CommandPair(str(c.get("label", "")), None, j, (), tuple(c["argv"]), {}, dict(c.get("env") or {}),
                                     (importer.Difference("flag", "(command)", "missing", None, " ".join(c["argv"][:3]),
                                                          "", "only plan B runs this command"),)))
    fa, fb = _figures(ctx, a), _figures(ctx, b)
    scopes = list(dict.fromkeys([*fa, *fb]))
    msgs_a = {n["message"] for n in a["notices"]}
    msgs_b = {n["message"] for n in b["notices"]}
    only_a = tuple({"level": n["level"], "message": n["message"]} for n in a["notices"] if n["message"] not in msgs_b)
    only_b = tuple({"level": n["level"], "message": n["message"]} for n in b["notices"] if n["message"] not in msgs_a)
    return Comparison(a, b, tuple(pairs), tuple((s, fa.get(s), fb.get(s)) for s in scopes), only_a, only_b)
