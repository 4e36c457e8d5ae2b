"""The plan as one text: what ``python -m composer RECIPE --query …`` prints
and what the page's "Copy all" copies (with the values the reader gave the
placeholders put in, app.js), so the two are the same text."""

from __future__ import annotations

from composer.shell import comment


def plan_text(plan: dict, explain: bool = False) -> str:
    """What a person copies, in the order to run it, as one text: a header
    (the recipe's title and the plan's summary, its notices and capacity as
    comments), the install steps (an optional dependency as a comment, with
    its note), the companion processes (LMCache server, Mooncake master,
    config files), then per command a ``# --- label (role) ---`` line and its
    text (the router's installs it first, as its tab does); with ``explain``,
    each flag's provenance under it. ``plan`` is the plan dict
    (``composer.outputs.to_json``). What ``python -m composer`` prints and
    what the page's Copy all copies (``composer.render.plan_json`` sends it as
    ``text``), placeholders as written (``$HEAD_NODE``)."""
    out = [f"# {comment(plan['recipe']['title'])}: {comment(plan['summary'])}"]
    for n in plan["notices"]:
        out.append(f"# [{n['level']}] {comment(n['message'])}")
    for c in plan["capacity"]:
        out.append(f"# capacity: {comment(c['message'])}")
        if c.get("total"):
            out.append(f"# capacity: {comment(c['total'])}")
    cmds = plan["commands"] or plan["blocked_commands"]
    if not plan["commands"]:
        out.append("# The plan has errors; the commands below are NOT expected to work.")
    inst = plan["install"]
    first = inst["docker"] if plan["selection"].get("install") == "docker" and inst["docker"] else inst["pip"]
    steps = [f"# {comment(n)}" for n in inst["notes"]] + ([first] if first else [])
    for d in inst.get("dependencies", ()):
        note = d.get("note") or ""
        why = note if not d.get("optional") or note.lower().startswith("optional") else f"optional: {note}".rstrip(": ")
        if why:
            steps.append(f"# {comment(why)}")
        # An optional step stays a comment line by line: folding its continuation
        # lines into one would leave a stray "\\ " in the middle of the words.
        steps.append("\n".join("# " + comment(line) for line in d["command"].splitlines())
                     if d.get("optional") else d["command"])
    steps += list(inst["extras"])
    if steps:
        out += ["", "# --- Install (every node) ---", *steps]
    # Companions first: they must run before the vLLM commands that use them.
    for c in plan["companions"]:
        out += ["", f"# --- {comment(c['label'])} (start first) ---", f"# {comment(c['description'])}"]
        out.append(c.get("text") or c["command"])  # its install (if any), then the command
    for c in cmds:
        out.append("")
        out.append(f"# --- {comment(c['label'])} ({c['role']}) ---")
        out.append(c["text"])  # a router's text installs it first (run_forms.tool_install)
        if explain:
            for f in c["provenance"]:
                out += _explained(f"{f['flag']}{' ' + f['value'] if f['value'] is not None else ''}", f)
            for e in c["env_provenance"]:
                out += _explained(f"{e['name']}={e['value']}", e)
    return "\n".join(out)


def _explained(setting: str, entry: dict) -> list[str]:
    """The ``--explain`` lines of one flag or variable ``setting`` (``--tp 8``,
    ``NAME=value``) from its provenance ``entry`` (``{layer, key, replaced,
    why}``, ``composer.outputs``): where it was set, what it replaced, the
    recipe's reason. ``comment()`` keeps every line one line."""
    line = comment(f"#   {setting}  <- {entry['layer']}: {entry['key']}")
    for r in entry["replaced"]:
        line += "  " + comment(f"(replaced {r['value']} from {r['layer']}: {r['key']})")
    return [line] + ([comment(f"#       the recipe says: {entry['why']}")] if entry.get("why") else [])
