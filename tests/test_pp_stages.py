"""Issue 19: under pipeline parallelism the KV pool is bounded by the stage
whose block holds the most pages, as vLLM 0.33.0 lays it out.

vLLM's own functions, taken from the pinned wheel's source and run as written
(their modules cannot be imported without torch): ``get_pp_indices``
(``vllm/distributed/utils.py``) splits the layers into stages, and
``_get_kv_cache_groups_uniform_page_size`` (``vllm/v1/core/kv_cache_planning.py``)
deals each kind's layers into the KV cache groups. A stage's block is the
pages of its fullest projected group; every stage takes the smallest stage's
block count. ``composer.memory.pp_stage_layers`` must give the same layers per
block, group counts and per-stage maxima for every model with facts and every
PP size a plan can use.
"""

from __future__ import annotations

import ast
import logging
import math
import textwrap
import zipfile
from collections import defaultdict
from functools import lru_cache
from typing import Any

from composer.memory import kv_geometry_of, pp_partitions, pp_stage_layers
from composer.model_facts import MODELS, facts_for

UTILS, PLANNING = "vllm/distributed/utils.py", "vllm/v1/core/kv_cache_planning.py"


def _function(source: str, name: str) -> str:
    tree = ast.parse(source)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    return textwrap.dedent(ast.get_source_segment(source, fn))


@lru_cache(maxsize=1)
def vllm_functions() -> dict[str, Any]:
    """``get_pp_indices`` and ``_get_kv_cache_groups_uniform_page_size`` of the
    pinned wheel, compiled with the names they use (``envs`` without
    ``VLLM_PP_LAYER_PARTITION``; a group spec factory that returns the layer
    lists)."""
    from composer.buildtime import vllm_cli_gen

    wheel = vllm_cli_gen.fetch("vllm", vllm_cli_gen.VLLM_VERSION)
    with zipfile.ZipFile(wheel) as zf:
        utils, planning = zf.read(UTILS).decode(), zf.read(PLANNING).decode()

    class Envs:
        VLLM_PP_LAYER_PARTITION = None

    scope: dict[str, Any] = {
        "envs": Envs, "logger": logging.getLogger("vllm"), "defaultdict": defaultdict,
        "cdiv": lambda a, b: -(-a // b), "KVCacheSpec": object, "KVCacheGroupSpec": object,
        "create_kv_cache_group_specs": lambda spec, grouped: grouped,
    }
    exec(compile(_function(utils, "get_pp_indices"), f"{wheel.name}/{UTILS}", "exec"), scope)
    exec(compile(_function(planning, "_get_kv_cache_groups_uniform_page_size"), f"{wheel.name}/{PLANNING}", "exec"),
         scope)
    return scope


class Spec:
    """A KV cache spec of one kind: specs of different kinds do not merge
    (vLLM raises), as full attention, sliding window and Mamba specs do not."""

    def __init__(self, kind: str):
        self.kind = kind

    def __hash__(self) -> int:
        return hash(self.kind)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Spec) and other.kind == self.kind

    @classmethod
    def merge(cls, specs: list["Spec"]) -> "Spec":
        if len({s.kind for s in specs}) != 1:
            raise ValueError("different kinds")
        return specs[0]


def vllm_stages(sequence: tuple[str, ...], pp: int) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    """What vLLM computes for ``sequence`` split over ``pp`` stages, in
    ``pp_stage_layers``' shape."""
    fns = vllm_functions()
    spec = {f"layers.{i}": Spec(k) for i, k in enumerate(sequence) if k}
    grouped = fns["_get_kv_cache_groups_uniform_page_size"](spec)
    kinds = ("full", "sliding", "linear")
    counts = tuple(sum(1 for g in grouped if spec[g[0]].kind == k) for k in kinds)
    most, page = [0, 0, 0], 0
    for rank in range(pp):
        lo, hi = fns["get_pp_indices"](len(sequence), rank, pp)
        mine = {f"layers.{i}" for i in range(lo, hi)}
        for j, k in enumerate(kinds):
            most[j] = max(most[j], sum(1 for name in mine if name in spec and spec[name].kind == k))
        page = max([page] + [sum(1 for name in g if name in mine) for g in grouped])
    return (most[0], most[1], most[2]), counts, max(1, page)


def test_every_model_with_facts():
    """Every model of our data (K3's MLA/KDA, Qwen3-Next's Gated DeltaNet
    interval, gpt-oss's sliding layer types, dense models) at PP 2 to 8."""
    seqs = {m: facts_for(m).layer_sequence() for m in MODELS}
    assert {"moonshotai/Kimi-K3", "Qwen/Qwen3-Next-80B-A3B-Instruct", "openai/gpt-oss-120b"} <= {m for m, s in seqs.items() if s}
    kinds = {frozenset(k for k in s if k) for s in seqs.values() if s}
    assert {frozenset({"full", "linear"}), frozenset({"full", "sliding"}), frozenset({"full"})} <= kinds
    for model, seq in seqs.items():
        if seq:
            check(model, seq)


