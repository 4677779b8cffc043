"""Run a benchmark worker on gq as of an older revision: ``before.py TREE SCRIPT ARGS...``.

TREE holds the old ``gq`` package (``metrics_cost.old_tree``). PYTHONPATH alone does not
reach it where gq is installed editable (pip's ``__editable__`` finder comes first on
``sys.meta_path``), so that finder is dropped here before SCRIPT runs.
"""

import runpy
import sys

tree, script = sys.argv[1], sys.argv[2]
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f)]
sys.path[:0] = [tree, script.rsplit("/", 1)[0]]
sys.argv = sys.argv[2:]
runpy.run_path(script, run_name="__main__")
