"""``gq-worker`` as the fault suite runs it: ``python -m tests.fault_worker HANDLER [options]``.

Test-only changes, made here so that gq itself carries no test hooks:

- the option floors (``gq.options.MINIMUMS``: heartbeat 15 s, consumer timeout 5 s...) are
  lifted, so that a killed worker is recovered in about a second instead of 20;
- ``GQ_TEST_CLOCK_SKEW`` (seconds) moves this process's wall clock (``time.time``) to play a
  host whose clock is off. gq needs no hook for that: liveness uses the server's clock;
- diagnostics for a worker that seems stuck: ``kill -USR2`` prints every native thread's
  stack, ``kill -USR1`` every greenlet's and the clocks (tests/sigstop_probe.py uses both).
"""

from gevent import monkey

monkey.patch_all()  # first, as gq.cli.worker.main does: gq and redis must see patched modules

import faulthandler  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import gevent  # noqa: E402
from gevent import util  # noqa: E402

from gq import options  # noqa: E402
from gq.cli import worker  # noqa: E402


def _dump_greenlets() -> None:
    """Every greenlet's stack, and the clocks: the loop's (libev's cached ``ev_now``,
    wall-clock based) and the monotonic one gq measures stalls with."""
    loop = gevent.get_hub().loop
    lines = util.format_run_info()
    lines.append(f"clocks: monotonic={time.monotonic():.3f} time={time.time():.3f} "
                 f"loop.now={loop.now():.3f} loop.iteration={loop.iteration}")  # fmt: skip
    sys.stderr.write("".join(f"{line}\n" for line in lines))
    sys.stderr.flush()


def main() -> None:
    # SIGUSR2 is answered from the signal handler itself, so even while the hub is held in
    # C; SIGUSR1 once the hub runs its callbacks.
    faulthandler.register(signal.SIGUSR2, all_threads=True)
    gevent.signal_handler(signal.SIGUSR1, _dump_greenlets)
    options.MINIMUMS.clear()
    skew = float(os.environ.get("GQ_TEST_CLOCK_SKEW") or 0)
    if skew:
        real_time = time.time
        time.time = lambda: real_time() + skew
    worker.main()


if __name__ == "__main__":
    main()
