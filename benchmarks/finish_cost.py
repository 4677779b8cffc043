"""The worker's in-process cost of a kept result (issue 22): µs per job to plan a noop
task's own call and build its Outcome (``plan.finish.done(value)``), against the same
call of a task that keeps no result (the difference is what a result costs the worker,
before Redis). No Redis, no processor: the dispatcher and the finisher alone.

usage: PYTHONPATH=TREE python benchmarks/finish_cost.py [--rounds 7] [--number 200000]
Prints the best round of each mode as JSON: µs per job.
"""

from __future__ import annotations

import argparse
import json
import time
import timeit
from typing import Any

import gq
from gq.tasks import envelope
from gq.tasks.options import wire


def _apps() -> tuple[Any, Any]:
    kept, plain = gq.App(queue="bench"), gq.App(queue="bench")

    @kept.task(name="noop", result_ttl=3600, retries=2)
    def noop(n: int) -> None: ...

    @plain.task(name="noop", retries=2)
    def noop_plain(n: int) -> None: ...

    return kept, plain


def _job(app: Any) -> gq.Job:
    """A call as the task's enqueue writes it: its own options (taskopts.wire)."""
    opts = wire(app.tasks["noop"].options, time.time, None)
    job = gq.Job("1700000000000-0001", envelope.encode("noop", [7], {}, opts), 0)
    job.queue = "bench"
    return job


def modes() -> dict[str, Any]:
    kept, plain = _apps()
    kept_job, plain_job = _job(kept), _job(plain)
    finish = kept.plan(kept_job).finish
    assert finish is not None and plain.plan(plain_job).finish is None
    kept_plan, plain_plan = kept.plan, plain.plan
    return {
        "plan (no result)": lambda: plain_plan(plain_job),
        "plan (kept)": lambda: kept_plan(kept_job),
        "done(None)": lambda: finish.done(None),
        "done(dict)": lambda: finish.done({"id": 7, "ok": True, "tags": ["a", "b"]}),
        "plan + done (kept)": lambda: kept_plan(kept_job).finish.done(None),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=200_000)
    ns = parser.parse_args()
    found: dict[str, float] = {}
    for name, call in modes().items():
        best = min(timeit.repeat(call, number=ns.number, repeat=ns.rounds))
        found[name] = round(best / ns.number * 1e6, 3)
    found["kept - no result"] = round(found["plan + done (kept)"] - found["plan (no result)"], 3)
    print(json.dumps({"gq": gq.__file__, "us_per_job": found}, indent=1))


if __name__ == "__main__":
    main()
