"""Issue 17: each idea is declared once. A throwaway URL parameter and a
throwaway output form, added through their declarations alone, show up
everywhere they are derived: the query round trip, the canonical link, the
controls and their groups, the CLI's ``--format`` list and the JSON plan."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from composer import controls, dimensions, forms, resolve
from composer.api import compose, compose_page
from composer.outputs import Artifact
from composer.query import parse_query

ROOT = Path(__file__).resolve().parent.parent


def test_derived_lists_follow_the_table():
    names = [d.name for d in dimensions.DIMENSIONS]
    assert len(names) == len(set(names))
    assert sorted(d.url_order for d in dimensions.DIMENSIONS) == list(range(len(names)))
    assert dimensions.PARAMS[0] == "v" and set(dimensions.PARAMS) == set(names)
    assert set(dimensions.DROP_ORDER) == set(names) - {"v"}
    # The controls come in the table's order, one builder per control.
    built = [dim for dim, _ in controls.BUILDERS]
    assert built == [n for n in names if n in built]
    assert {d for d, _ in resolve.STEPS} == set(names) - {"nodes", "prefill_mode", "prefill_nodes", "decode_mode", "decode_nodes"}


def test_with_values_refuses_an_unknown_key():
    req = parse_query("hardware=h200")
    with pytest.raises(KeyError, match="hardwre"):
        req.with_values(hardwre="b200")


def test_every_rendered_group_says_what_it_sets_and_resets(k3):
    page = compose_page(k3, "hardware=h200&features=spec_decoding")
    for dim in page["options"]:
        kind = page["kinds"][dim]
        assert kind["param"] in dimensions.PARAMS
    assert page["kinds"]["hardware"]["resets"].split() == ["nodes", "prefill_nodes", "decode_nodes"]
    assert page["kinds"]["features"]["control"] == "checkbox"


def test_a_throwaway_dimension_through_its_declaration(tmp_path):
    """In a copy of the package: one Dimension record, one resolver step and
    one control builder — and the parameter round-trips, is dropped from the
    canonical link when it is the default, and has its control and group."""
    pkg = tmp_path / "composer"
    shutil.copytree(ROOT / "composer", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    dims = pkg / "dimensions.py"
    text = dims.read_text().replace('    Dimension("v", "text", 0, None),',
                                    '    Dimension("region", "text", 17, 16, "Region", "Where the cluster runs."),\n'
                                    '    Dimension("v", "text", 0, None),')
    dims.write_text(text)
    with (pkg / "resolve.py").open("a") as f:
        f.write(textwrap.dedent('''
            def _step_region(ctx, req, d, n):
                return d
            STEPS = STEPS + (("region", _step_region),)
        '''))
    with (pkg / "controls.py").open("a") as f:
        f.write(textwrap.dedent('''
            def _region(ctx, sel, base):
                return {"region": [{"id": r, "label": r.upper(), "selected": r == (base.get("region") or "eu"),
                                    "disabled": False, "reason": None, "query": base.with_values(region=r).query()}
                                   for r in ("eu", "us")]}
            BUILDERS = BUILDERS + (("region", _region),)
        '''))
    probe = textwrap.dedent(f'''
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import composer.dimensions as d
        assert "composer" in sys.modules and sys.modules["composer"].__file__.startswith({str(tmp_path)!r})
        from composer.api import compose_page, make_context
        from composer.buildtime.loader import load_catalog, load_recipe
        from composer.query import parse_query
        from pathlib import Path
        req = parse_query("region=us&hardware=h200")
        assert not req.problems, req.problems
        assert req.query() == "hardware=h200&region=us", req.query()
        assert req.with_values(region="eu").get("region") == "eu"
        assert "region" in d.PARAMS and "region" in d.DROP_ORDER and "region" in d.CONTROLS
        ctx = make_context("moonshotai/Kimi-K3", load_recipe(Path({str(ROOT / "recipes")!r}), "moonshotai/Kimi-K3"),
                           load_catalog(Path({str(ROOT / "recipes")!r})))
        page = compose_page(ctx, "region=us")
        assert [o["id"] for o in page["options"]["region"]] == ["eu", "us"]
        assert page["groups"]["region"]["legend"] == "Region"
        assert page["kinds"]["region"]["param"] == "region"
        assert list(page["options"])[-1] == "region"
        print("ok")
    ''')
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


@pytest.fixture
def slurm_form(monkeypatch):
    """A throwaway output form entered in the registry: one file per plan."""
    def files(inp, detail):
        return (Artifact("job.sbatch", "text/x-shellscript", f"# {inp.summary}\n"),), None

    form = forms.OutputForm(id="toy", label="Toy", describe=lambda image: "A toy form.", needs_image=False,
                            vllm_from="host", command_text=lambda cmd: cmd.pip_text, files=files)
    monkeypatch.setitem(forms.FORMS, "toy", form)
    return form


def test_a_throwaway_output_form_through_the_registry(k3, slurm_form, capsys):
    plan = compose(k3, "hardware=h200&install=toy", every_form=False)
    assert plan["selection"]["install"] == "toy"
    assert plan["output"]["form"] == "toy" and plan["output"]["artifacts"][0]["file_name"] == "job.sbatch"
    assert not any(n["code"] == "invalid-install" for n in plan["notices"])
    page = compose_page(k3, "hardware=h200")
    toy = next(o for o in page["options"]["install"] if o["id"] == "toy")
    assert toy["label"] == "Toy" and not toy["disabled"] and "install=toy" in toy["query"]
    from composer.buildtime.cli import main

    assert main(["moonshotai/Kimi-K3", "--query", "hardware=h200", "--format", "toy"]) == 0
    assert capsys.readouterr().out.startswith("# 2 × H200")  # 2 nodes hold the 1M context (24 MLA layers)
    with pytest.raises(SystemExit):
        main(["moonshotai/Kimi-K3", "--format", "nope"])


def test_an_unknown_form_is_reported_with_the_registry_s_names(k3):
    plan = compose(k3, "install=slurmx", every_form=False)
    msg = next(n["message"] for n in plan["notices"] if n["code"] == "invalid-install")
    assert "pip, docker, k8s, config or slurm" in msg
