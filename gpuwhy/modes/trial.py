"""``gpuwhy fix SCRIPT``: every fix gpuwhy can apply for the findings of the program,
tried on a copy of it and proven, or refused.

1. The original runs once, bounded (``--bound`` seconds), as ``gpuwhy run`` runs it:
   its findings and facts say what to fix (``gpuwhy.trial.kinds``).
2. Rounds: each round runs the original and every fix once, in that order, so a drift
   of the machine's falls on all of them alike; ``--runs`` rounds (the diagnosis is the
   first round's original). A fix that computed the same and whose step is faster by
   its estimate, but whose interval still reaches "no change", gets up to
   ``MORE_ROUNDS`` more rounds (with the original's) within the trial's cost, and is
   then proven or refused.
3. Each fix judged against the original's runs (``gpuwhy.trial.judge``); the best fix
   that held per finding, those that fit together, run together for as many rounds.
4. The patch of what held.

Ctrl-C stops the rounds and reports what was measured so far. The runs' own output is
kept in files, under ``--keep DIR`` where given.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from gpuwhy.comparison.changes import MIN_STEP_CHANGE
from gpuwhy.comparison.comparable_units import run_units
from gpuwhy.facts import Facts, FixTrialFacts, FixTried
from gpuwhy.fixes.trial_text import NOT_FOUND
from gpuwhy.record import Record
from gpuwhy.trial import kinds
from gpuwhy.trial.candidate import FixCandidate, NotTried, SourceFiles, location_parts
from gpuwhy.trial.judge import ended_well, judge
from gpuwhy.trial.patch import compatible, merged, unified_diff
from gpuwhy.trial.variant_runs import VariantRun, run_variant
from gpuwhy.trial.workspace import common_root
from gpuwhy.verdict import gpu_usable

MIN_LIMIT_S = 60.0
LIMIT_FACTOR = 3.0
# Rounds added, one at a time, while a fix's gain stays unclear: a loaded machine's
# spread over two or three runs can hide a 1.4x gain; more rounds than this cost more
# than the user waits for, and repeated looks at one comparison call chance gains.
MORE_ROUNDS = 2


@dataclass(frozen=True)
class TrialOptions:
    bound_s: float = 30.0
    runs: int = 3
    keep: str | None = None  # folder for the runs' outputs (default: removed)
    only: tuple[str, ...] = ()  # finding ids to try fixes for (default: all)
    # every run projects its step onto this GPU: what a fix whose effect is on a GPU gives
    # there, on a machine without one (a prediction, said to be)
    target: str | None = None


Progress = Callable[[str], None]


def try_fixes(
    script: str, args: Sequence[str], options: TrialOptions, progress: Progress
) -> Record:
    parent = (
        os.path.abspath(options.keep) if options.keep else tempfile.mkdtemp(prefix="gpuwhy-fix-")
    )
    os.makedirs(parent, exist_ok=True)
    try:
        return _trial(script, args, options, progress, parent)
    finally:
        if options.keep is None:
            shutil.rmtree(parent, ignore_errors=True)


def _trial(
    script: str, args: Sequence[str], options: TrialOptions, progress: Progress, parent: str
) -> Record:
    run = _runner(script, args, options, parent)
    progress(f"run 1: the original, up to {options.bound_s:g} s, to find what to fix")
    first = run("original", (), options.bound_s + max(MIN_LIMIT_S, options.bound_s))
    if first.record is None or not ended_well(first):
        why = first.error or "it wrote no record"
        progress(f"the original did not run to its bound: {why}")
        base = first.record.facts if first.record is not None else Facts()
        trial = FixTrialFacts(options.bound_s, options.runs, "step time", original_error=why)
        return Record.diagnose("fix", replace(base, fixes_tried=(), fix_trial=trial))
    diagnosis = first.record
    findings = [f for f in diagnosis.findings if not options.only or f.id in options.only]
    files = SourceFiles(root=common_root(script, os.getcwd()), script=os.path.abspath(script))
    candidates, not_tried = kinds.plan(
        findings, diagnosis.facts, files, any_severity=bool(options.only)
    )
    not_tried += [
        NotTried(asked, f"{NOT_FOUND} (the original's first {options.bound_s:g} s)")
        for asked in options.only
        if all(f.id != asked for f in diagnosis.findings)
    ]
    limit = max(MIN_LIMIT_S, LIMIT_FACTOR * first.seconds)
    progress(
        f"{len(candidates)} fix(es) to try: {', '.join(c.fix for c in candidates)}; "
        f"{options.runs} run(s) each beside the original's"
        if candidates
        else "no fix to try"
    )
    device_here = gpu_usable(diagnosis.facts) is True
    originals: list[VariantRun] = [first]
    runs: dict[int, list[VariantRun]] = {i: [] for i in range(len(candidates))}
    interrupted = False

    def bounded(name: str, edits) -> VariantRun:
        return run(name, edits, limit)

    def judged(i: int) -> FixTried:
        return judge(candidates[i], originals, runs[i], device_here)

    try:
        _rounds(candidates, options.runs, originals, runs, bounded, judged, progress)
    except KeyboardInterrupt:
        interrupted = True
        progress("interrupted: the fixes measured so far")
    ran = [c for i, c in enumerate(candidates) if runs[i]]  # Ctrl-C: the ones that ran
    tried = [judge(c, originals, runs[i], device_here) for i, c in enumerate(candidates) if runs[i]]
    combined, patch_set = None, []
    if not interrupted:
        combined, patch_set, interrupted = _together(
            ran, tried, originals, run, options, limit, progress
        )
    else:  # the fixes never ran together: the single best one
        patch_set = _best_held(ran, tried)[:1]
    tried = [
        replace(
            t,
            in_patch=i in patch_set,
            left_out=None if i in patch_set or not t.held else _left_out(i, ran, tried, patch_set),
            location=shown_location(t.location),
        )
        for i, t in enumerate(tried)
    ]
    patch_edits = merged([ran[i].edits for i in patch_set])
    base = patch_base(patch_edits)
    patch = unified_diff(patch_edits, base) if patch_set else None
    trial = FixTrialFacts(
        bound_s=options.bound_s,
        runs_per_side=options.runs,
        measure="step time",
        combined=combined,
        patch=patch or None,
        not_tried=tuple((n.finding, n.why) for n in not_tried),
        interrupted=interrupted,
        notes=_notes(script, parent)
        + (
            (f"the patch's paths are relative to {base}: git apply it from there",)
            if patch and base != os.getcwd()
            else ()
        ),
    )
    return Record.diagnose(
        "fix", replace(diagnosis.facts, fixes_tried=tuple(tried), fix_trial=trial)
    )


def _rounds(candidates, planned: int, originals, runs, run, judged, progress) -> None:
    """``planned`` rounds of the original and every fix, then up to MORE_ROUNDS of the
    original and the fixes ``judged`` unclear (``judged(i)``: fix i on the runs so far),
    within the trial's cost, (fixes + 2) x ``planned`` runs: the rounds, the together
    stage's ``planned`` runs kept where two fixes may still hold."""
    for round_ in range(planned if candidates else 0):
        _round(round_, candidates, range(len(candidates)), originals, runs, run, progress)
    budget = (len(candidates) + 2) * planned
    for extra in range(MORE_ROUNDS if candidates else 0):
        verdicts = {i: judged(i) for i in range(len(candidates)) if runs[i]}
        unclear = [i for i, t in verdicts.items() if _unclear(t)]
        if not unclear:
            return
        together = planned if sum(_may_hold(t) for t in verdicts.values()) >= 2 else 0
        spent = len(originals) + sum(len(r) for r in runs.values())
        if spent + 1 + len(unclear) + together > budget:
            progress(
                f"{len(unclear)} fix(es) faster by the estimate, with an interval that "
                "reaches no change: no more rounds within the trial's cost"
            )
            return
        progress(
            f"{len(unclear)} fix(es) faster by the estimate, with an interval that reaches "
            "no change: one more round of them and the original"
        )
        _round(planned + extra, candidates, unclear, originals, runs, run, progress)


