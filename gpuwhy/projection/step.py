"""The ``projection`` section: a run's training step, projected onto a named GPU, joined
with what the run measured of its input pipeline.

The step's GPU time comes from the cost model (cost.py); the ops that stay on the CPU on
any GPU at the time a few profiled steps measured them here (cpu_ops.py); the input
side is measured on this host, two ways: the pipeline alone (TF's stage timers, the slowest stage at the
threads it ran with) and, where the pipeline set the steps' pace (they waited for input
most of their time), as it delivered batches beside the model (the mean step; the model
took cores from it, so an upper bound).
Where making a batch takes longer than the projected step, the GPU would wait for it:
that share of each step is the projected input wait, its band spanning both
measurements and the step's band.
"""

from __future__ import annotations

from gpuwhy.derived.capture import kernel_pattern
from gpuwhy.derived.loop_steps import loop_steps
from gpuwhy.derived.pipeline import first_pass
from gpuwhy.facts import (
    EagerFacts,
    Facts,
    NvmlReading,
    PipelineFacts,
    PlacementFacts,
    ProjectionFacts,
    StepFacts,
)
from gpuwhy.facts.step_profile import StepProfile
from gpuwhy.formatting import duration
from gpuwhy.gpu_specs import GpuSpec, UnknownGpuError, find_gpu
from gpuwhy.projection.cost import (
    DERIVED_WIDTH,
    LAUNCH_S,
    ZERO,
    Band,
    StepProjection,
    project_step,
    rnn_layer,
    step_ops,
)
from gpuwhy.projection.cpu_ops import (
    HOST_FACTOR,
    CpuOpsTime,
    count_in,
    cpu_groups,
    measured_cpu_ops,
)
from gpuwhy.projection.derive import auto_gpu
from gpuwhy.projection.host import (
    UNPROFILED,
    HostWork,
    function_loop,
    host_work,
    traced_function,
    unmeasured_note,
)

AUTO = "auto"
# The median gap between two eager ops measured here, as dispatch on the target: a
# little less where part of it was a small CPU kernel, a launch more where the GPU adds
# one per op (uncalibrated: docs/projection.md).
EAGER_LOW = 0.7
# The steps' own time is what the pipeline takes per batch only where the pipeline set
# their pace: the steps, and the typical step, waited for input at least this share of
# their time (below it the model's compute set the pace).
DELIVERED_MIN_WAIT = 0.5
# Steps that waited for input under this share of their time, over at least
# KEPT_UP_STEPS of them, had their batches delivered as fast as they took them: a
# prefetch buffer filled before the loop covers a few steps, not this many
KEPT_UP_WAIT = 0.05
KEPT_UP_STEPS = 50
KEPT_UP_MARGIN = 2.0  # stage timers this many times the mean step contradict it


class NothingToProject(Exception):
    """The run gave the projection nothing to cost: no traced function, no eager step."""


def resolve_target(requested: str, facts: Facts, peaks: NvmlReading | None = None) -> GpuSpec:
    """The table's GPU for --target: a name, or ``auto`` for this machine's first GPU
    (one the table lacks: its peaks derived from ``peaks``, what NVML reported of it
    when the run was watched)."""
    if requested.strip().lower() != AUTO:
        return find_gpu(requested)
    devices = facts.devices or ()
    if devices:  # a GPU the table lacks: its peaks derived from what NVML reports
        return auto_gpu(devices[0].name, peaks)
    if facts.placement is not None and facts.placement.gpu_name:  # the one TF saw here
        return find_gpu(facts.placement.gpu_name)
    raise UnknownGpuError(
        "--target auto projects onto the GPU of the machine the program ran on, and it had "
        "none: name one instead"
    )


def batch_seconds(pipeline: PipelineFacts | None) -> float | None:
    """What the pipeline needs per batch on this host, standing alone, over the epochs
    this run trained: its slowest working stage's time per root element at the threads
    it ran with (TF's stage timers; a prefetch, shuffle or repeat only where nothing else
    was timed). Stages before a ``cache()`` run in the first epoch only (the cache
    replays their elements after it): where the run's passes over the pipeline are
    known (one iterator a pass, no repeat after the cache), the first pass's time per
    batch (those stages with the rest) is averaged in over them; with a repeat after the
    cache (passes unknown, a long run) they are left out (derived/pipeline.py)."""
    return first_pass(pipeline).batch_s if pipeline is not None else None


