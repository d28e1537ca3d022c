"""The one-line text of each fact section, shown the same by every renderer: the
terminal report and the HTML report both say "Steps  96 by next() ...; median 91.7 ms"
from these functions, never from each other's private helpers."""

from __future__ import annotations

import json
from typing import Any

from gpuwhy.derived.stage import derived
from gpuwhy.facts import (
    EagerFacts,
    Facts,
    OpGroup,
    PlacementFacts,
    ProjectionFacts,
)
from gpuwhy.formatting import duration
from gpuwhy.verdict import gpu_usable

# a run on a machine with no usable GPU, no --target asked for: what a GPU's shorter step
# would wait on (input, host work) is what the user came for, and this run cannot show it
NO_GPU_NOTE = (
    "no GPU here: the steps ran on the CPU, so what they would wait for on a GPU (input, "
    "host work) is not measured; --target A100 (or H100, L4, T4 ...) on gpuwhy run, or on "
    "gpuwhy report with this run's record, projects the step onto one, as a prediction"
)


def program_notes(facts: Facts) -> list[str]:
    """The run's notes: the program's, then why ``--target`` gave no projection (the
    derivation stage's, where it could not project), or, on a machine with no usable GPU
    and no ``--target``, how to see the step a GPU would run."""
    notes = list(facts.program.notes) if facts.program is not None else []
    refused = derived(facts).projection_refused
    if refused is not None:
        return [*notes, refused]
    steps = facts.steps
    if facts.target is None and steps is not None and steps.count and gpu_usable(facts) is False:
        return [*notes, NO_GPU_NOTE]
    return notes


def finding_causes(evidence: dict[str, Any]) -> list[tuple[str, str]] | None:
    """The ``causes`` of a finding as (title, detail) text, or None when its evidence has
    none in the shape rules write (a list of objects). Evidence is free-form in the
    schema, so a saved record may hold anything there: it is then shown as plain
    evidence rather than crash the report."""
    causes = evidence.get("causes")
    if not (isinstance(causes, list) and causes and all(isinstance(c, dict) for c in causes)):
        return None
    return [(_text(c.get("title", "")), _text(c.get("detail", ""))) for c in causes]