def _round(round_, candidates, which, originals, runs, run, progress) -> None:
    """One round: the original (the first round's is the diagnosis), then each fix in
    ``which`` that has not failed. ``run`` takes (name, edits)."""
    if round_ > 0:
        originals.append(run("original", ()))
        _said(progress, originals[-1], f"round {round_ + 1}: original")
    for i in which:
        c = candidates[i]
        if runs[i] and not ended_well(runs[i][-1]):
            continue  # it failed once: it is not the fix, whatever later runs do
        runs[i].append(run(c.fix, c.edits))
        _said(progress, runs[i][-1], f"round {round_ + 1}: {c.fix}")


def _unclear(t: FixTried) -> bool:
    """Ran, computed the same, faster by its estimate, and not proven: more runs decide
    it. A device fix judged on its projection is not (the projection does not narrow)."""
    return (
        t.ran
        and t.same_results is True
        and not t.projected
        and t.called == "same"
        and (t.speedup or 0.0) >= 1 + MIN_STEP_CHANGE
    )


def _may_hold(t: FixTried) -> bool:
    """Held, or unclear: it may join the fixes run together."""
    return t.held or _unclear(t)


def shown_location(location: str | None) -> str | None:
    """``train.py:22`` for a file under the working directory, as records write
    locations; an absolute path elsewhere."""
    parts = location_parts(location)
    if parts is None:
        return location
    path, line = parts
    rel = os.path.relpath(path)
    return f"{path if rel.startswith('..') else rel}:{line}"


def _runner(script: str, args: Sequence[str], options: TrialOptions, parent: str):
    extra = ("--target", options.target) if options.target else ()

    def run(name: str, edits, limit: float | None) -> VariantRun:
        return run_variant(
            name,
            script,
            args,
            edits,
            parent=parent,
            bound_s=options.bound_s,
            limit_s=limit,
            extra=extra,
        )

    return run