def first_epoch_note(pipeline: PipelineFacts | None) -> str | None:
    """Said where stages before a cache run in the first epoch only: what they cost
    then, and how the input's time per batch counted them."""
    if pipeline is None:
        return None
    run = first_pass(pipeline)
    if run.filling is None or run.filling_s is None:
        return None
    name, then = pipeline.stages[run.filling].name, duration(run.filling_s)
    if run.counts:
        return (
            f"stages before cache() run in the first epoch only: the slowest, "
            f"{name}, takes {then} per batch then, against {duration(run.steady_s)} "
            f"after it; the input's time per batch is their mean over this run's "
            f"{run.passes} pass{'es' if run.passes != 1 else ''} (a longer run weighs the "
            "first epoch less)"
        )
    return (
        f"stages before cache() run in the first epoch only and are left out of the input's "
        f"time per batch (the slowest, {name}, takes {then} per batch then)"
    )


def kept_up_batch_seconds(steps: StepFacts | None) -> float | None:
    """Where the steps hardly waited for their input (measured, under ``KEPT_UP_WAIT``
    of their time over at least ``KEPT_UP_STEPS`` steps), the pipeline delivered each
    batch as fast as the steps took one: on this host, beside the model, its time per
    batch is at most the mean step. None where the wait was not measured or was longer."""
    if steps is None or steps.input_wait_fraction is None or steps.mean_s is None:
        return None
    if steps.input_wait_fraction >= KEPT_UP_WAIT or steps.count < KEPT_UP_STEPS:
        return None
    return steps.mean_s


def measured_batch_seconds(
    steps: StepFacts | None, min_wait: float = DELIVERED_MIN_WAIT
) -> float | None:
    """Per batch as the steps got them on this host, where the pipeline set their pace:
    the steps waited for input at least ``min_wait`` of their time, and the typical
    (median) step did too. Each step then lasted as long as the pipeline took to
    deliver, so the mean step is the time per batch (with the model computing on the
    same cores: an upper bound). Where the model's own compute set the pace (a
    prefetched pipeline that the steps seldom waited for, a few long waits at an
    epoch's start), the steps' time is the model's and says nothing of what the
    pipeline can deliver: None."""
    if steps is None or steps.input_wait_fraction is None or steps.input_wait_fraction < min_wait:
        return None
    if not steps.input_wait_resolved:
        return None  # a wait within its uncertainty: no pace of the pipeline's
    typical = steps.input_wait_median_s
    if steps.median_s and typical is not None and typical < min_wait * steps.median_s:
        return None
    return steps.mean_s


def _share(batch_s: float, step_s: float) -> float:
    return round(max(0.0, batch_s - step_s) / max(batch_s, step_s), 4)


def eager_dispatch(eager: EagerFacts | None, steps: StepFacts | None = None) -> Band | None:
    """Per step, Python issuing the eager ops of the step, measured here, the same on
    the target's host: the share of the sampled steps the gaps between their ops took
    (the direct sum the report's step split and launch.eager-ops state) times the typical
    step, else ops per step x the median gap between two (which counts a gap for every op
    where a step has one fewer, and a few ops' gaps may hold other Python). None where no
    step was sampled."""
    if eager is None or not eager.per_step or eager.median_gap_us is None:
        return None
    measured = _issuing_s(eager, steps)
    mid = measured if measured is not None else eager.per_step * eager.median_gap_us * 1e-6
    return Band(EAGER_LOW * mid, mid, mid + eager.per_step * LAUNCH_S[0])


def step_band(device: Band, host: Band | None) -> Band:
    """The step from its GPU work and the host's own (eager dispatch, the loop between
    calls, each call's cost): the GPU runs kernels while the host prepares the next, so
    at best they overlap (the larger), at worst they add up."""
    if host is None:
        return device
    return Band(max(device.low, host.low), max(device.mid, host.mid), device.high + host.high)


def _waits(
    alone_s: float | None, measured_s: float | None, step: Band
) -> tuple[float | None, float | None, float | None]:
    """Projected input-wait share: (middle, lowest, highest). The lowest pairs the
    slowest projected step with the pipeline alone; the highest the fastest step with
    the pipeline as it delivered here; the middle, the middle step with the geometric
    mean of the two (one of them where only one is known)."""
    known = [t for t in (alone_s, measured_s) if t]
    if not known:
        return None, None, None
    typical = (known[0] * known[-1]) ** 0.5
    return (
        _share(typical, step.mid),
        _share(min(known), step.high),
        _share(max(known), step.low),
    )