def _text(value: Any) -> str:
    """A free-form evidence value as text: strings as they are, anything else as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def tensorflow_line(tf) -> str:
    if not tf.installed:
        return "not installed" + (f" ({tf.import_error})" if tf.import_error else "")
    if not tf.import_ok:
        return f"import failed: {tf.import_error}"
    build = tf.build or {}
    kind = (
        "CUDA build"
        if build.get("is_cuda_build")
        else ("ROCm build" if build.get("is_rocm_build") else "CPU-only build")
    )
    gpus = f"{len(tf.gpus)} GPU(s) listed" + (
        f", matmul ran on {tf.confirm_device}" if tf.confirm_device else ""
    )
    took = f"; import took {tf.import_seconds:.1f} s" if tf.import_seconds is not None else ""
    return f"{tf.version} from '{tf.distribution or '?'}', {kind}; {gpus}{took}"


def missing_library(lib) -> str:
    text = f"missing ({lib.pip_package})"
    if lib.other_versions:
        text += f"; other versions: {', '.join(lib.other_versions)}"
    if lib.error and "No such file or directory" not in lib.error:
        text += f"; {lib.error}"  # e.g. found but a dependency of it is missing
    return text


def code_language(code: str) -> str:
    return (
        "python"
        if any(t in code for t in ("import ", "tf.", "def ", "model."))
        and "pip install" not in code
        else "bash"
    )


def placement_where(placement: PlacementFacts) -> str:
    """Where the placement comes from: predicted for which GPU, or seen on one."""
    if placement.predicted:
        return (
            f"predicted for this machine's {placement.gpu_name}"
            if placement.gpu_name
            else "predicted for a GPU machine: no GPU here"
        )
    return f"seen on {placement.gpu_name or 'this GPU'}"


def eager_site_rows(eager: EagerFacts) -> list[tuple[str, str, str, str, str]]:
    """Eager ops by source line: op, count (per sampled step when steps were sampled),
    median elements, device, file:line."""
    per = max(eager.sampled_steps, 1)
    return [
        (
            s.op,
            f"{s.count / per:,.1f}" if eager.sampled_steps else f"{s.count:,}",
            "?" if s.median_elements is None else f"{s.median_elements:,}",
            s.device or "?",
            s.location or "?",
        )
        for s in eager.sites
    ]


def op_group_cells(group: OpGroup, locations: int | None = None) -> tuple[str, ...]:
    """One placement row: op, dtypes, device, where it computes, count, reason, and the
    lines that created it (the first ``locations`` of them, all when None)."""
    return (
        group.op,
        ", ".join(dict.fromkeys(group.in_dtypes + group.out_dtypes)) or "-",
        group.device,
        group.computes_on,
        f"{group.count:,}" + (" (loop)" if group.in_loop else ""),
        group.reason
        + (" by TF/Keras' own code" if group.by_library and group.reason == "forced-cpu" else "")
        + (f" with {group.colocated_with}" if group.colocated_with else ""),
        ", ".join(group.locations[:locations]) or "-",
    )


def projection_lines(projection: ProjectionFacts) -> list[str]:
    """The projection, said as one: the step's band and its parts, then the input."""
    band = f"{duration(projection.step_low_s)}–{duration(projection.step_high_s)}"
    eager = (
        f"Python issuing {projection.eager_ops_per_step:,.0f} eager ops "
        f"{duration(projection.eager_s, True)} (measured here)"
        if projection.eager_s and projection.eager_ops_per_step
        else None
    )
    if projection.host_s:
        eager = (
            f"the host's own work {duration(projection.host_s, True)} "
            f"({duration(projection.host_low_s or 0.0, True)}–"
            f"{duration(projection.host_high_s or 0.0, True)}, measured here)"
        )
    if not projection.graph:
        lines = [
            f"step of {projection.function}: at least {duration(projection.step_s)} ({band}): "
            f"{eager}; the GPU work of its ops is unknown (no tf.function)"
        ]
    else:
        lines = [
            f"step of {projection.function}: {duration(projection.step_s)} ({band}): "
            f"matmul/conv {duration(projection.tensor_s, True)}, other kernels "
            f"{duration(projection.kernels_s, True)} ({projection.kernels:,}"
            + (
                f"; {duration(projection.launch_bound_s, True)} of it launches"
                if projection.launch_bound_s
                else ""
            )
            + "), copies "
            f"{duration(projection.copies_s, True)}"
            + (
                f", ops on the CPU {duration(projection.cpu_ops_s, True)} (measured here: "
                f"{projection.cpu_ops_measured} of {projection.cpu_ops})"
                if projection.cpu_ops_s
                else ""
            )
            + (f"; {eager}, overlapping the GPU's work" if eager else "")
            + (f"; batch {projection.batch} as run" if projection.batch else "")
        ]
    if projection.input_wait_fraction is not None:
        made = []
        if projection.input_batch_s is not None:
            # TF's stage timers run on the cores the model's steps share: on a busy host
            # they read longer than the pipeline alone takes (a generator's 640 ms beside
            # the model, 150 ms on its own), never shorter
            made.append(
                f"{duration(projection.input_batch_s)} by TF's stage timers (beside the model: "
                "at most its time alone)"
            )
        if projection.input_batch_measured_s is not None:
            made.append(
                f"{duration(projection.input_batch_measured_s)} as it delivered here beside "
                "the model"
            )
        low, high = projection.input_wait_low or 0.0, projection.input_wait_high or 0.0
        lines.append(
            f"input: the pipeline makes a batch in {' to '.join(made)} on this host "
            f"(measured): steps would wait {projection.input_wait_fraction:.0%} of the time "
            f"({low:.0%}–{high:.0%})"
        )
    if projection.measured_step_s:
        lines.append(
            f"measured here, on the {projection.gpu} itself: {duration(projection.measured_step_s)}"
            f" per step less its input wait (projected / measured "
            f"{projection.step_s / projection.measured_step_s:.2f})"
        )
    return lines + list(projection.notes[1:])