def _said(progress: Progress, r: VariantRun, what: str) -> None:
    if not ended_well(r):
        progress(f"{what}: failed: {r.error or f'exit status {r.status}'}")
        return
    units = run_units(r.record.facts) if r.record is not None else None
    mean = (
        f", mean step {units.seconds / units.step_count * 1000:.2f} ms over {units.step_count:,} steps"
        if units is not None and units.step_count
        else ", too few steps to time"
    )
    progress(f"{what}: {r.seconds:.1f} s{mean}")


def patch_base(edits: Sequence) -> str:
    """The working directory, where every edited file is under it (``git apply`` from
    there); else the deepest folder holding them and it."""
    cwd = os.getcwd()
    paths = [os.path.abspath(e.path) for e in edits]
    if all(os.path.commonpath([p, cwd]) == cwd for p in paths):
        return cwd
    return os.path.commonpath([cwd, *paths])


def _best_held(candidates: Sequence[FixCandidate], tried: Sequence[FixTried]) -> list[int]:
    """Per finding and place (two pipelines' fixes are two), the fix that held with the
    largest proven speedup (its interval's low end: a plain tf.function at 8.3x-19.4x
    before XLA at 1.9x-88.7x, their estimates alike); those that fit together."""
    best: dict[tuple[str, str | None], int] = {}
    for i, t in enumerate(tried):
        if not t.held:
            continue
        key = (t.finding, candidates[i].location)
        j = best.get(key)
        if j is None or _proven(t) > _proven(tried[j]):
            best[key] = i
    order = sorted(best.values(), key=lambda i: -_proven(tried[i])[0])
    kept = compatible([candidates[i].edits for i in order])
    return [order[k] for k in kept]


def _left_out(
    i: int, candidates: Sequence[FixCandidate], tried: Sequence[FixTried], patch: Sequence[int]
) -> str:
    """Why fix ``i``, which held, is not in the patch: a fix in it changes the same code
    (or answers the same finding there) with a surer gain; or the fixes together kept
    others."""
    mine = candidates[i].edits
    for j in patch:
        theirs = candidates[j].edits
        same_place = (tried[j].finding, candidates[j].location) == (
            tried[i].finding,
            candidates[i].location,
        )
        if same_place or any(a.overlaps(b) or a.touches(b) for a in mine for b in theirs if a != b):
            return (
                f"not in the patch: {tried[j].fix} changes the same code, and held with a "
                f"surer gain (at least {_low(tried[j])} against {_low(tried[i])}); "
                "try this one alone with --finding " + tried[i].finding
            )
    return (
        "not in the patch: run together with the others that held, they did not hold "
        "(see the fixes together): the patch keeps the single best"
    )


def _low(t: FixTried) -> str:
    return f"{t.speedup_low:.2f}x" if t.speedup_low is not None else "no measured gain"


def _proven(t: FixTried) -> tuple[float, float]:
    """What a fix that held is known to give: its interval's low end (a projected fix's,
    of the projection), then its estimate."""
    if t.projected and t.projected_speedup_low is not None:
        return t.projected_speedup_low, t.projected_speedup or 0.0
    return t.speedup_low or t.speedup or 0.0, t.speedup or 0.0


def _together(candidates, tried, originals, run, options, limit, progress):
    """The fixes that held, run at once: (their judgement, the indices the patch keeps,
    whether Ctrl-C ended it). Together they must hold too, else the patch keeps the
    single best; so does a Ctrl-C while they run."""
    chosen = _best_held(candidates, tried)
    if len(chosen) < 2:
        return None, chosen, False
    together = FixCandidate(
        finding="+".join(tried[i].finding for i in chosen),
        fix=" + ".join(tried[i].fix for i in chosen),
        edits=tuple(merged([candidates[i].edits for i in chosen])),
        device_effect=any(candidates[i].device_effect for i in chosen),
    )
    runs: list[VariantRun] = []
    try:
        for round_ in range(options.runs):
            runs.append(run("together", together.edits, limit))
            _said(progress, runs[-1], f"together {round_ + 1}: {together.fix}")
            if not ended_well(runs[-1]):
                break
    except KeyboardInterrupt:
        progress("interrupted while running the fixes together: the patch keeps the best one")
        return None, chosen[:1], True
    result = judge(together, originals, runs, gpu_usable(originals[0].record.facts) is True)
    if result.held:
        return replace(result, in_patch=True), chosen, False
    # together they do not hold: the patch keeps the single best fix
    return result, chosen[:1], False


def _notes(script: str, parent: str) -> tuple[str, ...]:
    del parent
    return (
        "each run is a fresh copy of the program's folder: what it writes to relative paths "
        "lands there; files larger than 4 MiB and folders outside it are reached through links",
        f"the runs are seeded alike (Python, NumPy and TensorFlow seed 0 before {os.path.basename(script)} "
        "runs; its own seeds win)",
    )
