"""The migration pages (docs/from-celery.md, from-rq.md, from-dramatiq.md) show the same
gq app, and it works: its module, enqueue snippet and test are taken from the pages and
the test runs with pytest in a subprocess (``requests`` replaced by a stub module that
the test itself patches, so no network and no new dependency)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_support import ROOT

PAGES = [ROOT / "docs" / f"from-{peer}.md" for peer in ("celery", "rq", "dramatiq")]
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.M | re.S)
STUB = "def post(*args, **kwargs):\n    raise RuntimeError('no network in tests')\n"


def gq_side(page: Path) -> list[tuple[str, str]]:
    """The fenced blocks under the page's "### gq" heading."""
    text = page.read_text()
    start = text.index("\n### gq\n")
    return [(m[1], m[2]) for m in BLOCK.finditer(text[start : text.index("\n## ", start)])]


def test_every_migration_page_shows_the_same_gq_app_and_is_linked_from_the_readme() -> None:
    first, *others = [gq_side(page) for page in PAGES]
    assert [lang for lang, _ in first] == ["python", "python", "sh", "python"]
    assert all(side == first for side in others)
    readme = (ROOT / "README.md").read_text()
    for page in PAGES:
        assert f"(docs/{page.name})" in readme


@pytest.mark.timeout(60)
def test_the_gq_app_of_the_pages_runs_and_its_test_passes(tmp_path: Path) -> None:
    [(_, module), (_, enqueue), _, (_, test)] = gq_side(PAGES[0])
    (tmp_path / "webhooks.py").write_text(module)
    (tmp_path / "test_webhooks.py").write_text(test)
    (tmp_path / "requests").mkdir()
    (tmp_path / "requests" / "__init__.py").write_text(STUB)
    compile(enqueue, "enqueue", "exec")  # it needs a Redis: checked for syntax here
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_webhooks.py"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
