"""The real curlyq, built from ``../shared/go`` into small programs the tests run.

``tests/interop/go/`` holds three main packages built in GOPATH mode against the shared
tree (its README): ``producer``, ``consumer`` (can fail every k-th job, writes one JSON
line per job it handled) and ``dump`` (``Q:data`` as curlyq decodes it). Go's build cache
lives outside the repository (``GQ_INTEROP_CACHE``, else ``$XDG_CACHE_HOME/gq-interop`` or
``~/.cache/gq-interop``); the binaries go to the session's temporary directory.

Where ``go`` or the shared tree is missing the tests skip, saying which, unless
``GQ_REQUIRE_INTEROP=1`` (set by .ci/run): then they fail.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = Path(__file__).resolve().parent / "go"
PROGRAMS = ("producer", "consumer", "dump")
CURLYQ = "src/github.com/mcmathja/curlyq"


def shared_go_tree() -> Path:
    """``$GQ_SHARED_DIR/go``, by default ``../shared/go`` next to the repository."""
    shared = os.environ.get("GQ_SHARED_DIR") or str(ROOT.parent / "shared")
    return Path(shared).resolve() / "go"


def cache_dir() -> Path:
    configured = os.environ.get("GQ_INTEROP_CACHE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gq-interop"


def unavailable(reason: str) -> None:
    """Skip with ``reason``, or fail when the interop tests are required."""
    if os.environ.get("GQ_REQUIRE_INTEROP") == "1":
        pytest.fail(f"GQ_REQUIRE_INTEROP=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def build(out: Path) -> Path:
    """Build the three programs into ``out``; return ``out``."""
    go = shutil.which("go")
    if go is None:
        unavailable("`go` is not installed (apt-get install -y golang-go)")
    tree = shared_go_tree()
    if not (tree / CURLYQ).is_dir():
        unavailable(f"the curlyq source tree is missing: {tree / CURLYQ} (set GQ_SHARED_DIR)")
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": str(tree), "CGO_ENABLED": "0",
           "GOCACHE": str(cache_dir() / "go-build"), "GOFLAGS": ""}  # fmt: skip
    packages = [f"./{(SOURCES / name).relative_to(ROOT)}" for name in PROGRAMS]
    proc = subprocess.run([go, "build", "-o", f"{out}/", *packages], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    if proc.returncode != 0:
        pytest.fail(f"go build of the curlyq test programs failed:\n{proc.stderr}", pytrace=False)
    return out


@dataclass(frozen=True)
class Curlyq:
    """The built programs, pointed at one Redis (``addr`` = host:port, database 0)."""

    bin: Path
    addr: str

    def produce(self, queue: str, n: int, prefix: str, *, after: str = "") -> list[str]:
        args = ["-queue", queue, "-n", str(n), "-prefix", prefix]
        return self._run("producer", *args, *(["-after", after] if after else [])).split()

    def dump(self, queue: str) -> dict[str, dict[str, object]]:
        """Every message of ``Q:data`` as curlyq's decoder reads it, by hash field."""
        entries = [json.loads(line) for line in self._run("dump", "-queue", queue).splitlines()]
        for entry in entries:
            entry["data"] = base64.b64decode(entry.get("data") or "")
        return {str(entry["id"]): entry for entry in entries}

    def consumer(self, workdir: Path, queue: str, *flags: str) -> GoConsumer:
        return GoConsumer(self, workdir, queue, flags)

    def _run(self, program: str, *args: str) -> str:
        proc = subprocess.run([str(self.bin / program), "-addr", self.addr, *args],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert proc.returncode == 0, f"{program} failed: {proc.stderr}"
        return proc.stdout


class GoConsumer:
    """A curlyq consumer process; what it handled is read back from its JSON lines."""

    def __init__(self, tools: Curlyq, workdir: Path, queue: str, flags: Sequence[str]) -> None:
        name = uuid.uuid4().hex[:6]
        self.records_path = workdir / f"go-consumer-{name}.jsonl"
        self.log_path = workdir / f"go-consumer-{name}.log"
        # A 1 s poll (curlyq's floor) so that a graceful stop does not wait out 5 s of BRPOPLPUSH.
        command = [str(tools.bin / "consumer"), "-addr", tools.addr, "-queue", queue,
                   "-out", str(self.records_path), "-poll-duration", "1s", *flags]  # fmt: skip
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)

    def records(self) -> list[dict[str, object]]:
        """One dict per job handled: id, data (bytes), attempt, failed."""
        if not self.records_path.exists():
            return []
        lines = self.records_path.read_text().splitlines()
        records = [json.loads(line) for line in lines if line.endswith("}")]
        for record in records:
            record["data"] = base64.b64decode(record.get("data") or "")
        return records

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 20) -> int:
        """SIGTERM (curlyq's graceful stop); its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        """SIGKILL: a crash, with whatever it holds left in its in-flight set."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