def measured_compute_s(facts: Facts, gpu: GpuSpec, steps: StepFacts | None) -> float | None:
    """The step this run measured on the target GPU itself, less its input wait: what
    the projection models. None unless TensorFlow trained on a GPU of the target's
    model here (``program.gpus_seen_by_tf``, the first NVML device's name)."""
    program, devices = facts.program, facts.devices or ()
    if steps is None or steps.median_s is None or program is None or not devices:
        return None
    if not program.gpus_seen_by_tf:
        return None
    try:
        here = find_gpu(devices[0].name)
    except UnknownGpuError:
        return None
    if here.name != gpu.name:
        return None
    return max(0.0, steps.median_s - (steps.input_wait_median_s or 0.0))


def projection_facts(
    facts: Facts,
    requested: str,
    pipeline: PipelineFacts | None = None,
    steps: StepFacts | None = None,
    eager: EagerFacts | None = None,
    profile: StepProfile | None = None,
    unprofiled: str = UNPROFILED,
    peaks: NvmlReading | None = None,
) -> ProjectionFacts:
    """The section for ``requested`` (a GPU name or ``auto``), from the placement audit,
    the eager ops each step issued and, where given, the pipeline the steps read and a
    few steps profiled (``profile``; where None, ``unprofiled`` says why).
    Raises NothingToProject when the run traced no function and sampled no eager step."""
    gpu = resolve_target(requested, facts, peaks)
    placement = facts.placement
    projection = (
        project_step(
            placement,
            gpu,
            pipeline.element_bytes if pipeline else None,
            xla_on_gpu=bool(facts.program and facts.program.keras_auto_jit),
            cudnn_layers=facts.program.keras_cudnn_rnn if facts.program else (),
        )
        if placement is not None
        else None
    )
    host: HostWork | None = None
    if projection is not None:
        steps, eager = _function_loop_steps(steps, eager, facts, projection.function)
        host = host_work(steps, facts.tracing, projection.function, profile, unprofiled)
    dispatch = eager_dispatch(eager, steps) if steps is not None and steps.count else None
    if projection is None and dispatch is None:
        raise NothingToProject(
            "no tf.function was traced and no step's eager ops were counted: nothing to cost"
        )
    cpu: CpuOpsTime | None = None
    cpu_notes: list[str] = []
    if projection is not None and placement is not None:
        cpu, cpu_notes = _cpu_ops(placement, projection.function, profile, unprofiled)
    device = projection.step if projection is not None else ZERO
    if cpu is not None:
        device = device + cpu.band  # on the path of the step: after them, or before
    # the time between the calls holds the eager ops (measured whole): counted once
    host_band = _host_band(host, dispatch)
    step = step_band(device, host_band)
    batch_s = batch_seconds(pipeline)
    measured_s = measured_batch_seconds(steps)
    notes = ["a projection from the traced graph and published peaks, not a measurement"]
    if gpu.derived_from:
        notes.append(
            f"{gpu.name} is not in gpuwhy's GPU table: its peaks are {gpu.derived_from} "
            f"(not a datasheet), and the band is {DERIVED_WIDTH:g}x wider for it"
        )
    first_epoch = first_epoch_note(pipeline)
    if first_epoch is not None:
        notes.append(first_epoch)
    if batch_s is not None and measured_s is not None and batch_s > measured_s:
        # alone it cannot be slower than beside the model: the direct one is trusted
        notes.append(
            f"TF's stage timers gave {duration(batch_s)} per batch, more than the "
            f"{duration(measured_s)} measured between the steps' batches: the measured "
            "one is used"
        )
        batch_s = None
    kept_up = kept_up_batch_seconds(steps)
    if batch_s is not None and kept_up is not None and batch_s > KEPT_UP_MARGIN * kept_up:
        # the direct measurement again: a pipeline this slow could not have kept up
        assert steps is not None and steps.input_wait_fraction is not None  # kept_up's
        notes.append(
            f"TF's stage timers gave {duration(batch_s)} per batch, yet the steps of "
            f"{duration(kept_up)} waited for their batches "
            f"{steps.input_wait_fraction:.0%} of their time: the pipeline kept up with "
            "them, so the timers are not used"
        )
        batch_s = None
    wait, wait_low, wait_high = _waits(batch_s, measured_s, step)
    jit = projection is not None and (
        projection.xla_assumed or (_jit(facts, projection.function) and not projection.xla_dropped)
    )
    if host is not None:
        notes.append(host.note)
    elif projection is not None:
        notes.append(
            unmeasured_note(steps, facts.tracing, projection.function, profile, unprofiled)
        )
    if dispatch is not None and eager is not None and (host is None or host.between_s is None):
        notes.append(
            f"Python issues {eager.per_step:,.0f} eager ops per step, "
            f"{duration(dispatch.mid)} {_dispatch_measured(eager, steps)}: the step is no "
            "shorter on any GPU"
            + (
                ""
                if projection is not None
                else " (no tf.function in it: the GPU work of "
                "its ops is not in a graph the audit reads, so the step is at least this)"
            )
        )
    measured_step = measured_compute_s(facts, gpu, steps)
    if projection is not None and measured_step is not None:
        notes += _captured_kernels(facts, projection)
    if projection is not None and projection.xla_assumed:
        notes.append(
            "Keras compile(jit_compile='auto') XLA-compiles this model's train step on a "
            "GPU machine (not on this one, without a GPU): projected as XLA-compiled"
        )
    if projection is not None and projection.cudnn_loops:
        notes.append(_cudnn_note(projection, facts))
    if projection is not None and placement is not None:
        notes += _loop_notes(placement, projection.function)
    if projection is not None:
        notes += _graph_notes(projection, jit)
        notes += cpu_notes
    function = (
        projection.function
        if projection is not None
        else f"the eager step ({steps.marker if steps is not None else 'loop'})"
    )
    batches = sorted(
        {op.flops_batch for op in placement.tensor_ops if op.flops_batch} if placement else ()
    )
    return ProjectionFacts(
        gpu=gpu.name,
        requested=requested,
        function=function,
        step_s=round(step.mid, 9),
        step_low_s=round(step.low, 9),
        step_high_s=round(step.high, 9),
        tensor_s=round(projection.tensor.mid, 9) if projection else 0.0,
        kernels_s=round(projection.kernels.mid, 9) if projection else 0.0,
        copies_s=round(projection.copies.mid, 9) if projection else 0.0,
        cpu_ops_s=round(cpu.band.mid, 9) if cpu else 0.0,
        cpu_ops_low_s=round(cpu.band.low, 9) if cpu else None,
        cpu_ops_high_s=round(cpu.band.high, 9) if cpu else None,
        cpu_ops=_cpu_op_count(placement, projection.function) if placement and projection else 0,
        cpu_ops_measured=cpu.matched if cpu else 0,
        cpu_ops_measured_by=cpu.measured_by if cpu else None,
        tensor_ops=projection.tensor_ops if projection else 0,
        tensor_ops_unsized=projection.tensor_ops_unsized if projection else 0,
        kernels=projection.kernel_count if projection else 0,
        kernels_unsized=projection.kernels_unsized if projection else 0,
        launch_bound_s=round(projection.launch_bound.mid, 9) if projection else 0.0,
        launch_bound_kernels=projection.launch_bound_kernels if projection else 0,
        jit_compile=jit,
        cudnn_rnn=_cudnn_layers(projection, facts) if projection is not None else (),
        batch=batches[0] if len(batches) == 1 else None,
        input_batch_s=_rounded(batch_s),
        input_batch_measured_s=_rounded(measured_s),
        input_wait_fraction=wait,
        input_wait_low=wait_low,
        input_wait_high=wait_high,
        calibrated=jit and (host_band is None or host_band.mid < 0.1 * step.mid),
        measured_step_s=_rounded(measured_step),
        device_s=round(device.mid, 9) if projection is not None else None,
        device_low_s=round(device.low, 9) if projection is not None else None,
        device_high_s=round(device.high, 9) if projection is not None else None,
        # the host's part as costed: its measured work, and Python issuing the eager ops
        # where nothing between the calls was measured
        host_s=round(host_band.mid, 9) if host is not None and host_band else 0.0,
        host_low_s=round(host_band.low, 9) if host is not None and host_band else None,
        host_high_s=round(host_band.high, 9) if host is not None and host_band else None,
        host_between_s=_rounded(host.between_s) if host is not None else None,
        call_overhead_s=_rounded(host.call_overhead_s) if host is not None else None,
        eager_s=round(dispatch.mid, 9) if dispatch is not None else 0.0,
        eager_ops_per_step=round(eager.per_step, 1)
        if dispatch and eager and eager.per_step
        else None,
        graph=projection is not None,
        notes=tuple(notes),
    )


