"""Keras ``compile`` options for a fit whose steps are short: ``steps_per_execution``
(one call of the train function runs many batches, so fit's own Python per batch,
callbacks and input fetch, is paid once per call) and ``jit_compile=True`` (XLA fuses
the step's small ops).

The fit is the training loop the run found (``StepLoop``, ``Model.fit at train.py:40``);
its model is the name the ``fit`` call is made on, and the ``compile`` call on that name
before it, in the same file, is the one changed; where there is none and the model was
made by a function of the program's (``model = build_model()``), the one ``compile``
call in that function. A fit whose model is compiled elsewhere is refused with that
reason.
"""

from __future__ import annotations

import ast
from dataclasses import replace

from gpuwhy.derived.input_wait import production_bound_s
from gpuwhy.derived.stage import derived
from gpuwhy.facts import Facts
from gpuwhy.finding import Finding
from gpuwhy.formatting import duration
from gpuwhy.trial.candidate import FixCandidate, NotTried, SourceFiles, location_parts
from gpuwhy.trial.kinds.float64 import program_sources
from gpuwhy.trial.kinds.step_graph import XLA_TOLERANCE, XLA_WHY
from gpuwhy.trial.source_edits import (
    calls_at,
    calls_named,
    function_named,
    segment,
    set_keywords,
)

STEPS_PER_EXECUTION = 32


def steps_per_execution(
    finding: Finding, facts: Facts, files: SourceFiles
) -> tuple[list[FixCandidate], list[NotTried]]:
    if facts.steps is not None and facts.steps.steps_per_call > 1:
        return [], [
            NotTried(finding.id, f"fit already runs {facts.steps.steps_per_call} steps a call")
        ]
    made = _pipeline_made_the_wait(facts) if finding.id == "input.bound" else None
    if made is not None:
        return [], [NotTried(finding.id, made)]
    per_epoch = _steps_per_epoch(facts, files, finding)
    if per_epoch is None:
        return [], [
            NotTried(
                finding.id,
                "fit's steps_per_epoch is not a number gpuwhy can read: steps_per_execution "
                "must divide it (else fit draws batches of the next epoch from the data)",
            )
        ]
    count = _dividing(per_epoch) if per_epoch else STEPS_PER_EXECUTION
    if count < 2:
        return [], [
            NotTried(finding.id, f"steps_per_epoch={per_epoch} has no divisor to run a call of")
        ]
    return _compile_fix(
        finding,
        facts,
        files,
        f"compile(steps_per_execution={count})",
        steps_per_execution=str(count),
    )


# The pipeline's own work per batch (an upper bound) from this share of the steps' wait
# on: the wait is the pipeline's, which fewer calls per step do not shorten.
PIPELINE_SHARE_OF_WAIT = 0.5


def _pipeline_made_the_wait(facts: Facts) -> str | None:
    """Why steps_per_execution cannot answer this input wait: the pipeline the steps read
    takes about as long to make a batch as the steps wait for one (TF's stage timers);
    None where the wait is more than its work (the call per step: what fewer calls save)."""
    steps = facts.steps
    if steps is None or facts.tfdata is None or not steps.input_wait_fraction:
        return None
    if steps.source != "keras-fit":
        return None  # no fit: the compile kind says so in its own words
    pipeline = derived(facts).steps_pipeline
    made = production_bound_s(pipeline) if pipeline is not None else None
    if made is None or steps.mean_s is None:
        return None
    wait = steps.input_wait_fraction * steps.mean_s
    if made < PIPELINE_SHARE_OF_WAIT * wait:
        return None
    return (
        f"steps_per_execution: the steps wait {duration(wait)} a step for a pipeline whose "
        f"stages work up to {duration(made)} a batch (TF's stage timers): the wait is the "
        "pipeline's, which fewer calls a step do not shorten"
    )


def _dividing(per_epoch: int) -> int:
    """The most steps a call, up to STEPS_PER_EXECUTION, that divide an epoch: Keras
    fills a call's last steps from the data's next batches otherwise (a generator's
    batches of the next epoch: the losses change)."""
    return max(d for d in range(1, STEPS_PER_EXECUTION + 1) if per_epoch % d == 0)


def _steps_per_epoch(facts: Facts, files: SourceFiles, finding: Finding) -> int | None:
    """fit's ``steps_per_epoch`` as written (a number, or a name the file sets to one);
    0 where fit has none (it runs the data to its end); None where it cannot be read."""
    fit = _fit_location(facts, finding)
    read = files.read(fit[0]) if fit is not None else None
    if fit is None or read is None:
        return 0
    _, _, tree = read
    fits = calls_at(tree, fit[1], "fit")
    given = (
        next((k.value for k in fits[0].keywords if k.arg == "steps_per_epoch"), None)
        if fits
        else None
    )
    if given is None:
        return 0
    if isinstance(given, ast.Name):
        values = [
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == given.id for t in node.targets)
        ]
        given = values[0] if len(values) == 1 else given
    if isinstance(given, ast.Constant) and isinstance(given.value, int) and given.value > 0:
        return given.value
    return None


