"""mypy sees a Task's parameters and return type (ParamSpec): wrong arguments to
enqueue are errors, and enqueue returns a Result of the function's return type."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SAMPLE = Path(__file__).parent / "typing" / "tasks_sample.py"


@pytest.mark.timeout(120)
def test_mypy_checks_task_calls() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--follow-imports",
         "silent", str(SAMPLE)],
        capture_output=True, text=True, cwd=SAMPLE.parents[2], timeout=110,
    )  # fmt: skip
    lines = result.stdout.splitlines()
    notes = [line.split("Revealed type is ", 1)[1] for line in lines if "Revealed type" in line]
    # (mypy >= 1.11 writes builtins without their module)
    notes = [note.replace("builtins.", "") for note in notes]
    assert notes == [
        '"gq.tasks.results.Result[int]"',
        '"int"',
        '"int"',
        '"gq.tasks.results.Result[int]"',
    ], result.stdout
    errors = [line for line in lines if ": error:" in line]
    rejected = {int(line.split(":")[1]) for line in errors}
    source = SAMPLE.read_text().splitlines()
    expected = {i + 1 for i, text in enumerate(source) if "# E: rejected" in text}
    assert rejected == expected, result.stdout
    assert any('"enqueue" of "Task"' in line and '"int"' in line for line in errors), errors
