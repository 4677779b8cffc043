"""The command line: ``gq-worker`` (runs one consumer) and ``gq`` (the operator's tool).

This package's ``__init__`` and ``gq.cli.worker`` import only the standard library, so
that ``gq-worker`` can apply gevent's monkey-patching before anything else is imported.
"""

from __future__ import annotations

# Exit codes shared by both commands (documented in their --help).
EXIT_OK = 0
EXIT_FATAL = 1  # a fatal error while running (gq-worker), or an operation that failed (gq)
EXIT_USAGE = 2  # bad usage: unknown flag, bad value, a handler that cannot be imported
EXIT_UNREACHABLE = 3  # Redis unreachable or refusing the credentials at start

EXIT_CODES_HELP = """\
exit codes:
  0  clean stop
  1  fatal error while running (including the grace period running out, or a second
     signal while handlers were still running)
  2  bad usage (unknown flag, bad value, a handler that cannot be imported or is not
     callable)
  3  Redis unreachable or refusing the credentials at start
"""

ENV_URL = "GQ_REDIS_URL"
ENV_QUEUE = "GQ_QUEUE"
