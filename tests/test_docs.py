"""The documentation site (docs/mkdocs.yml, pages in docs/pages/) builds with ``mkdocs build
--strict``: every link, anchor and API reference (mkdocstrings) resolves, and every page is in
the navigation. Needs the ``docs`` extra; nothing is installed here."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "docs" / "mkdocs.yml"
#: What the build imports: mkdocs, the material theme, mkdocstrings and its python handler.
BUILD_MODULES = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")


def _missing() -> list[str]:
    missing = []
    for module in BUILD_MODULES:
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # a dotted name whose parent is missing
            found = False
        if not found:
            missing.append(module)
    return missing


def test_the_site_builds_strict(tmp_path: Path) -> None:
    """``mkdocs build --strict``, as .ci/run runs it, into a scratch directory (never into the
    repository)."""
    missing = _missing()
    if missing:
        pytest.skip(f"the docs extra is not installed ({', '.join(missing)}): "
                    "pip install -e '.[docs]'")
    site = tmp_path / "site"
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(CONFIG), "-d", str(site)],
        capture_output=True, text=True, timeout=300, check=False, cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert out.returncode == 0, out.stdout + out.stderr
    assert (site / "index.html").is_file()
    assert (site / "api" / "queues" / "index.html").is_file()  # the generated reference


def test_the_readme_names_every_page_and_only_pages_that_exist() -> None:
    """The README links to the docs by naming their paths (an index renders it with no
    repository around it: tests/test_packaging.py): each path it names exists, and it names
    every page of the guide."""
    readme = (ROOT / "README.md").read_text("utf-8")
    named = set(re.findall(r"`(docs/pages/[\w/.-]*)`", readme))
    assert named
    assert [n for n in named if not (ROOT / n).exists()] == []
    pages = {f"docs/pages/{p.name}" for p in (ROOT / "docs" / "pages").glob("*.md")}
    assert pages - {"docs/pages/index.md"} <= named, sorted(pages - named)
