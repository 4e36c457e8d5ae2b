"""The README's Layout section names every module of the composer (issue 17.6)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_layout_names_every_module():
    text = ROOT.joinpath("README.md").read_text()
    layout = text[text.index("## Layout"):]
    layout = layout[:layout.index("\n## ", 5)] if "\n## " in layout[5:] else layout
    missing = [p.relative_to(ROOT / "composer").as_posix() for p in sorted((ROOT / "composer").rglob("*.py"))
               if "__pycache__" not in p.parts and p.name != "__init__.py"
               and f"`{p.name}`" not in layout and f"`{p.relative_to(ROOT / 'composer').as_posix()}`" not in layout]
    assert not missing, f"README Layout does not name: {missing}"
