"""What the app's hooks cost (SPEC section 18: nothing measurable when unused), side by
side in one run, a noop task drained by one worker process (C=100, default settings):

- base: the gq of the commit this branch started from (``git merge-base HEAD main``,
  extracted with ``git archive``), the code path before hooks existed;
- no hooks: this tree, an app with no hooks (target: ratio to base >= 0.97, within noise);
- after hook: one noop ``after_job`` hook;
- around hook: one noop ``before_job`` context manager.

Runs alternate (base, none, after, around, base, ...) so that drift hits all; medians
of --repeat runs. Then the same variants in-process with no Redis
(workers/hooks_micro.py: ``plan(job).run()`` per job, best of 5 rounds, 8 processes
each, interleaved), the figure a
loaded machine disturbs least.

usage: hooks.py [--quick] [--repeat K] [--base REV]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tarfile
import tempfile
import uuid
from io import BytesIO
from pathlib import Path

from common import (
    WORKERS,
    command,
    dedicated_redis,
    machine,
    markdown_table,
    run_json,
    versions,
    write_json,
)
from gqbench import PYTHON, delete_queue, strip

import gq

ROOT = Path(__file__).resolve().parent.parent
CONCURRENCY = 100
VARIANTS = ("base", "none", "after", "around")


def extract_base(rev: str, into: Path) -> str:
    """Write the gq package of ``rev`` under ``into``; the commit it names."""
    commit = subprocess.check_output(["git", "rev-parse", rev], cwd=ROOT, text=True).strip()
    archive = subprocess.check_output(["git", "archive", commit, "gq"], cwd=ROOT)
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into)  # noqa: S202 - our own repository's archive
    return commit


def drain(url: str, n: int, variant: str, base: Path) -> dict:
    queue = f"bench-hooks-{uuid.uuid4().hex[:8]}"
    app = gq.App(url=url, queue=queue)

    @app.task(name="noop")
    def noop(n: int) -> None: ...

    for start in range(0, n, 10_000):
        noop.enqueue_many([(i,) for i in range(start, min(n, start + 10_000))])
    env = {"BENCH_N": str(n), "BENCH_HOOKS": "" if variant in ("base", "none") else variant}
    if variant == "base":
        env["PYTHONPATH"] = str(base)  # before the installed gq: the base commit's
    try:
        return run_json([PYTHON, str(WORKERS / "task_worker.py"), url, queue, str(CONCURRENCY),
                         "auto"], 300, env)  # fmt: skip
    finally:
        delete_queue(url, queue)


def micro(variant: str, base: Path) -> float:
    env = {"PYTHONPATH": str(base)} if variant == "base" else {}
    kind = "none" if variant == "base" else variant
    result = run_json([PYTHON, str(WORKERS / "hooks_micro.py"), kind], 300, env)
    return float(result["us_per_job"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--base", default=None, help="the revision to compare with (merge-base)")
    args = ap.parse_args()
    repeat = args.repeat or (3 if args.quick else 5)
    n = 30_000 if args.quick else 100_000
    rev = args.base or subprocess.check_output(
        ["git", "merge-base", "HEAD", "main"], cwd=ROOT, text=True).strip()  # fmt: skip
    runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp, dedicated_redis() as url:
        commit = extract_base(rev, Path(tmp))
        info = machine(url)
        for _ in range(repeat):
            for variant in VARIANTS:
                runs[variant].append(strip(drain(url, n, variant, Path(tmp))))
            print({k: [round(r["rate"]) for r in v] for k, v in runs.items()},
                  file=sys.stderr, flush=True)  # fmt: skip
        micros: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for _ in range(8):  # interleaved, as the drains; the least of each, the figure
            for variant in VARIANTS:
                micros[variant].append(micro(variant, Path(tmp)))
    rate = {k: statistics.median(r["rate"] for r in v) for k, v in runs.items()}
    cpu = {k: statistics.median(r["cpu_us_per_job"] for r in v) for k, v in runs.items()}
    us = {k: min(v) for k, v in micros.items()}
    rows = [[f"{name} (jobs/s)", rate[v], f"{rate[v] / rate['base']:.3f}", cpu[v],
             f"{cpu[v] / cpu['base']:.3f}", f"{us[v]:.2f}", f"{us[v] / us['base']:.3f}"]
            for name, v in (("base commit", "base"), ("no hooks", "none"),
                            ("one after_job hook", "after"),
                            ("one before_job context manager", "around"))]  # fmt: skip
    write_json("hooks", {
        "workload": "noop task drain, C=100: base commit vs no hooks vs one noop hook",
        "machine": info, "command": command(), "repeat": repeat, "n": n, "base": commit,
        "versions": versions(["gq", "redis", "hiredis", "gevent", "greenlet", "msgpack"]),
        "runs": runs, "dispatch_us_per_job": micros,
    })  # fmt: skip
    print(markdown_table(["variant", "drain rate", "÷ base", "CPU µs/job", "÷ base",
                          "dispatch µs/job", "÷ base"], rows))  # fmt: skip


if __name__ == "__main__":
    main()
