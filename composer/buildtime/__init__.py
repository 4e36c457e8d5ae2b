"""Build-time-only modules: what reads files, validates YAML with pydantic,
writes the site's routes and guide, checks recipes, and the CLI.

The browser boundary is this folder: ``build.py`` ships ``composer/`` to the
page's Python runtime without ``composer/buildtime/`` (and without
``composer/__main__.py``), so nothing here may be imported by a module outside
it (``tests/test_public_api.py`` checks that).
"""
