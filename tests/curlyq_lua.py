"""curlyq's own Lua scripts, found by reading its Go source in ``../shared/go``.

curlyq names each script where it loads it: ``ackJobScript := loadLua("/lua/ack_job.lua")``
(consumer.go, producer.go), and compiles the files of its ``lua/`` directory in. The
scripts are read from there at test time, never copied into this repository, so the
oracle is always the code curlyq runs. Where the tree is missing the tests skip, saying
so, unless ``GQ_REQUIRE_INTEROP=1`` (as tests/interop/golang.py does for the Go build).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from tests.interop.golang import CURLYQ, shared_go_tree, unavailable

_LOAD = re.compile(r'(\w+)Script\s*:=\s*loadLua\("/(lua/[\w.]+\.lua)"\)')


def curlyq_dir() -> Path:
    return shared_go_tree() / CURLYQ


def script_sources(tree: Path | None = None) -> dict[str, str]:
    """Each script curlyq loads, by the Go name it gives it (``ackJob``), as its text."""
    root = tree or curlyq_dir()
    if not root.is_dir():
        unavailable(f"the curlyq source tree is missing: {root} (set GQ_SHARED_DIR)")
    found = {}
    for go_file in sorted(root.glob("*.go")):
        for name, path in _LOAD.findall(go_file.read_text(encoding="utf-8")):
            found[name] = (root / path).read_text(encoding="utf-8")
    if not found:
        unavailable(f"no loadLua(...) call found in {root}/*.go: has curlyq's layout changed?")
    return found


@dataclass
class CurlyqScripts:
    """curlyq's scripts registered on one client; ``run("ackJob", keys, args)``."""

    client: redis.Redis
    sources: dict[str, str]

    def __post_init__(self) -> None:
        self._scripts = {n: self.client.register_script(s) for n, s in self.sources.items()}

    def run(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        return self._scripts[name](keys=list(keys), args=list(args))
