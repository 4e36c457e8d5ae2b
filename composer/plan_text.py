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
                line = comment(f"#   {f['flag']}{' ' + f['value'] if f['value'] is not None else ''}  <- {f['layer']}: {f['key']}")
                for r in f["replaced"]:
                    line += "  " + comment(f"(replaced {r['value']} from {r['layer']}: {r['key']})")
                out.append(line)  # comment() keeps every explain line one line
                if f.get("why"):
                    out.append(comment(f"#       the recipe says: {f['why']}"))
            for e in c["env_provenance"]:
                line = comment(f"#   {e['name']}={e['value']}  <- {e['layer']}: {e['key']}")
                for r in e["replaced"]:
                    line += "  " + comment(f"(replaced {r['value']} from {r['layer']}: {r['key']})")
                out.append(line)  # comment() keeps every explain line one line
                if e.get("why"):
                    out.append(comment(f"#       the recipe says: {e['why']}"))
    return "\n".join(out)
