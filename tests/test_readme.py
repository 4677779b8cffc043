"""The README's quick example runs as written: its module, its enqueue snippet, its shell
lines and its test, taken from README.md itself and run as a user would (subprocesses,
a real redis-server, a local webhook receiver). Only addresses change: the Redis URL
becomes this test's server (a database of its own) and https://example.com/hook the
local receiver."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from gq import job as jobs
from tests.cli_support import ROOT
from tests.helpers import RedisServer, stop_process, wait_until
from tests.queue_sides import BothSides

README = ROOT / "README.md"
FIRST_LINES = ["pip install -e . && gq demo", "pip install -e '.[test]' && python -m pytest"]
EXAMPLE_DB = 9  # the example's queues ("webhooks", "default") stay out of other tests' way
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.M | re.S)

pytestmark = pytest.mark.timeout(120)


def quick_example() -> list[tuple[str, str]]:
    """The fenced blocks of the README's "Quick example" section: (language, code)."""
    text = README.read_text()
    section = text[text.index("## Quick example\n") : text.index("## The byte API\n")]
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(section)]


@pytest.fixture
def example(redis_server: RedisServer, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The example's folder with webhooks.py written from the README, a receiver
    running, and the environment to run commands in."""
    url = RedisServer(redis_server.host, redis_server.port, EXAMPLE_DB,
                      redis_server.username, redis_server.password).url  # fmt: skip
    client = redis.Redis.from_url(url)
    client.flushdb()
    receiver = subprocess.Popen(
        [sys.executable, "-m", "tests.readme_hooks", str(tmp_path)], cwd=ROOT
    )
    try:
        port = wait_until(
            lambda: (tmp_path / "port").exists() and (tmp_path / "port").read_text(), 20
        )
        [(lang, module), enqueue, shell, test] = quick_example()
        assert lang == "python" and module.startswith("# webhooks.py\n")
        (tmp_path / "webhooks.py").write_text(localised(module, url, port))
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        env = {**os.environ, "PYTHONPATH": str(tmp_path), "GQ_REDIS_URL": url, "PATH": path}
        env.pop("GQ_QUEUE", None)
        yield {"dir": tmp_path, "env": env, "url": url, "port": port, "client": client,
               "enqueue": enqueue, "shell": shell, "test": test}  # fmt: skip
    finally:
        stop_process(receiver)
        client.flushdb()


def localised(code: str, url: str, port: str) -> str:
    code = code.replace("redis://localhost:6379/0", url)
    return code.replace("https://example.com/hook", f"http://127.0.0.1:{port}/hook")


def sh(
    example: dict[str, Any], command: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, shell=True, cwd=example["dir"], env=example["env"],
                          capture_output=True, text=True, timeout=timeout)  # fmt: skip


def python(example: dict[str, Any], code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=example["dir"], env=example["env"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def hits(example: dict[str, Any]) -> list[dict[str, Any]]:
    path = example["dir"] / "hits"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_the_readme_starts_with_its_two_commands() -> None:
    lines = README.read_text().splitlines()
    start = lines.index("```sh")
    assert [
        line for line in lines[start : start + 6] if not line.startswith(("#", "```"))
    ] == FIRST_LINES


def test_the_quick_example_runs_as_written(example: dict[str, Any]) -> None:
    lang, enqueue = example["enqueue"]
    assert lang == "python"
    run = python(example, localised(enqueue, example["url"], example["port"]))
    assert run.returncode == 0, run.stderr
    lang, shell = example["shell"]
    worker_line, enqueue_line, dead_line = shell.splitlines()
    queued = sh(example, localised(enqueue_line.split("  #")[0], example["url"], example["port"]))
    assert queued.returncode == 0, queued.stderr
    worker = sh(example, worker_line.split("  #")[0] + " --burst")
    assert worker.returncode == 0, worker.stderr
    assert "mail to ann@example.com: Welcome" in worker.stdout
    bodies = sorted(json.dumps(h["body"]) for h in hits(example))
    assert bodies == ['{"event": "paid"}', "{}"]  # run at once: the delayed one waits
    assert sh(example, dead_line.split("  #")[0]).returncode == 0
    lang, test = example["test"]
    tested = python(example, test)
    assert tested.returncode == 0, tested.stderr


def test_the_example_task_honours_retry_after_and_kills_a_gone_endpoint(
    example: dict[str, Any],
) -> None:
    code = (
        "from webhooks import deliver\n"
        "print(deliver.enqueue(f'http://127.0.0.1:{PORT}/later', {'n': 1}, tenant='a').id)\n"
        "print(deliver.enqueue(f'http://127.0.0.1:{PORT}/gone', {'n': 2}, tenant='a').id)\n"
    ).replace("{PORT}", example["port"])
    run = python(example, code)
    later, gone = run.stdout.split()
    worker = sh(example, "gq-worker webhooks:app --burst")
    assert worker.returncode == 0, worker.stderr
    queue = BothSides(example["client"], "webhooks")
    [(dead_id, _, message)] = queue.dead_jobs(10)
    assert dead_id == gone and message is not None
    assert jobs.decode_error(message) == "endpoint gone"
    [(retried_id, due, _)] = queue.scheduled_jobs(10)
    assert retried_id == later
    assert due - example["client"].time()[0] <= 2  # Retry-After: 1, not the backoff
