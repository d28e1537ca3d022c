"""Terminal text of a measured input-pipeline fix (facts ``InputFix``): the throughput
table, the changes with their code, what was left as written. Shared by
``gpuwhy fix --input``'s report and ``print(gpuwhy.optimize(ds))``: kept below both, so
that optimize/ does not import the report."""

from __future__ import annotations

import math

from gpuwhy.derived.cache_passes import cache_passes, cache_read_once, one_element_passes
from gpuwhy.facts import InputFix, InputFixFacts

NO_GAIN = 0.05  # a rewrite less than 5% faster than the original is not worth it
# where the data is read through a pipeline a library built (Keras' fit over a PyDataset,
# a generator or arrays): what gpuwhy fix tries there instead
LIBRARY_INPUT_HINT = (
    "gpuwhy fix SCRIPT (without --input) tries the fixes of the run's findings, a "
    "PyDataset's workers among them"
)


def input_fixes_intro(fixes: InputFixFacts) -> list[str]:
    """What the script iterated, before the pipelines one by one."""
    count = len(fixes.fixes)
    library = ", ".join(fixes.library_only)
    if not count:
        return [
            "the script iterated no tf.data dataset of its own from Python"
            + (
                f" (a library built the ones read at {library}); nothing for --input to "
                f"rewrite; {LIBRARY_INPUT_HINT}."
                if library
                else "; nothing to optimise."
            )
        ]
    lines = [
        f"{count} dataset{'s' if count != 1 else ''} of the script's own iterated"
        + (" (stopped the script at its first iterator)" if fixes.stopped_early else "")
    ]
    if library:
        lines.append(f"not optimised: datasets a library built, read at {library}")
    return lines


def input_fix_heading(fix: InputFix) -> str:
    """``dataset created at train.py:15, iterated at train.py:17, 2 iterators``"""
    parts = [fix.dataset]
    if fix.iterated_at:
        parts.append(f"iterated at {', '.join(fix.iterated_at)}")
    if fix.iterators:
        parts.append(f"{fix.iterators} iterator{'s' if fix.iterators != 1 else ''}")
    return ", ".join(parts)


def input_fix_lines(fix: InputFix) -> list[str]:
    if fix.error:
        return [f"could not optimise it: the pipeline itself fails: {fix.error}"]
    lines: list[str] = []
    if fix.refused:
        lines.append(f"rewrite refused: {fix.refused}")
    elif fix.changes:
        lines.append(
            f"{len(fix.changes)} change{'s' if len(fix.changes) != 1 else ''}; "
            f"elements: {fix.elements_checked}"
        )
    else:
        lines.append("nothing to change safely")
    rows = [
        ("original", fix.before),
        ("optimised", None if fix.refused else fix.after),
        ("ideal", fix.ideal),
    ]
    measured = [rate for _, rate in rows if rate is not None]
    if measured:
        first = measured[0]
        lines.append(
            f"  {'elements/s':<11}{'median':>11}  {'min-max':>21}   vs original"
            f"   ({first.passes} timed passes of {first.elements_per_pass} elements each)"
        )
        for name, rate in rows:
            if rate is None:
                continue
            ratio = (
                f"{rate.median / fix.before.median:>6.2f}x"
                if fix.before and fix.before.median > 0 and rate is not fix.before
                else ""
            )
            lines.append(
                f"  {name:<11}{_rate(rate.median):>11}  "
                f"{_rate(rate.min) + ' - ' + _rate(rate.max):>21}   {ratio}"
            )
        split = cache_passes(fix)
        if split is not None:
            lines.append(f"  the cache's first pass apart: {split.text}")
        if fix.gap_closed is not None and not fix.refused:
            lines.append(
                f"  gap closed {fix.gap_closed * 100:>10.0f}%   "
                "(of the way from the original to its output cached in memory)"
            )
    if fix.changes:
        lines.append(
            "changes tried (refused, not applied):"
            if fix.refused
            else "changes (the program reads this dataset once: the gain above is the cache's,"
            " read back by the timed passes, never by the program; not claimed):"
            if cache_read_once(fix)
            else "changes (timed over passes of one element, a preview's: its rate is the "
            "pipeline's start-up, not what they gain; not claimed):"
            if one_element_passes(fix)
            else "changes (no gain measured here: the pipeline as written is as fast; keep it):"
            if not fix.worth_it and (fix.speedup or 0.0) < 1 + NO_GAIN
            else f"changes (their {fix.speedup or 0.0:.2f}x is within the spread of the timed "
            "passes, which overlap the original's: not claimed; keep the pipeline as written):"
            if not fix.worth_it
            else "changes (paste these into the pipeline):"
        )
        for change in fix.changes:
            lines.append(
                f"  {change.location + '  ' if change.location else ''}{change.stage}: {change.why}"
            )
            if change.source_line:
                lines.append(f"      was: {change.source_line}")
            lines.extend(f"      {code_line}" for code_line in change.code.splitlines())
    if fix.left_alone:
        lines.append("left as written:")
        lines.extend(f"  {item}" for item in fix.left_alone)
    lines.extend(f"note: {note}" for note in fix.notes)
    return lines


def _rate(value: float) -> str:
    if not math.isfinite(value):
        return "inf"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"
