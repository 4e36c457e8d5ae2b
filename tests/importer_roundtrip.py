"""Round trip of the importer over the golden selections (``tests/golden.py``):
every plan's commands, as the CLI prints them (env exports + command per node
and role; ``--format docker`` text for docker plans), imported, must give an
empty difference. ``python -m tests.importer_roundtrip [--sample N]`` prints
the figures the README quotes; ``tests/test_importer.py`` runs a sample."""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from composer import importer  # noqa: E402
from composer.api import compose  # noqa: E402
from tests import golden  # noqa: E402


def command_text(plan: dict) -> str:
    """What a person copies from the page: per command its env exports and
    command (the docker form's text for ``install=docker``)."""
    docker = plan["selection"].get("install") == "docker"
    cmds = plan["commands"] or plan["blocked_commands"]
    return "\n\n".join((c.get("docker_text") if docker and c.get("docker_text") else c["pip_text"]) for c in cmds)


def roundtrip(source: str, rid: str, query: str) -> dict:
    """Import the commands of one golden selection; the figures of the result."""
    ctx = golden.context(source, rid)
    plan = compose(ctx, query, every_form=False)
    r = importer.import_commands(ctx, importer.read_text(command_text(plan)), hint=plan["share_url"])
    got = r.plan
    same_cmds = got is not None and [(c["argv"], c["env"]) for c in got["commands"] or got["blocked_commands"]] == \
        [(c["argv"], c["env"]) for c in plan["commands"] or plan["blocked_commands"]]
    return {"empty": r.plan is not None and r.differences == 0 and not r.unpasted and not r.unmatched,
            "same_commands": same_cmds, "same_selection": got is not None and got["selection"] == plan["selection"],
            "differences": r.differences, "report": r}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sample", type=int, default=0)
    args = ap.parse_args(argv)
    lines = golden.load()
    if args.sample:
        lines = random.Random(20).sample(lines, args.sample)
    n = empty = same_c = same_s = 0
    for ln in lines:
        res = roundtrip(ln["source"], ln["recipe"], ln["query"])
        n += 1
        empty += res["empty"]
        same_c += res["same_commands"]
        same_s += res["same_selection"]
        if not res["empty"]:
            print("NOT EMPTY", ln["source"], ln["recipe"], ln["query"], res["differences"], flush=True)
    print(f"{n} plans imported: {empty} empty diffs, {same_c} identical commands, {same_s} identical selections")
    return 0 if empty == n else 1


if __name__ == "__main__":
    raise SystemExit(main())
