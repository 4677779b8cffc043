"""The real curlyq, built from ``../shared/go`` into small programs the tests run.

``tests/interop/go/`` holds main packages built in GOPATH mode against the shared tree
(its README): ``producer``, ``consumer`` (can fail every k-th job, writes one JSON line
per job it handled), ``dump`` (``Q:data`` as curlyq decodes it), and on the project's
go/gqtask ``taskproducer`` and ``taskconsumer`` (gq tasks from and for Go). Go's build cache
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
PROGRAMS = ("producer", "consumer", "dump", "taskproducer", "taskconsumer")
CURLYQ = "src/github.com/mcmathja/curlyq"
GQTASK = ROOT / "go" / "gqtask"  # the project's Go package, imported as "gqtask"


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


def go_env(workdir: Path) -> tuple[str, dict[str, str]]:
    """``go`` and its environment: GOPATH mode, offline, the shared tree plus a GOPATH of
    ``workdir`` whose ``src/gqtask`` is go/gqtask (so programs import "gqtask")."""
    go = shutil.which("go")
    if go is None:
        unavailable("`go` is not installed (apt-get install -y golang-go)")
    tree = shared_go_tree()
    if not (tree / CURLYQ).is_dir():
        unavailable(f"the curlyq source tree is missing: {tree / CURLYQ} (set GQ_SHARED_DIR)")
    (workdir / "src").mkdir(parents=True, exist_ok=True)
    link = workdir / "src" / "gqtask"
    if not link.exists():
        link.symlink_to(GQTASK, target_is_directory=True)
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": f"{workdir}{os.pathsep}{tree}",
           "CGO_ENABLED": "0", "GOCACHE": str(cache_dir() / "go-build"), "GOFLAGS": "",
           "GOPROXY": "off"}  # fmt: skip
    return str(go), env


def build(out: Path) -> Path:
    """Build the programs into ``out``; return ``out``."""
    go, env = go_env(out / "gopath")
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

    def produce_task(self, queue: str, *flags: str) -> tuple[str, bytes]:
        """One task enqueued by taskproducer (go/gqtask): its id and its Data."""
        job_id, data = self._run("taskproducer", "-queue", queue, *flags).split()
        return job_id, bytes.fromhex(data)

    def task_consumer(self, workdir: Path, queue: str, *flags: str) -> GoConsumer:
        """taskconsumer: a curlyq consumer serving tasks with a gqtask.Router."""
        return GoConsumer(self, workdir, queue, flags, program="taskconsumer")

    def _run(self, program: str, *args: str) -> str:
        proc = subprocess.run([str(self.bin / program), "-addr", self.addr, *args],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert proc.returncode == 0, f"{program} failed: {proc.stderr}"
        return proc.stdout


class GoConsumer:
    """A curlyq consumer process; what it handled is read back from its JSON lines."""

    def __init__(self, tools: Curlyq, workdir: Path, queue: str, flags: Sequence[str],
                 program: str = "consumer") -> None:  # fmt: skip
        name = uuid.uuid4().hex[:6]
        self.records_path = workdir / f"go-{program}-{name}.jsonl"
        self.log_path = workdir / f"go-{program}-{name}.log"
        # A 1 s poll (curlyq's floor) so that a graceful stop does not wait out 5 s of
        # BRPOPLPUSH (taskconsumer sets it itself).
        poll = ["-poll-duration", "1s"] if program == "consumer" else []
        command = [str(tools.bin / program), "-addr", tools.addr, "-queue", queue,
                   "-out", str(self.records_path), *poll, *flags]  # fmt: skip
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)

    def records(self) -> list[dict[str, object]]:
        """One dict per job handled: id, data (bytes), attempt, failed."""
        if not self.records_path.exists():
            return []
        lines = self.records_path.read_text().splitlines()
        records = [json.loads(line) for line in lines if line.endswith("}")]
        for record in records:
            data = record.get("data") or ""
            record["data"] = bytes.fromhex(data) if "task" in record else base64.b64decode(data)
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
