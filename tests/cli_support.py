"""Running ``gq-worker`` and ``gq`` as a user would: subprocesses, with their output in files.

Shared by tests/test_cli_*.py. A worker's stdout and stderr go to a file, never a pipe
that could fill up, and the tests wait on that file or on Redis with ``wait_until``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.helpers import RedisServer, free_port, redis_answers, stop_process, wait_until

ROOT = Path(__file__).resolve().parent.parent
WORKER = [sys.executable, "-m", "gq.cli.worker"]
ADMIN = [sys.executable, "-m", "gq.cli.admin"]
# gevent's warning when ssl was imported before it patched; no command may print it.
PATCH_WARNING = "MonkeyPatchWarning"


def env_for(
    url: str | None, queue: str | None, handler_url: str | None = None, **extra: str
) -> dict[str, str]:
    """The environment of a command: GQ_REDIS_URL / GQ_QUEUE only when given."""
    env = {k: v for k, v in os.environ.items() if k not in ("GQ_REDIS_URL", "GQ_QUEUE")}
    if url is not None:
        env["GQ_REDIS_URL"] = url
    if queue is not None:
        env["GQ_QUEUE"] = queue
    if handler_url is not None:
        env["GQ_TEST_HANDLER_URL"] = handler_url
    env.update(extra)
    return env


def run(
    command: Sequence[str],
    *args: str,
    env: dict[str, str] | None = None,
    input: bytes | None = None,
    timeout: float = 30,
) -> subprocess.CompletedProcess[str]:
    """Run a command to its end; text output."""
    result = subprocess.run(
        [*command, *args],
        cwd=ROOT,
        env=env or env_for(None, None),
        input=input,
        capture_output=True,
        timeout=timeout,
    )
    return subprocess.CompletedProcess(
        result.args,
        result.returncode,
        result.stdout.decode(errors="replace"),
        result.stderr.decode(errors="replace"),
    )


def log_lines(text: str) -> list[str]:
    """The lines of ``text``; gevent's MonkeyPatchWarning among them fails the test."""
    assert PATCH_WARNING not in text, text
    return text.splitlines()


class Worker:
    """A ``gq-worker`` subprocess whose output goes to a file."""

    def __init__(self, tmp_path: Path, *args: str, env: dict[str, str]) -> None:
        self.path = tmp_path / f"worker-{uuid.uuid4().hex[:6]}.log"
        with open(self.path, "wb") as out:
            self.proc = subprocess.Popen(
                [*WORKER, *args], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
            )

    @property
    def output(self) -> str:
        return self.path.read_text(errors="replace")

    def signal(self, signum: int = signal.SIGTERM) -> None:
        self.proc.send_signal(signum)

    def wait(self, timeout: float = 20) -> int:
        return self.proc.wait(timeout=timeout)

    def wait_for_output(self, text: str, timeout: float = 15) -> None:
        wait_until(
            lambda: text in self.output or self.proc.poll() is not None,
            timeout,
            message=f"{text!r} in the worker's output",
        )
        assert text in self.output, self.output

    def stop(self) -> None:
        stop_process(self.proc)


def start_password_server(
    tmp_path: Path, password: str
) -> tuple[subprocess.Popen[bytes], RedisServer]:
    """A throwaway redis-server that requires ``password``."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
    proc = subprocess.Popen(
        [
            exe,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
            "--requirepass",
            password,
        ],
        stdout=subprocess.DEVNULL,
    )
    server = RedisServer("127.0.0.1", port, password=password)
    wait_until(lambda: redis_answers(server, timeout=0.2) or proc.poll() is not None, 10)
    assert proc.poll() is None, "redis-server with --requirepass did not start"
    return proc, server


def closed_port_url() -> str:
    """A redis:// URL where nothing listens."""
    return f"redis://127.0.0.1:{free_port()}/0"