def _function_loop_steps(
    steps: StepFacts | None, eager: EagerFacts | None, facts: Facts, label: str
) -> tuple[StepFacts | None, EagerFacts | None]:
    """The steps of the projected function's loop, where the run trained in several, and
    the eager ops counted in them: keras-io's custom-loop guide runs two eager loops of
    18 ms steps, then the same step traced (1.3 ms), and the traced step was projected
    with the host work of all three ("13.1 ms between its calls" of 0.3 ms). Where the
    eager ops' count is of other loops than this one (``of_loops``), this loop issues
    few (under a quarter of theirs): none are added, its time between calls holds them."""
    loop = function_loop(steps, traced_function(facts.tracing, label))
    if steps is None or loop is None:
        return steps, eager
    if eager is not None and eager.of_loops and loop.name not in eager.of_loops:
        eager = None
    return loop_steps(steps, loop), eager


def _issuing_s(eager: EagerFacts, steps: StepFacts | None) -> float | None:
    """Seconds a typical step spends issuing its eager ops, from the share the gaps
    between them took of the sampled steps (None: no share, or no typical step)."""
    if eager.dispatch_fraction is None or steps is None or not steps.median_s:
        return None
    return eager.dispatch_fraction * steps.median_s


def _dispatch_measured(eager: EagerFacts, steps: StepFacts | None) -> str:
    """How eager_dispatch measured the time Python issues the step's eager ops."""
    if _issuing_s(eager, steps) is not None:
        return (
            f"issuing them ({eager.dispatch_fraction:.0%} of the sampled steps' time, "
            "measured here)"
        )
    return f"at the {eager.median_gap_us:.0f} µs between two measured here"


