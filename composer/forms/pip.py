"""The pip form: vLLM installed with pip (uv) on each node, the commands run there."""

from __future__ import annotations

from composer.forms import OutputForm

FORM: OutputForm = OutputForm(
    id="pip", label="pip",
    describe=lambda image: "Install vLLM with pip (uv) on each node and run the commands there.",
    needs_image=False, vllm_from="host",
    command_text=lambda cmd: cmd.pip_text,
)