def check(model: str, seq: tuple[str, ...]) -> None:
    for pp in (2, 3, 4, 5, 6, 7, 8):
        assert pp_stage_layers(seq, pp) == vllm_stages(seq, pp), (model, pp)
        assert pp_partitions(len(seq), pp) == [b - a for a, b in (vllm_functions()["get_pp_indices"](len(seq), r, pp)
                                                                    for r in range(pp))]


def test_partitions_of_every_remainder():
    for layers in range(1, 130):
        for pp in range(1, 9):
            want = [b - a for a, b in (vllm_functions()["get_pp_indices"](layers, r, pp) for r in range(pp))]
            assert pp_partitions(layers, pp) == want, (layers, pp)


def test_uncounted_layers_keep_their_place():
    """A kind that is not counted (unknown linear state) still takes its
    place in the stage split."""
    seq = ("linear", "linear", "linear", "full") * 6
    dropped = tuple("" if k == "linear" else k for k in seq)
    assert pp_stage_layers(dropped, 4) == vllm_stages(dropped, 4)


def test_k3_tp_pp_is_bounded_by_its_last_stage():
    """Kimi K3 (93 layers: MLA at 3, 7, …, 91 and 92): PP 3 gives 31 layers a
    stage, the last holds 9 of the 24 MLA layers, so a block is 9 pages, not
    the 8 an even split of the MLA layers would give: 8/9 of the tokens."""
    f = facts_for("moonshotai/Kimi-K3")
    geo = kv_geometry_of(f, 16, 3, None, None)
    assert geo.full == 9 and geo.page_layers == 9 and geo.groups == (1, 0, 3)
    even = kv_geometry_of(f, 16, 1, None, None)
    kv = 40.0
    assert geo.num_blocks(kv) == math.floor(kv * 2**30 // (geo.block * geo.token_bytes * 9))
    assert geo.block == even.block and even.page_layers is None and even._groups()[0] == 24
    assert abs(geo.num_blocks(kv) - even.num_blocks(kv) * 24 / 9) <= 3


def test_the_launch_rule_charges_what_vllm_charges_per_stage():
    """``kv-cache-holds-one-sequence`` under PP: vLLM's
    ``_max_memory_usage_bytes_from_groups`` (kv_cache_planning.py:1253-1285)
    charges the stage's bytes per block (its fullest projected group, from
    vLLM's own split above) times the blocks a request takes over every group
    (K3: 1 MLA group of cdiv(1024, block) blocks, the block widened to hold a
    KDA state, and 3 KDA groups of one state block each) — not the most layers of each kind times their tokens."""
    from composer.launch import kv_bytes_one_sequence, parse_serve

    f = facts_for("moonshotai/Kimi-K3")
    s = parse_serve(["vllm", "serve", "moonshotai/Kimi-K3", "-tp", "16", "-pp", "3"])
    need, left = kv_bytes_one_sequence(s, f, 1024, 8192)
    geo = kv_geometry_of(f, 16, 3, None, 16)
    page = vllm_stages(f.layer_sequence(), 3)[2]
    assert geo.block > 16 and page == 9
    assert need == (-(-1024 // geo.block) + 3) * geo.block * geo.token_bytes * page and left == ""


def test_hostile_layouts_are_unknown_or_bounded():
    """A stranger's recipe or a pasted command (adversarial findings): a layer
    count past any model's is unknown, never per-layer work; a PP larger
    than the layer count leaves one layer a stage; layer_types that are not
    one kind per layer, and a sliding window that is not a positive integer,
    are unknown, never a crash or a miscount."""
    from composer.model_facts import MAX_LAYERS, ModelFacts

    def facts(**v):
        return ModelFacts("x/y", v)

    base = {"num_attention_heads": 8, "num_key_value_heads": 8, "head_dim": 64}
    assert facts(num_hidden_layers=MAX_LAYERS + 1, **base).layer_sequence() is None
    assert kv_geometry_of(facts(num_hidden_layers=10**8, **base), 8, 1, None, None) is None
    assert facts(num_hidden_layers=True, **base).layer_sequence() is None
    k3 = facts_for("moonshotai/Kimi-K3")
    huge = kv_geometry_of(k3, 16, 10**6, None, None)
    assert (huge.full, huge.linear, huge.page_layers) == (1, 1, 1)
    for types in (5, "full_attention", ["full_attention"], [1, 2]):
        assert facts(num_hidden_layers=2, layer_types=types, **base).layer_sequence() is None, types
    assert facts(num_hidden_layers=2, layer_types=["sliding_attention", "full_attention", "x"],
                 **base).layer_sequence() == ("sliding", "full")
    for window in ("abc", -5, 0, True):
        f = facts(num_hidden_layers=2, sliding_window=window, **base)
        assert f.layer_sequence() == ("full", "full"), window
        assert kv_geometry_of(f, 1, 1, None, None).window == 0


def test_the_geometry_memo_is_bounded():
    """``ModelFacts.derived`` holds at most its bound however many TP sizes
    pasted commands ask for."""
    from composer.cache import BOUNDS

    f = facts_for("moonshotai/Kimi-K3")
    for tp in range(1, BOUNDS["model-derived"] + 300):
        kv_geometry_of(f, tp, 1, None, None)
    assert len(f.derived._data) == BOUNDS["model-derived"]
