"""The Docker form: each command in the vLLM container (``docker run``), host
networking for multi-node and P/D (``composer.run_forms.docker_argv``)."""

from __future__ import annotations

from composer.forms import OutputForm

FORM: OutputForm = OutputForm(
    id="docker", label="Docker",
    describe=lambda image: f"Run each command in the {image} container." if image else "",
    needs_image=True, vllm_from="image",
    command_text=lambda cmd: cmd.docker_text or cmd.pip_text,
)
