"""Sections ``fixes_tried`` and ``fix_trial``: the fixes ``gpuwhy fix SCRIPT`` applied to
a copy of the program and ran, each judged on whether it ran, computed the same and made
the step faster; then the ones that held, together, and the patch that makes them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FixTried:
    """One fix, run ``runs`` times beside as many runs of the original."""

    finding: str  # the finding it answers
    fix: str  # what it changes, for people
    location: str | None = None  # file:line of the code it changes
    ran: bool = False  # every run ended as the original's did
    error: str | None = None  # the exception (one line) of the run that failed
    same_results: bool | None = None  # None: nothing the original reproduces to compare
    tolerance: str | None = None  # how values were compared
    compared: str | None = None  # what was compared ("12 values of Keras' logs")
    # the first value that differed; where the results are the same, the value furthest
    # from the original's within the tolerance (None: every value exactly the same)
    difference: str | None = None
    step_before_s: float | None = None  # mean step of the original's runs
    step_after_s: float | None = None
    speedup: float | None = None  # before / after
    speedup_low: float | None = None  # 95 % interval
    speedup_high: float | None = None
    called: str | None = None  # faster | slower | same (the interval's verdict)
    speed_note: str | None = None  # where the CPU time per step called it, and why
    projected: bool = False  # its effect is on a GPU: speed not measured on this machine
    # --target: the step projected onto that GPU from each run's traced graph (medians
    # over the runs; a prediction, with the band of the fix's runs' projections)
    projected_gpu: str | None = None
    projected_before_s: float | None = None
    projected_after_s: float | None = None
    projected_speedup: float | None = None
    projected_speedup_low: float | None = None
    projected_speedup_high: float | None = None
    in_patch: bool = False
    left_out: str | None = None  # a fix that held and is not in the patch: why
    runs: int = 0  # runs of this fix
    held: bool = False  # ran, same results, faster (or a device fix that did not slow)
    edits: int = 0  # places of the program's files it changes
    # what the person pasting it should know (the candidate's note): what it leaves, where
    # it helps ("threads help where __getitem__ releases the GIL")
    note: str | None = None


@dataclass(frozen=True)
class FixTrialFacts:
    """Section ``fix_trial``: how the fixes were tried, the fixes together, the patch."""

    bound_s: float  # each run stopped this long after the program started
    runs_per_side: int
    measure: str  # "step time": what speedups are of
    combined: FixTried | None = None  # the fixes that held, applied together
    patch: str | None = None  # unified diff of the program's files (git apply)
    not_tried: tuple[tuple[str, str], ...] = ()  # (finding, why no fix was tried)
    original_error: str | None = None  # the original itself failed: nothing to compare
    interrupted: bool = False  # Ctrl-C: the table so far
    notes: tuple[str, ...] = ()
