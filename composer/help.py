"""Explanations of vLLM's flags shown on demand on the page (vLLM's own help
text, from its release). The control groups' help is declared with their
dimensions (``composer.dimensions``)."""

from __future__ import annotations

def flag_help(name: str) -> str:
    """vLLM's own one-paragraph help for option ``name`` (canonical, without
    dashes; a dotted ``--x.y`` gets the help of ``--x``), from the table
    generated from the pinned vLLM release (``composer.vllm_cli``), or ""."""
    from composer import vllm_cli

    key = name.split(".", 1)[0]
    text = vllm_cli.help_text(key)
    choices = vllm_cli.OPTIONS.get(key, {}).get("choices")
    if text.endswith(":") and choices:  # the list vLLM's help leads into
        text += " " + ", ".join(str(c) for c in choices) + "."
    return text
