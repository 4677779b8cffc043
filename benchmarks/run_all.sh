#!/bin/sh
# Every benchmark, in order, with the gq venv; --quick for a short run (about 3 minutes).
# Results: benchmarks/results/*.json and *.png; copy the printed tables into README.md.
set -e
cd "$(dirname "$0")"
PY=.venvs/gq/bin/python
for script in throughput.py io_bound.py latency.py enqueue.py peers.py processes.py; do
    echo "## $script $*"
    $PY "$script" "$@"
done
