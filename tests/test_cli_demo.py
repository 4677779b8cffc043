"""``gq demo``, the README's first command: on the embedded server when no Redis answers,
on a real Redis when one does."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys

import pytest

import gq
from gq import job as jobs
from gq.cli import demo
from gq.tasks import envelope
from tests.cli_support import ADMIN, ROOT, closed_port_url, env_for, run
from tests.helpers import Backend, RedisServer
from tests.queue_sides import BothSides


def demo_keys(server: RedisServer) -> set[bytes]:
    return set(server.client().scan_iter(match="gq-demo-*"))


@pytest.mark.timeout(60)
def test_demo_runs_its_default_5000_jobs_on_the_embedded_server_without_redis() -> None:
    url = closed_port_url()
    result = run(ADMIN, "demo", env=env_for(url, None), timeout=50)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert (
        "gq demo: 5,000 jobs of task demo.simulated_io, each waiting 200 ms (simulated I/O), "
        "1,000 at once" in out
    )
    assert "backend: embedded in-process server (fakeredis://)" in out
    assert f"no Redis at {url}" in out
    assert "enqueued 5,000 jobs in" in out
    assert re.search(r"^processed 5,000 jobs in \d+\.\d\d s: [\d,]+ jobs/s$", out, re.M), out
    # The ideal: 1,000 handlers busy all the time, 200 ms a job; then how close the run came.
    assert re.search(
        r"^ideal: 5,000 jobs/s \(1,000 at once, 200 ms each: 5,000 jobs in 1\.00 s\); "
        r"this run reached \d+% of it$",
        out,
        re.M,
    ), out
    assert "ran on the embedded server, inside this process" in out
    assert "next: start Redis (redis-server) and run `gq demo` again" in out
    # Not a terminal: plain progress lines, the last one at 100%.
    progress = [line for line in result.stderr.splitlines() if line.startswith("progress:")]
    assert progress and progress[-1].startswith("progress: 5,000/5,000 jobs (100%)")
    assert "\r" not in result.stderr


def test_demo_uses_redis_when_one_answers_and_deletes_its_queue(redis_server: RedisServer) -> None:
    before = demo_keys(redis_server)
    result = run(ADMIN, "demo", "--jobs", "2000", "--concurrency", "100", "--wait", "0.01",
                 env=env_for(redis_server.url, None))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f"backend: Redis at {redis_server.url}" in result.stdout
    assert "processed 2,000 jobs" in result.stdout
    assert "ideal: 10,000 jobs/s (100 at once, 10 ms each: 2,000 jobs in 0.20 s)" in result.stdout
    assert f"ran on the Redis at {redis_server.url}" in result.stdout
    assert f"next: run tasks of your own with a worker (README.md, Quick example): " \
           f"gq-worker webhooks:app --url {redis_server.url}" in result.stdout  # fmt: skip
    assert demo_keys(redis_server) <= before


def test_the_ideal_counts_a_last_partial_wave_as_a_whole_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    demo._report(n=150, elapsed=0.5, wait=0.2, concurrency=100)  # two waves: 0.4 s at best
    assert "ideal: 375 jobs/s (100 at once, 200 ms each: 150 jobs in 0.40 s); " \
           "this run reached 80% of it" in capsys.readouterr().out  # fmt: skip


def test_demo_without_redis_or_fakeredis_says_what_to_install_and_exits_3() -> None:
    hide_fakeredis = (
        "import sys; sys.modules['fakeredis'] = None; from gq.cli.admin import main; main()"
    )
    result = run([sys.executable, "-c", hide_fakeredis], "demo", "--url", closed_port_url())
    assert result.returncode == 3
    [line] = [line for line in result.stderr.splitlines() if line.startswith("gq: error:")]
    assert "pip install 'fakeredis[lua]'" in line and "start Redis" in line


def test_demo_redraws_a_progress_bar_in_place_on_a_terminal(redis_server: RedisServer) -> None:
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [
            *ADMIN,
            "demo",
            "--url",
            redis_server.url,
            "--jobs",
            "1000",
            "--concurrency",
            "100",
            "--wait",
            "0.05",
        ],
        cwd=ROOT,
        env=env_for(None, None),
        stdout=subprocess.PIPE,
        stderr=slave,
    )
    os.close(slave)
    chunks = []
    while select.select([master], [], [], 30)[0]:  # cooperative: the test timeout applies
        try:
            chunk = os.read(master, 4096)  # read as the demo writes: the pty never fills
        except OSError:  # EIO: the demo closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    stdout, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    bar = b"".join(chunks).decode(errors="replace")
    assert bar.count("\r[") >= 2, bar  # redrawn in place
    assert "[##############################] 1,000/1,000 100%" in bar
    assert b"processed 1,000 jobs" in stdout


def test_the_demo_enqueues_task_jobs_that_its_app_runs_with_their_arguments(
    backend: Backend,
) -> None:
    client = backend.client()
    countdown = demo.Countdown(total=250, wait=0.0)
    app = gq.App(client=client, queue=backend.queue)
    task = app.task(name=demo.TASK_NAME)(countdown.simulated_io)
    demo._enqueue(task, 250)  # two batches at MAX_BATCH = 200
    rq = BothSides(client, backend.queue)
    ids = [i.decode() for i in client.lrange(rq.keys.active, 0, -1)]
    calls = [envelope.decode(jobs.decode(m).data) for m in rq.messages(ids) if m is not None]
    assert [(c.task, c.args, c.kwargs) for c in calls] == [
        (demo.TASK_NAME, [i], {}) for i in range(250)
    ]
    for i, job_id in enumerate(ids[:3]):  # the app runs them: each one counts once
        [message] = rq.messages([job_id])
        assert message is not None
        app.plan(jobs.decode(message)).run()
        assert countdown.done == i + 1
