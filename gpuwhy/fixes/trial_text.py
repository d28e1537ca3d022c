"""The fixes ``gpuwhy fix`` tried, as lines of text: one row per fix (what it changed,
whether it ran, computed the same, and the step before -> after with its interval),
then the fixes together and the patch. Shared by the terminal report and the verdict."""

from __future__ import annotations

from gpuwhy.facts import FixTrialFacts, FixTried
from gpuwhy.formatting import duration

# A not-tried reason given beside fixes that were tried for the same finding.
BESIDES = "besides the fixes tried: "
# The not-tried reason of a finding `gpuwhy fix --finding ID` named that run 1 did not find.
NOT_FOUND = "not found in run 1"
# The speed note of a fix judged on the whole program's run time (trial/judge.py).
WHOLE_PROGRAM = (
    "the whole program's run time: fewer than two runs a side timed training steps (a "
    "loop gpuwhy cannot mark, or runs too short to time any step after warm-up), and "
    "every run ended on its own within the bound"
)
CALLS_OUTSIDE = (
    "the whole program's run time: the calls it changes run outside the training steps, "
    "and every run ended on its own within the bound"
)
PROGRAM_NOTES = (WHOLE_PROGRAM, CALLS_OUTSIDE)  # a change measured on the whole program


def trial_heading(trial: FixTrialFacts, tried: int | None = None) -> str:
    """The section's heading; ``tried``: the fixes run (0: none could be written, and the
    heading says so rather than announce runs that did not happen)."""
    if tried == 0:
        return "Fixes: none tried (the original ran once to find them)"
    return (
        f"Fixes tried on a copy of the program ({trial.runs_per_side} run(s) each beside the "
        f"original's, each stopped after {trial.bound_s:g} s)"
    )


def fix_row(t: FixTried, planned: int | None = None) -> list[str]:
    """The fix's lines; ``planned``: the rounds every fix ran (``--runs``), said where
    this one ran more."""
    mark = ("✓ HELD (projected)" if t.projected else "✓ HELD") if t.held else "✗"
    head = f"{mark} {t.fix}  [{t.finding}]" + (f"  at {t.location}" if t.location else "")
    if not t.ran:
        return [head, f"    runs: NO: {t.error}"]
    lines = [head, f"    runs: {ran_text(t, planned)}"]
    if t.same_results is True:
        closest = f"; the furthest: {t.difference}" if t.difference else "; no value differed"
        lines.append(f"    same results: yes, {t.compared}, within {t.tolerance}{closest}")
    elif t.same_results is False:
        lines.append(
            f"    same results: NO: {t.difference} ({t.compared}; tolerance {t.tolerance})"
        )
        if t.finding == "launch.retracing":
            lines.append(
                "    (a retrace re-runs the function's Python: random draws restart and Python "
                "values are read anew at each trace; a tensor argument ends that, so a program "
                "whose results depended on it computes differently: check which is right)"
            )
    else:
        lines.append(f"    same results: not checked: {t.compared}")
    measure = "program" if t.speed_note in PROGRAM_NOTES else "step"
    lines.append(f"    {measure}: {speed_text(t)}")
    if t.speed_note:
        lines.append(f"    ({t.speed_note})")
    if t.projected:
        lines.append(f"    on a GPU: {projected_text(t)}")
    if t.note:
        lines.append(f"    note: {t.note}")
    if t.in_patch:
        lines.append("    in the patch")
    elif t.left_out:
        lines.append(f"    {t.left_out}")
    return lines


def ran_text(t: FixTried, planned: int | None) -> str:
    """``yes``, or ``yes, 4 times: 2 more after 2 left its gain unclear``."""
    if not t.ran:
        return f"NO: {t.error}"
    if planned is None or t.runs <= planned:
        return "yes"
    return (
        f"yes, {t.runs} times: {t.runs - planned} more after {planned} left its gain unclear "
        "(each beside another run of the original)"
    )


def speed_text(t: FixTried) -> str:
    if t.speedup is None or t.step_before_s is None or t.step_after_s is None:
        return (
            "not compared (too few training steps in a run to time them: a longer --bound "
            "gives each run more)"
        )
    interval = f"{t.speedup_low:.2f}x-{t.speedup_high:.2f}x"
    called = {
        "faster": "faster",
        "slower": "SLOWER",
        "same": "no measurable difference",
    }.get(t.called or "", t.called or "")
    text = (
        f"{duration(t.step_before_s)} -> {duration(t.step_after_s)}: {t.speedup:.2f}x "
        f"({interval}, 95%), {called}"
    )
    if t.projected:
        text += "; its effect is on a GPU: this is the CPU's time"
    return text


def projected_text(t: FixTried) -> str:
    """The step projected onto --target, or why there is none."""
    if t.projected_speedup is None or t.projected_before_s is None or t.projected_after_s is None:
        return "no GPU here: give --target GPU to project its gain (or run gpuwhy fix on a GPU machine)"
    return (
        f"projected on {t.projected_gpu}: {duration(t.projected_before_s)} -> "
        f"{duration(t.projected_after_s)}: {t.projected_speedup:.2f}x "
        f"({t.projected_speedup_low:.2f}x-{t.projected_speedup_high:.2f}x band), a prediction "
        "from the traced graph, not a measurement"
    )


def trial_lines(tried: tuple[FixTried, ...], trial: FixTrialFacts) -> list[str]:
    lines: list[str] = []
    if trial.original_error:
        return [f"the original did not run: {trial.original_error}; no fix was tried"]
    if not tried:
        lines.append("no fix gpuwhy can apply to this program's findings")
    for t in tried:
        lines += fix_row(t, trial.runs_per_side)
    if trial.combined is not None:
        c = trial.combined
        lines.append("together: " + c.fix)
        lines += ["  " + line for line in fix_row(c)[1:]]
    for finding, why in trial.not_tried:
        besides = why.removeprefix(BESIDES)
        if besides != why:  # other fixes were tried for it: what was not, and why
            lines.append(f"for {finding}, not tried besides those: {besides}")
        else:
            lines.append(f"not tried for {finding}: {why}")
    if trial.interrupted:
        lines.append("interrupted (Ctrl-C): the fixes measured until then")
    if trial.patch:
        lines.append("the patch (--patch PATH writes it; git apply PATH):")
        lines += ["    " + line for line in trial.patch.splitlines()]
    else:
        lines.append(f"no patch: {no_patch_reason(tried)}")
    return lines


def no_patch_reason(tried: tuple[FixTried, ...]) -> str:
    """Why no patch: nothing was tried, or nothing tried held."""
    return "no fix held" if tried else "no fix was tried"
