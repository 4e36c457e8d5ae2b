"""Recipe files from strangers (issue 11): nothing in them can run code, hang
the build or escape into a shell, a script or the page; the CLI refuses what
the build refuses; the output folder is ours or refused."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

import build
from composer.api import compose, make_context
from composer.buildtime.checks import validate
from composer.buildtime.loader import RecipeLoadError, load_catalog, load_recipe
from tests import shellwords

ROOT = Path(__file__).resolve().parent.parent
K3 = "moonshotai/Kimi-K3"


def _copy(tmp_path: Path) -> Path:
    dst = tmp_path / "recipes"
    shutil.copytree(ROOT / "recipes", dst)
    return dst


def _edit(recipes: Path, edit, rid: str = K3) -> None:
    path = recipes / "models" / f"{rid}.yaml"
    data = yaml.safe_load(path.read_text())
    edit(data)
    path.write_text(yaml.safe_dump(data))


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "composer", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_env_var_name_must_be_a_shell_identifier(tmp_path):
    recipes = _copy(tmp_path)
    _edit(recipes, lambda d: d["model"].setdefault("base_env", {}).update({"X;touch canary;Y": "1"}))
    with pytest.raises(RecipeLoadError) as info:
        validate(recipes)
    assert any(e.key.startswith("model.base_env") and "shell identifier" in e.message for e in info.value.errors)
    res = _cli(K3, "--recipes", str(recipes))
    assert res.returncode == 2 and "shell identifier" in res.stderr and "canary" not in res.stdout


def test_recipe_file_name_cannot_become_a_script_link(tmp_path):
    recipes = _copy(tmp_path)
    evil = recipes / "models" / "javascript:window.__x=1;x="
    evil.mkdir()
    shutil.copy(recipes / "models" / "moonshotai" / "Kimi-K3.yaml", evil / "y.yaml")
    with pytest.raises(RecipeLoadError) as info:
        build.build(recipes, tmp_path / "out", neighbours=0, precompress=False)
    assert any("recipe id" in e.message for e in info.value.errors)
    summary = build.build(recipes, tmp_path / "out", keep_going=True, neighbours=0, precompress=False)
    assert summary["recipes"] == 3
    index = (tmp_path / "out" / "index.html").read_text() + (tmp_path / "out" / "api" / "index.json").read_text()
    assert "javascript:" not in index


def test_yaml_alias_bomb_is_refused_in_under_a_second(tmp_path):
    recipes = _copy(tmp_path)
    lines = ['a0: &a0 ["--x"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    bomb = "\n".join(lines) + "\nmeta: {title: bomb}\nmodel: {model_id: a/b, base_args: *a9}\n"
    assert len(bomb) < 700  # a few hundred bytes standing for 10^9 values
    (recipes / "models" / "moonshotai" / "Bomb.yaml").write_text(bomb)
    t = time.perf_counter()
    with pytest.raises(RecipeLoadError) as info:
        validate(recipes)
    assert time.perf_counter() - t < 5  # generous for a loaded CI machine; about 0.1 s here
    assert any(e.file.endswith("Bomb.yaml") and "aliases" in e.message for e in info.value.errors)


def test_oversized_and_irregular_files_are_refused(tmp_path):
    recipes = _copy(tmp_path)
    (recipes / "models" / "moonshotai" / "Huge.yaml").write_text("meta: {title: x}\n# " + "x" * (1024 * 1024) + "\n")
    (recipes / "models" / "moonshotai" / "Link.yaml").symlink_to(recipes / "models" / "moonshotai" / "Kimi-K3.yaml")
    with pytest.raises(RecipeLoadError) as info:
        validate(recipes)
    msgs = {e.file: e.message for e in info.value.errors}
    assert "at most" in msgs["models/moonshotai/Huge.yaml"]
    assert "not a regular file" in msgs["models/moonshotai/Link.yaml"]


@pytest.mark.parametrize("edit, words", [
    (lambda d: d["meta"].update(default_hardware="h999"), "meta.default_hardware"),
    (lambda d: d["model"]["base_args"].extend(["--gpu-memory-utilization", "1.5"]), "(0, 1]"),
    (lambda d: d.update(default_strategy="warp_drive"), "default_strategy"),
    (lambda d: d["meta"]["verified_configs"].append({"hardware": "b300", "strategy": "nope"}), "verified_configs"),
])
def test_cli_refuses_what_the_build_refuses(tmp_path, edit, words):
    recipes = _copy(tmp_path)
    _edit(recipes, edit)
    with pytest.raises(RecipeLoadError):
        build.build(recipes, tmp_path / "out", neighbours=0, precompress=False)
    res = _cli(K3, "--recipes", str(recipes))
    assert res.returncode == 2 and words in res.stderr, res.stderr


def test_unwritable_out_is_one_line(tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    res = subprocess.run([sys.executable, "build.py", "--out", str(blocker / "site")], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 1
    assert res.stderr.startswith("build failed:") and "Traceback" not in res.stderr and len(res.stderr.splitlines()) == 1


def test_a_crashed_builds_temporary_folder_is_removed(tmp_path):
    stale = tmp_path / ".build-crashed"
    stale.mkdir()
    (stale / build.SITE_MARKER).write_text("")
    foreign = tmp_path / ".build-not-ours"
    foreign.mkdir()
    build.build(ROOT / "recipes", tmp_path / "site", neighbours=0, precompress=False)
    assert not stale.exists() and foreign.exists()


# ---------------------------------------------------------------- property
HOSTILE = st.sampled_from([
    "a'b", 'a"b', "$(touch canary)", "`touch canary`", "x; touch canary", "x && touch canary", "x\ntouch canary",
    "</script><script>window.__x=1</script>", "javascript:window.__x=1", "$HOME", "\\", "a|b", "#c", "\u2028",
])


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=HOSTILE, where=st.sampled_from(["title", "label", "description", "env", "arg", "companion", "pip", "note", "image"]))
def test_hostile_text_in_any_field_stays_data(tmp_path_factory, text, where):
    recipes = _copy(tmp_path_factory.mktemp("h"))

    def edit(d):
        if where == "title":
            d["meta"]["title"] = text
        elif where == "label":
            d["features"]["tool_calling"]["label"] = text
            d["variants"]["default"]["label"] = text
        elif where == "description":
            d["meta"]["description"] = d["features"]["reasoning"]["description"] = text
        elif where == "env":
            d["model"].setdefault("base_env", {})["HOSTILE"] = text
        elif where == "arg":
            d["model"]["base_args"] += ["--served-model-name", text]
        elif where == "companion":
            d["features"]["tool_calling"]["companion"] = {"label": text, "command": f"helper --flag {shlex.quote(text)} {text}"}
        elif where == "pip":
            d["model"]["install"] = {"pip": {"command": f"uv pip install vllm {text}"}, "docker": {"note": text}}
        elif where == "image":
            d["model"]["docker_image"] = text

    _edit(recipes, edit)
    try:
        recipe = load_recipe(recipes, K3)
    except RecipeLoadError:
        return  # refused with a reason: fine
    ctx = make_context(K3, recipe, load_catalog(recipes))
    for query in ("", "install=docker", "hardware=h200&strategy=multi_node_tp&install=k8s"):
        try:
            plan = compose(ctx, query)
        except ValueError:
            return  # e.g. a companion command that is not shell words: refused
        if plan["kubernetes"]["yaml"]:  # the manifests hold the text as data and still run the plan's argv
            from tests.test_k8s import check_manifests

            check_manifests(plan)
        for c in plan["commands"] or plan["blocked_commands"]:
            assert shellwords.split(c["command"]) == c["argv"]
            if c.get("docker_text"):
                assert shellwords.split(c["docker_text"]) == c["docker_argv"]
            # The script: comments stay comments, the command is the command.
            code = [ln for ln in c["script"].splitlines() if ln and not ln.startswith("#")]
            assert "touch canary" not in "\n".join(code).replace("'", "").split("set -euo pipefail")[0]
        ours = "uv venv --python 3.12 && source .venv/bin/activate\n"  # the composer's own first pip line
        texts = [x["command"] for x in plan["companions"]] + [(plan["install"]["pip"] or "").removeprefix(ours)]
        for t in texts:
            code = "\n".join(line for line in t.splitlines() if not line.lstrip().startswith("#"))
            outside = _outside_single_quotes(code)
            assert not set(";&|`") & set(outside) and "$(" not in outside, t


def _outside_single_quotes(text: str) -> str:
    """What a shell would still interpret: everything outside quotes, and
    inside double quotes the command substitutions (``$(`` and backticks)."""
    out, state, i = [], None, 0
    while i < len(text):
        ch = text[i]
        if state is None:
            if ch in "'\"":
                state = ch
            elif ch == "\\":
                i += 2
                continue
            else:
                out.append(ch)
        elif state == "'":
            if ch == "'":
                state = None
        else:  # inside double quotes
            if ch == "\\":
                i += 2
                continue
            if ch == '"':
                state = None
            elif ch == "`" or (ch == "$" and text[i + 1:i + 2] == "("):
                out.append(ch + text[i + 1:i + 2])
        i += 1
    return "".join(out)


# -------------------------------------- found by the adversarial pass (issue 11)
def _plan_of(recipes: Path, query: str = "", rid: str = K3) -> dict:
    return compose(make_context(rid, load_recipe(recipes, rid), load_catalog(recipes)), query)


def test_install_lines_quote_recipe_versions_and_images(tmp_path):
    recipes = _copy(tmp_path)
    _edit(recipes, lambda d: d["model"].update(min_vllm_version="0.1'; touch canary; echo '",
                                               docker_image="vllm/x:1; touch canary"))
    p = _plan_of(recipes, "hardware=h200")
    assert p["install"]["docker"] is None  # an image that is no image reference never reaches a command (issue 23)
    assert "touch" not in _outside_single_quotes(p["install"]["pip"])
    with pytest.raises(RecipeLoadError) as info:
        validate(recipes)
    assert any(e.key == "model.docker_image" and "not a container image reference" in e.message
               for e in info.value.errors)


def test_explain_lines_stay_comments(tmp_path):
    recipes = _copy(tmp_path)
    _edit(recipes, lambda d: (d["model"]["base_args"].extend(["--served-model-name", "x\ntouch canary\n#"]),
                              d["model"].setdefault("base_env", {}).update(FOO="a\ntouch canary\n#")))
    res = _cli(K3, "--recipes", str(recipes), "--query", "hardware=h200", "--explain")
    assert res.returncode in (0, 1), res.stderr
    # Paste the whole output into bash (vllm stubbed out): nothing may run.
    work = tmp_path / "paste"
    work.mkdir()
    subprocess.run(["bash", "-c", "vllm() { :; }\n" + res.stdout], cwd=work, capture_output=True, timeout=30)
    assert not (work / "canary").exists()


def test_history_expansion_never_reaches_a_double_quoted_value():
    from composer.shell import quote

    q = quote("$HOME!^")
    assert '!' not in _outside_single_quotes(q.replace("'!'", ""))
    assert shlex.split(q) == ["$HOME!^"]


def test_hash_inside_a_word_is_not_a_comment():
    from composer.shell import recipe_command

    text = recipe_command("uv pip install git+https://x/repo.git#subdirectory=py --extra-index-url https://x/simple # note")
    assert shlex.split(text.replace("\\\n", " ")) == ["uv", "pip", "install", "git+https://x/repo.git#subdirectory=py",
                                                      "--extra-index-url", "https://x/simple"]


@pytest.mark.parametrize("args", [
    ["--max-num-seqs", "64", "--compilation-config", '{"cudagraph_capture_sizes": [1, "a"]}'],
    ["--speculative-config", '{"model": "x", "num_speculative_tokens": Infinity}'],
])
def test_odd_values_never_crash_the_composer(tmp_path, args):
    recipes = _copy(tmp_path)
    _edit(recipes, lambda d: d["model"]["base_args"].extend(args))
    res = _cli(K3, "--recipes", str(recipes), "--query", "hardware=b300")
    assert res.returncode in (0, 1) and "Traceback" not in res.stderr, res.stderr


def test_deep_nesting_is_refused_not_a_traceback(tmp_path):
    recipes = _copy(tmp_path)
    (recipes / "models" / "moonshotai" / "Deep.yaml").write_text("meta: {title: x}\nmodel: {model_id: a/b}\nx: " + "[" * 990 + "]" * 990 + "\n")
    with pytest.raises(RecipeLoadError) as info:
        validate(recipes)
    assert any(e.file.endswith("Deep.yaml") for e in info.value.errors)


def test_headroom_below_one_is_refused(tmp_path):
    recipes = _copy(tmp_path)
    _edit(recipes, lambda d: d["variants"]["default"].update(headroom=-1))
    with pytest.raises(RecipeLoadError) as info:
        validate(recipes)
    assert any("headroom" in e.key for e in info.value.errors)


def test_linked_folders_are_not_read(tmp_path):
    recipes = _copy(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.copy(recipes / "models" / "moonshotai" / "Kimi-K3.yaml", outside / "Leak.yaml")
    (recipes / "models" / "linked").symlink_to(outside)
    with pytest.raises(RecipeLoadError) as info:
        validate(recipes)
    assert any("linked folder" in e.message for e in info.value.errors)


# Found by the adversarial pass (issue 12 round): Python's "$" also matches
# before a trailing newline, so "$NAME\n" passed as a bare placeholder and
# ended the command early; every anchored check now uses \Z.
@pytest.mark.parametrize("value", ["$EXTRA_WHEEL\n", "$A\n touch /tmp/x", "$A\r\n"])
def test_a_placeholder_with_a_newline_stays_one_quoted_word(value):
    from composer.shell import quote

    # bash reads the quoted word back as the value (placeholders expanded) and
    # runs nothing after it.
    out = subprocess.run(["bash", "-c", f'EXTRA_WHEEL=X A=X; printf "%s|" {quote(value)} end'],
                         capture_output=True)
    assert out.returncode == 0 and out.stdout.decode() == value.replace("$EXTRA_WHEEL", "X").replace("$A", "X") + "|end|"


@pytest.mark.parametrize("field,value", [
    ("env", "MY_VAR\n"), ("model_id", "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic\n"), ("model_id", "org/x\n"),
])
def test_names_with_a_trailing_newline_are_refused(field, value):
    import pydantic

    from composer.buildtime.validate import validate_recipe

    data = {"meta": {"title": "t"}, "model": {"model_id": "org/m"}}
    if field == "env":
        data["model"]["base_env"] = {value: "1"}
    else:
        data["model"]["model_id"] = value
    with pytest.raises(pydantic.ValidationError):
        validate_recipe(data)