def _host_band(host: HostWork | None, dispatch: Band | None) -> Band | None:
    """The host's work per step: measured between the calls and in each call where the
    run gave it (the eager ops are between the calls), else Python issuing the eager ops
    (a step with no traced function, or no steps to measure between)."""
    if host is None:
        return dispatch
    if host.between_s is None and dispatch is not None:
        return host.band + dispatch
    return host.band


def _captured_kernels(facts: Facts, projection: StepProjection) -> list[str]:
    """Where the run trained on the target GPU itself and captured steps on it (``run
    --capture N``): the median step's kernels and their length, measured
    (derived.capture.kernel_pattern), beside the kernels the projection costs (the
    fixed cost per kernel rests on their count)."""
    pattern = kernel_pattern(facts.capture) if facts.capture is not None else None
    if pattern is None:
        return []
    costed = projection.kernel_count + projection.tensor_ops
    return [
        f"the capture measured {pattern.kernels_per_step:,} kernels a step on this GPU, "
        f"the median {duration(pattern.median_kernel_s, True)} long; the projection costs "
        f"{costed:,} kernels and ops: where they disagree, the capture is the measurement"
    ]


def _cpu_op_count(placement: PlacementFacts, function: str) -> int:
    return sum(count_in(g, function) for g in cpu_groups(placement, function))


def _cpu_ops(
    placement: PlacementFacts, function: str, profile: StepProfile | None, unprofiled: str
) -> tuple[CpuOpsTime | None, list[str]]:
    """Ops of the projected function that stay on the CPU on the target too: their
    time measured on this host's CPU where a few of its steps were profiled (None
    where none was matched), and the note that says so or why not."""
    groups = cpu_groups(placement, function)
    if not groups:
        return None, []
    count = sum(count_in(g, function) for g in groups)
    named = ", ".join(
        f"{g.op}" + (f" at {g.locations[0]}" if g.locations else "") for g in groups[:3]
    )
    head = (
        f"{count} op(s) of the step stay on the CPU on that GPU too ({named}"
        + (", …" if len(groups) > 3 else "")
        + ")"
    )
    name = function.split(" (", 1)[0]
    measured = None
    if profile is None:
        why = unprofiled
    elif profile.function != name:
        why = f"the profiled steps were of {profile.function}, not {name}"
    else:
        measured = measured_cpu_ops(placement, function, profile)
        why = "none of them among the profiled ops"
    if measured is None or not measured.matched:
        return None, [
            f"{head}: their CPU time is not in the projection (not measured: {why}), only "
            "the copies around them; the step is longer by it (the placement findings "
            "say why they are there)"
        ]
    low, _, high = HOST_FACTOR
    rest = measured.ops - measured.matched
    return measured, [
        f"{head}: {measured.matched} of them measured here, {duration(measured.seconds, microseconds=True)} "
        f"per step ({measured.measured_by}), costed at that time on the target's host "
        f"({low:g}x–{high:g}x: its CPU core assumed between twice as fast as this one and "
        "half again as slow)" + (f"; the other {rest} are not in the projection" if rest else "")
    ]


