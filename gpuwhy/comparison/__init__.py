"""``gpuwhy diff BEFORE AFTER``: did the change make it faster? Two records compared, or
several a side.

The flow mirrors a run's: the records' facts -> resampling units (comparable_units.py) -> changes
with their intervals (changes.py, bootstrap.py; several runs a side: sides.py,
between_runs.py), the findings and the environment that changed (findings.py,
environment.py) -> :class:`Comparison` (model.py) -> the verdict (verdict.py). pair.py
compares one record a side, runs.py several.
Renderers are in report/diff/; the gate that fails a CI job is gate.py.

The names below are imported at their first use, not with the package: ``gpuwhy run``
reads the gate (gate.py, its ``--fail-on``) and the step's parts (comparable_units.py),
never the comparing (its own modules: 2 ms of imports at each run's start, ``python -X
importtime``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpuwhy.lazy_names import names_from_modules

if TYPE_CHECKING:
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

_WHERE = {
    "AlignedWindow": "model",
    "Change": "model",
    "Comparison": "model",
    "EnvironmentChange": "model",
    "FindingChange": "model",
    "PartChange": "model",
    "RunSide": "model",
    "ONE_RUN_A_SIDE": "pair",
    "compare": "pair",
    "compare_runs": "runs",
    "diff_verdict": "verdict",
}

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

_from_modules = names_from_modules(__name__, _WHERE, globals())


def __getattr__(name: str) -> Any:
    """A name of ``__all__``, from its module, imported now (PEP 562)."""
    return _from_modules(name)
