"""One module per kind of fix: each reads the facts of the first run and the program's
source, and returns the fixes it can write as edits (``FixCandidate``) and the findings
it answers but cannot fix here (``NotTried``, with why). Pure: no file is written."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from gpuwhy.facts import Facts
from gpuwhy.finding import Finding
from gpuwhy.fixes.trial_text import BESIDES
from gpuwhy.trial.candidate import FixCandidate, NotTried, SourceFiles
from gpuwhy.trial.kinds import (
    batch_first,
    device_blocks,
    eager_switches,
    epoch_iterator,
    float64,
    helper_cache,
    input_pipeline,
    keras_compile,
    keras_dataset,
    mixed_precision,
    one_batch_call,
    retracing,
    side_loop,
    step_graph,
    step_xla,
)
from gpuwhy.trial.source_edits import EditError, apply, parse

Planner = Callable[[Finding, Facts, SourceFiles], tuple[list[FixCandidate], list[NotTried]]]

# finding id -> the kinds of fix that answer it, in the order they are tried
PLANNERS: dict[str, tuple[Planner, ...]] = {
    "launch.eager-ops": (eager_switches.candidates, step_graph.candidates),
    "launch.retracing": (retracing.candidates,),
    "placement.float64": (float64.candidates,),
    "placement.forced-cpu": (device_blocks.candidates,),
    "input.bound": (
        input_pipeline.candidates,
        batch_first.candidates,
        keras_dataset.workers,
        keras_compile.steps_per_execution,
    ),
    "input.sequential-map": (input_pipeline.candidates, batch_first.candidates),
    "input.python-function": (input_pipeline.candidates, keras_dataset.workers),
    "input.no-prefetch": (input_pipeline.candidates,),
    "input.no-cache": (helper_cache.candidates, input_pipeline.candidates),
    "input.iterator-end-wait": (epoch_iterator.candidates,),
    "compression.cpu-codec": (input_pipeline.candidates,),  # its cache after the decode
    # the input a GPU would wait for: what speeds up the pipeline here speeds it there (its
    # fix names the cache, parallel maps and a pipeline built with tf.data; it said "no
    # automatic fix" beside a cache that ran the weather forecast's epochs 1.8x faster)
    "input.projected-bound": (
        input_pipeline.candidates,
        batch_first.candidates,
        keras_dataset.workers,
    ),
    "launch.host-bound": (
        keras_compile.steps_per_execution,
        keras_compile.jit_compile,
        step_xla.candidates,
    ),
    "launch.projected-bound": (
        keras_compile.steps_per_execution,
        keras_compile.jit_compile,
        step_xla.candidates,
    ),
    "gpu.underutilized": (
        keras_compile.steps_per_execution,
        keras_compile.jit_compile,
        step_xla.candidates,
    ),
    "tensorcore.unused": (mixed_precision.candidates,),
    "steps.periodic-stall": (side_loop.candidates,),
    "steps.keras-call-per-step": (one_batch_call.candidates,),
}


def plan(
    findings: list[Finding], facts: Facts, files: SourceFiles, any_severity: bool = False
) -> tuple[list[FixCandidate], list[NotTried]]:
    """Every fix gpuwhy can try for the high and medium findings (every finding given,
    with ``any_severity``: the ones the user named), each once (two findings answered by
    one edit share it), and the findings it cannot fix."""
    tried: list[FixCandidate] = []
    refused: list[NotTried] = []
    seen: dict[tuple, str] = {}  # edits -> the finding they were first tried for
    for finding in findings:
        planners = PLANNERS.get(finding.id)
        if finding.severity not in ("high", "medium") and not any_severity:
            if planners and finding.severity == "low":
                refused.append(
                    NotTried(
                        finding.id,
                        f"low severity: tried only when asked (gpuwhy fix --finding {finding.id})",
                    )
                )
            continue
        if not planners:
            if finding.fix and not finding.id.startswith(("env.", "gpu.")):
                refused.append(
                    NotTried(finding.id, "gpuwhy fix has no automatic fix for it: see its fix")
                )
            continue
        before = len(tried)
        why: list[str] = []
        for planner in planners:
            found, not_tried = planner(finding, facts, files)
            why += [n.why for n in not_tried]
            for candidate in found:
                key = tuple(sorted(candidate.edits, key=lambda e: (e.path, e.line, e.col)))
                if key in seen:
                    if seen[key] != finding.id:
                        why.append(f"{candidate.fix}: tried for {seen[key]}, which it answers too")
                    continue
                misfit = _misfit(candidate, files)
                if misfit is not None:
                    why.append(f"{candidate.fix}: its edits do not fit the file ({misfit})")
                    continue
                seen[key] = finding.id
                tried.append(candidate)
        why = list(dict.fromkeys(why))  # two kinds' one reason ("not Keras fit") said once
        if len(tried) == before:
            refused.append(NotTried(finding.id, "; ".join(why) or "no fix gpuwhy can apply here"))
        elif why:  # the fixes the other kinds did not write, and why (a map already parallel)
            refused.append(NotTried(finding.id, BESIDES + "; ".join(why)))
    return _told_apart(tried), refused


def _told_apart(candidates: list[FixCandidate]) -> list[FixCandidate]:
    """Fixes of the same words (one kind's fix for two pipelines) named each with the
    place it changes, so that the rounds and the results say which one ran: a new
    user's trial read "2 fix(es) to try: the generator's arrays sliced by
    from_tensor_slices, the generator's arrays sliced by from_tensor_slices"."""
    names = [c.fix for c in candidates]
    return [
        replace(c, fix=f"{c.fix} at {c.location}") if names.count(c.fix) > 1 and c.location else c
        for c in candidates
    ]


def _misfit(candidate: FixCandidate, files: SourceFiles) -> str | None:
    """Why the candidate's edits cannot be made (overlapping, out of range), or None:
    each file's edits made on its text as read, the result parsed."""
    by_file: dict[str, list] = {}
    for e in candidate.edits:
        by_file.setdefault(e.path, []).append(e)
    for path, edits in by_file.items():
        read = files.read(path)
        if read is None:
            return f"{path} cannot be read"
        try:
            text = apply(read[0], edits)
        except EditError as e:
            return str(e)
        if parse(text, path) is None:
            return "the edited file is not valid Python"
    return None


def fixable_ids() -> frozenset[str]:  # the same as gpuwhy.fixes.tried.TRIED_BY_FIX
    """The finding ids ``gpuwhy fix`` can try a fix for (their snippets say so)."""
    return frozenset(PLANNERS)