def _cudnn_layers(projection: StepProjection, facts: Facts) -> tuple[str, ...]:
    """The Keras layers whose loops were costed as cuDNN's kernels."""
    layers = facts.program.keras_cudnn_rnn if facts.program else ()
    return tuple(sorted({rnn_layer(loop, layers) or loop for loop in projection.cudnn_loops}))


def _cudnn_note(projection: StepProjection, facts: Facts) -> str:
    """Said where Keras' LSTM/GRU layers run with cuDNN on the target."""
    names = _cudnn_layers(projection, facts)
    text = (
        f"Keras runs {', '.join(names)} with cuDNN on a GPU (not on this machine, without "
        "one): their loops are costed as cuDNN's RNN kernels, each timestep's matmuls "
        "and one fused kernel a timestep for the gate arithmetic"
    )
    placement = facts.placement
    unfixed = placement is not None and any(
        op.loop in projection.cudnn_loops and op.runs is None
        for op in step_ops(placement, projection.function)
    )
    if unfixed:  # the sequence's length is not in the traced graph (a dataset's None)
        text += (
            " where the traced graph fixes the sequence's length; here it does not (the "
            "input's time dimension was traced unknown): one timestep is costed, so the "
            "step is at least this long"
        )
    if projection.xla_dropped or (facts.program and facts.program.keras_auto_jit is False):
        text += (
            "; Keras compiles no step of such a model with XLA on a GPU (cuDNN's ops are "
            "not XLA's): projected without it"
        )
    return text


def _loop_notes(placement: PlacementFacts, function: str) -> list[str]:
    """How the matmuls in while loops were counted: per iteration, times the loop's
    iterations where the graph fixes them, else once."""
    ops = [op for op in step_ops(placement, function) if op.loop]
    if not ops:
        return []
    notes = []
    counted = sorted({op.runs for op in ops if op.runs and op.runs > 1})
    if counted:
        runs = ", ".join(f"{r:,}" for r in counted)
        notes.append(
            f"{sum(1 for op in ops if op.runs and op.runs > 1)} matmuls/convolutions run in "
            f"while loops of {runs} iterations (at most: their maximum_iterations, or the "
            "model's input length where the traced step left it unknown), each "
            "iteration's costed at its own size"
        )
    unknown = sum(1 for op in ops if op.runs is None)
    if unknown:
        notes.append(
            f"{unknown} matmuls/convolutions in while loops whose iterations the graph does "
            "not fix are costed once: the step is at least this long"
        )
    return notes


def _graph_notes(projection: StepProjection, jit: bool) -> list[str]:
    """What the cost model of the traced function could not know."""
    notes = []
    if jit and projection.step_copies:
        notes.append(
            f"under XLA the {projection.step_copies} host<->device copies the audit finds "
            "between the step's ops are inside the compiled cluster, on the GPU: not costed"
        )
    if not jit:
        notes.append(
            "the function is not XLA-compiled: its kernels' memory traffic is costed kernel "
            "by kernel from the bytes each reads and writes, a part of the model not fitted "
            "to published figures (checked against some: docs/projection.md), its band wider"
        )
    if projection.tensor_ops_unsized:
        notes.append(
            f"{projection.tensor_ops_unsized} of {projection.tensor_ops} matmuls/convolutions "
            "of unknown size are left out: the step is at least this long"
        )
    if projection.kernels_unsized:
        notes.append(
            f"{projection.kernels_unsized} of {projection.kernel_count} other kernels of "
            "unknown size count as launches only"
        )
    return notes


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 9)


def _jit(facts: Facts, label: str) -> bool:
    """The projected function is compiled by XLA (jit_compile=True)."""
    functions = facts.placement.functions if facts.placement else ()
    return any(f.jit_compile for f in functions if label in (f.name, f"{f.name} ({f.location})"))
