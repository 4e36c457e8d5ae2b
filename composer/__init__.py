"""The vLLM recipe composer: recipe + catalogue + selection → launch commands.

Pure logic, no I/O: the same code runs in CPython (CLI, build, tests) and in the
browser under Pyodide. ``composer.buildtime.loader`` (YAML files) is the only module that
reads the file system and is not imported here.
"""

from composer.api import compose, compose_page, make_context

__all__ = ["compose", "compose_page", "make_context"]
