"""What the hub monitor costs (issue #9): gevent's monitor thread traces every greenlet
switch so that gq can report a blocked hub and stop a handler spinning past its timeout.
Noop drain of one gq worker process (C=100, buffer 100) with the monitor on (the default)
and off, alternating in one run; the median of each.

usage: watchdog_cost.py [--quick] [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics

from common import command, dedicated_redis, machine, markdown_table, write_json
from gqbench import gq_drain


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 jobs instead of 50,000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n = 20_000 if args.quick else 50_000
    rates: dict[bool, list[float]] = {True: [], False: []}
    with dedicated_redis() as url:
        for _ in range(args.repeat):
            for on in (True, False):
                rates[on].append(gq_drain(url, n, 100, 100, watchdog=on)["rate"])
        facts = machine(url)
    on, off = statistics.median(rates[True]), statistics.median(rates[False])
    print(markdown_table(["monitor", "jobs/s (median)", "runs"],
                         [["on (default)", on, rates[True]], ["off", off, rates[False]]]))
    print(f"on / off = {on / off:.3f}")
    write_json("watchdog_cost", {"command": command(), "machine": facts, "jobs": n,
                                 "rates": {"on": rates[True], "off": rates[False]},
                                 "ratio": on / off})  # fmt: skip


if __name__ == "__main__":
    main()
