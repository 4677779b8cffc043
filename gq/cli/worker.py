"""The ``gq-worker`` console script (also ``python -m gq.cli.worker``).

Only the standard library is imported at the top: ``main`` applies gevent's
monkey-patching before gq, redis or the handler's module are imported, so that every
socket, lock and sleep they create cooperates with gevent.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if supervises(args):  # the supervisor stays unpatched: it runs no consumer
        from gq.cli.supervisor import main as supervise

        sys.exit(supervise(args))

    from gevent import monkey

    monkey.patch_all()

    from gq.cli.worker_cmd import run

    sys.exit(run(argv))


def supervises(argv: list[str]) -> bool:
    """Whether ``argv`` asks for ``--processes`` (and is not one of its children)."""
    flags = {arg.split("=", 1)[0] for arg in argv}
    return "--processes" in flags and "--supervisor-pid" not in flags


if __name__ == "__main__":
    main()
