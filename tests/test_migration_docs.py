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


SIDE_BY_SIDE = "\n## Results, workflows and rate limits, side by side\n"


def workflow_side(page: Path) -> list[tuple[str, str]]:
    """The fenced blocks from the gq paragraph of the side-by-side section on."""
    text = page.read_text()
    section = text[text.index(SIDE_BY_SIDE) :]
    return [(m[1], m[2]) for m in BLOCK.finditer(section[section.index("\ngq (") :])]


def test_every_page_shows_the_peers_results_canvas_and_limits_next_to_the_same_gq() -> None:
    sides = [workflow_side(page) for page in PAGES]
    assert all(side == sides[0] for side in sides)
    for page, peer in zip(PAGES, ("Celery", "RQ", "Dramatiq")):
        text = page.read_text()
        assert f"# images.py ({peer})" in text[text.index(SIDE_BY_SIDE) :]
        assert "not in this release" not in text and "results yet" not in text
        assert "SPEC" not in text and "section 1" not in text


def test_the_gq_results_and_workflows_of_the_pages_give_the_values_they_show() -> None:
    import gq
    from gq import testing

    [(_, module), (_, use), (lang, _)] = workflow_side(PAGES[0])
    assert lang == "sh"
    space: dict[str, object] = {}
    exec(compile(module, "images.py", "exec"), space)  # noqa: S102 - the page's own code
    with testing.eager(space["app"]):  # type: ignore[arg-type]
        exec(compile(use, "use", "exec"), space)  # noqa: S102
        shown = re.findall(r'# "([^"]+)"', use)
        got = [space[name].get(timeout=10) for name in ("r", "c", "g")]  # type: ignore[attr-defined]
    assert [str(value) for value in got] == shown
    assert space["gq"] is gq
