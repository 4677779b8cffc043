#!/bin/sh
# One venv per system under benchmarks/.venvs/ (gitignored), from PyPI.
set -e
cd "$(dirname "$0")"
mkdir -p .venvs && cd .venvs
mk() { name=$1; shift; python3 -m venv "$name" && "$name/bin/pip" install -q "$@" psutil; }
mk gq -e ../.. hiredis matplotlib
mk rq rq hiredis gevent
mk celery "celery[redis]" gevent hiredis
mk dramatiq "dramatiq[redis]" gevent hiredis
mk huey huey redis gevent hiredis
mk arq arq hiredis
mk saq "saq[hiredis]" typing_extensions
mk taskiq taskiq taskiq-redis
mk streaq streaq
