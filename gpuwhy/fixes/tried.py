"""Which findings' fixes ``gpuwhy fix SCRIPT`` can apply to the program and measure, so
that every report says, beside the fix it prints, whether it was (or can be) proven.
The fixes themselves are in ``gpuwhy/trial/kinds``; a test keeps the two lists equal."""

from __future__ import annotations

import shlex

TRIED_BY_FIX = frozenset(
    {
        "launch.eager-ops",
        "launch.retracing",
        "launch.host-bound",
        "launch.projected-bound",
        "placement.float64",
        "placement.forced-cpu",
        "input.bound",
        "input.sequential-map",
        "input.python-function",
        "input.no-prefetch",
        "input.no-cache",
        "input.iterator-end-wait",
        "compression.cpu-codec",
        "input.projected-bound",
        "gpu.underutilized",
        "tensorcore.unused",
        "steps.periodic-stall",
        "steps.keras-call-per-step",
    }
)


def tried_line(
    finding_id: str, proven: bool = False, trial: bool = False, target: str | None = None
) -> str | None:
    """What to say under a finding's fix: tried below, or can be (None: a fix gpuwhy
    cannot apply, such as installing a driver). ``trial``: the report of a fix trial,
    where a finding it could have tried and did not is said to be below with why.
    ``target``: the run's ``--target``, which ``gpuwhy fix`` needs too (the projected
    findings exist only with it)."""
    if proven:
        return "tried below: gpuwhy fix ran it on a copy of the program"
    if finding_id in TRIED_BY_FIX:
        if trial:
            # why is below: not applicable here, or tried under another finding it answers
            return "gpuwhy fix did not try it under this finding: why is below"
        command = (
            f"gpuwhy fix --target {shlex.quote(target)} SCRIPT" if target else "gpuwhy fix SCRIPT"
        )
        return (
            f"{command} tries the fixes of this kind it can write for your program, "
            "on a copy, and measures them"
        )
    return None
