"""``gpuwhy diff BEFORE AFTER``: did the change make it faster? Two records compared, or
several a side.

The flow mirrors a run's: the records' facts -> resampling units (comparable_units.py) -> changes
with their intervals (changes.py, bootstrap.py; several runs a side: sides.py,
between_runs.py), the findings and the environment that changed (findings.py,
environment.py) -> :class:`Comparison` (model.py) -> the verdict (verdict.py). pair.py
compares one record a side, runs.py several.
Renderers are in report/diff/; the gate that fails a CI job is gate.py.
"""

from __future__ import annotations

from gpuwhy.comparison.model import (
    AlignedWindow,
    Change,
    Comparison,
    EnvironmentChange,
    FindingChange,
    PartChange,
    RunSide,
)
from gpuwhy.comparison.pair import ONE_RUN_A_SIDE, compare
from gpuwhy.comparison.runs import compare_runs
from gpuwhy.comparison.verdict import diff_verdict

__all__ = [
    "ONE_RUN_A_SIDE",
    "AlignedWindow",
    "Change",
    "Comparison",
    "EnvironmentChange",
    "FindingChange",
    "PartChange",
    "RunSide",
    "compare",
    "compare_runs",
    "diff_verdict",
]
