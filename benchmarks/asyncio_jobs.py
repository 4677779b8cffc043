"""Workload: ``async def`` handlers on gq's asyncio loop next to sync handlers (SPEC 15).

Side by side in one run, on one dedicated Redis, alternating sync and async every
repetition (ratios are taken per repetition, then their median):

- noop drain, one process, C=100: async ÷ sync (target >= 0.5);
- 1,000 handlers awaiting asyncio.sleep(0.1) at C=1000: rate ÷ the ideal 10,000 jobs/s
  (target >= 0.95), with gevent.sleep(0.1) sync handlers beside it;
- the hand-off alone, in this process: asyncio_loop.wait() of a noop coroutine, one
  handler at a time and 100 at once, against calling a sync function.

usage: asyncio_jobs.py [--quick] [--repeat K]
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import gevent  # noqa: E402
from common import command, dedicated_redis, machine, markdown_table, versions, write_json  # noqa: E402
from gqbench import gq_drain, strip  # noqa: E402

from gq.worker import asyncio_loop  # noqa: E402


def drains(url: str, n: int, c: int, buffer: int, sleep_ms: float) -> dict[str, Any]:
    """A sync and an async drain of the same workload, back to back."""
    sync = strip(gq_drain(url, n, c, buffer, sleep_ms))
    aio = strip(gq_drain(url, n, c, buffer, sleep_ms, extra_env={"BENCH_ASYNC": "1"}))
    return {"sync": sync, "async": aio, "ratio": aio["rate"] / sync["rate"]}


async def _noop() -> None:
    return None


def _sync_noop() -> None:
    return None


def handoff(n: int) -> dict[str, float]:
    """µs per call: a sync call, a hand-off one at a time, and 100 greenlets at once."""
    t = time.perf_counter()
    for _ in range(n):
        _sync_noop()
    sync_us = (time.perf_counter() - t) / n * 1e6
    asyncio_loop.wait(_noop(), "warm-up")
    t = time.perf_counter()
    for _ in range(n):
        asyncio_loop.wait(_noop(), "one")
    one_us = (time.perf_counter() - t) / n * 1e6

    def many() -> None:
        for _ in range(n // 100):
            asyncio_loop.wait(_noop(), "many")

    t = time.perf_counter()
    gevent.joinall([gevent.spawn(many) for _ in range(100)])
    many_us = (time.perf_counter() - t) / n * 1e6
    return {"sync_call_us": sync_us, "one_at_a_time_us": one_us, "hundred_at_once_us": many_us}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=None)
    args = ap.parse_args()
    repeat = args.repeat or (1 if args.quick else 3)
    n_noop = 20_000 if args.quick else 50_000
    n_sleep = 20_000 if args.quick else 40_000
    noop, sleep, hand = [], [], []
    with dedicated_redis() as url:
        info = machine(url)
        for rep in range(repeat):
            noop.append(drains(url, n_noop, 100, 100, 0))
            sleep.append(drains(url, n_sleep, 1000, 1000, 100))
            hand.append(handoff(20_000))
            print(f"rep {rep}: noop async/sync {noop[-1]['ratio']:.2f}, sleep async "
                  f"{sleep[-1]['async']['rate']:.0f}/s", file=sys.stderr, flush=True)
    payload = summary(noop, sleep, hand)
    payload.update(machine=info, command=command(), repeat=repeat,
                   versions=versions(["gq", "redis", "hiredis", "gevent", "greenlet"]))
    write_json("asyncio_jobs", payload)
    print(render(payload))


def summary(noop: list[dict[str, Any]], sleep: list[dict[str, Any]],
            hand: list[dict[str, float]]) -> dict[str, Any]:
    ideal = 1000 / 0.1
    med = statistics.median
    return {
        "noop_c100": {"runs": noop, "ratio_median": med(r["ratio"] for r in noop),
                      "sync_rate": med(r["sync"]["rate"] for r in noop),
                      "async_rate": med(r["async"]["rate"] for r in noop),
                      "sync_cpu_us": med(r["sync"]["cpu_us_per_job"] for r in noop),
                      "async_cpu_us": med(r["async"]["cpu_us_per_job"] for r in noop)},
        "sleep_100ms_c1000": {"runs": sleep, "ideal_rate": ideal,
                              "async_efficiency": med(r["async"]["rate"] for r in sleep) / ideal,
                              "sync_efficiency": med(r["sync"]["rate"] for r in sleep) / ideal,
                              "async_rss_peak_mb": med(r["async"]["rss_peak_mb"] for r in sleep),
                              "sync_rss_peak_mb": med(r["sync"]["rss_peak_mb"] for r in sleep)},
        "handoff": {k: med(h[k] for h in hand) for k in hand[0]},
    }


def render(p: dict[str, Any]) -> str:
    n, s, h = p["noop_c100"], p["sleep_100ms_c1000"], p["handoff"]
    rows = [
        ["noop, C=100", f"{n['sync_rate']:,.0f} jobs/s", f"{n['async_rate']:,.0f} jobs/s",
         f"async ÷ sync {n['ratio_median']:.2f} (≥ 0.5)",
         f"CPU µs/job {n['sync_cpu_us']:.0f} / {n['async_cpu_us']:.0f}"],
        ["sleep 100 ms, C=1000", f"{s['sync_efficiency']:.1%} of ideal",
         f"{s['async_efficiency']:.1%} of ideal", "async ÷ ideal (≥ 0.95)",
         f"peak RSS MB {s['sync_rss_peak_mb']:.0f} / {s['async_rss_peak_mb']:.0f}"],
    ]
    table = markdown_table(["workload", "sync handler", "async def handler", "ratio", "other"],
                           rows)
    return (f"{table}\n\nhand-off alone (this process, no Redis): a sync call "
            f"{h['sync_call_us']:.2f} µs; asyncio_loop.wait() of a noop coroutine "
            f"{h['one_at_a_time_us']:.1f} µs one at a time, {h['hundred_at_once_us']:.1f} µs "
            f"per job with 100 handlers at once (wake-ups batched)")


if __name__ == "__main__":
    main()