def jit_compile(
    finding: Finding, facts: Facts, files: SourceFiles
) -> tuple[list[FixCandidate], list[NotTried]]:
    if facts.distribute is not None and facts.distribute.replicas > 1:
        return [], [NotTried(finding.id, "XLA under a strategy with several replicas fails in fit")]
    if facts.program is not None and facts.program.keras_auto_jit:
        # compile's jit_compile="auto" (the default): Keras XLA-compiles this step on a
        # GPU already; measured here (no GPU, no XLA by default) it is a change the GPU
        # never sees, and XLA on this CPU is slower besides
        return [], [
            NotTried(
                finding.id,
                'Keras compiles this step with XLA on a GPU already (compile\'s jit_compile="auto", '
                "the default): jit_compile=True would change nothing there",
            )
        ]
    cudnn = facts.program.keras_cudnn_rnn if facts.program is not None else ()
    if cudnn:
        # Keras' jit_compile setter turns XLA off for a model cuDNN runs layers of on a
        # GPU: measured here (no GPU) it would be a change the GPU never makes
        layers = ", ".join(cudnn)
        return [], [
            NotTried(
                finding.id,
                f"cuDNN runs {layers} on a GPU, and Keras compiles no step of such a model "
                "with XLA there: jit_compile=True would change nothing on the GPU",
            )
        ]
    found, why = _compile_fix(
        finding, facts, files, "compile(jit_compile=True)", jit_compile="True"
    )
    return [
        replace(c, tolerance=XLA_TOLERANCE, tolerance_why=XLA_WHY, by_mean=True) for c in found
    ], why


def _compile_fix(
    finding: Finding, facts: Facts, files: SourceFiles, fix: str, **keywords: str
) -> tuple[list[FixCandidate], list[NotTried]]:
    fit = _fit_location(facts, finding)
    if fit is None:
        return [], [NotTried(finding.id, "the training loop is not Keras fit")]
    read = files.read(fit[0])
    if read is None:
        return [], [NotTried(finding.id, f"{fit[0]} is not a file of the program's")]
    source, lines, tree = read
    fits = calls_at(tree, fit[1], "fit")
    if not fits or not isinstance(fits[0].func, ast.Attribute):
        return [], [NotTried(finding.id, f"no model.fit(...) call at {fit[0]}:{fit[1]}")]
    model = segment(source, fits[0].func.value)
    compiles = [
        c
        for c in calls_named(tree, "compile")
        if isinstance(c.func, ast.Attribute)
        and segment(source, c.func.value) == model
        and c.lineno <= fit[1]
    ]
    if compiles:
        call = max(compiles, key=lambda c: c.lineno)
        return [
            FixCandidate(
                finding.id,
                f"{model}.{fix}",
                tuple(set_keywords(source, lines, fit[0], call, **keywords)),
                location=f"{fit[0]}:{call.lineno}",
            )
        ], []
    built = _built_by(tree, model, fit[1])
    found = _compile_in(built, facts, files) if built is not None else None
    if found is None:
        return [], [
            NotTried(
                finding.id,
                f"no {model}.compile(...) before the fit in {fit[0]}"
                + (f", nor one compile(...) in {built}()" if built else ""),
            )
        ]
    path, (b_source, b_lines, _), call = found
    receiver = segment(b_source, call.func.value) if isinstance(call.func, ast.Attribute) else model
    return [
        FixCandidate(
            finding.id,
            f"{receiver}.{fix} in {built}()",
            tuple(set_keywords(b_source, b_lines, path, call, **keywords)),
            location=f"{path}:{call.lineno}",
        )
    ], []


def _built_by(tree: ast.Module, model: str, before: int) -> str | None:
    """``build_model`` where ``model = build_model(...)`` is the last assignment of the
    fit's model before the fit: a helper that makes and compiles it."""
    made = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and node.lineno <= before
        and any(isinstance(t, ast.Name) and t.id == model for t in node.targets)
    ]
    if not made:
        return None
    value = max(made, key=lambda n: n.lineno).value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
        return value.func.id
    return None


def _compile_in(name: str, facts: Facts, files: SourceFiles):
    """(path, its read, the call) of the one ``.compile(...)`` in the program's function
    ``name``; None where there is no such function or not exactly one call."""
    for path, source, lines, tree in program_sources(facts, files):
        fn = function_named(tree, name)
        if fn is None:
            continue
        calls = [c for c in calls_named(fn, "compile") if isinstance(c.func, ast.Attribute)]
        return (path, (source, lines, tree), calls[0]) if len(calls) == 1 else None
    return None


def _fit_location(facts: Facts, finding: Finding) -> tuple[str, int] | None:
    """The fit call the finding is about: a loop of several fits of one model is named
    ``Model.fit at a.py:99, a.py:133, a.py:184``; the one at the finding's own place
    (the projected step's fit), else the first."""
    if facts.steps is None:
        return None
    for loop in facts.steps.loops:
        if loop.source == "keras-fit" and " at " in loop.name:
            sites = loop.name.rsplit(" at ", 1)[1].split(", ")
            chosen = finding.location if finding.location in sites else sites[0]
            return location_parts(chosen)
    return None
