"""The Django tests run where Django 6 is installed (Python 3.12+: .ci/django makes
such a venv); elsewhere this folder's tests are not collected (not skipped: not run)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

collect_ignore_glob: list[str] = []
if sys.version_info < (3, 12) or importlib.util.find_spec("django") is None:
    collect_ignore_glob = ["test_*.py"]
else:
    # As manage.py's directory is for the project: its `project` and `shop` modules.
    sys.path.insert(0, str(Path(__file__).resolve().parent))
