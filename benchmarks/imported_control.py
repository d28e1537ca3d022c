"""The control side of ``bench_run.py --control``: the workload run as ``python SCRIPT``
runs it, in a process that first imports every module ``gpuwhy run`` loads before the
script's first line (its collectors, rules and report), then starts nothing.

Whole processes of one loop differ from run to run by more than the 2 % budget on a
shared machine; beside python and ``gpuwhy run`` this third side tells the cost of
watching (``gpuwhy run`` against it) from the cost of a bigger process (it against
python), each ratio measured side by side in the same rotation.

    .venv/bin/python benchmarks/imported_control.py SCRIPT [ARGS...]
"""

import runpy
import sys

import gpuwhy.collect.registry
import gpuwhy.modes.run.session
import gpuwhy.modes.run.watched
import gpuwhy.report
import gpuwhy.rules  # noqa: F401 - loaded, as gpuwhy run loads it; nothing started

sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
