"""Run records for the report tests, made from the real facts dataclasses.

``watched_run()`` is a run on a healthy one-GPU machine (tests/builders.py's environment)
with every run section filled: steps with input wait and epochs, GPU samples with PCIe
and GPM metrics, a tf.data pipeline whose bottleneck is a py_function map, eager ops,
traces and a placement audit. Series are deterministic (a seeded generator), so the exact
statistics a test expects can be computed from the same lists.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import replace

from gpuwhy.facts import (
    EagerFacts,
    EagerOpSite,
    Facts,
    GpuSamplesFacts,
    GpuSeries,
    InputFix,
    InputFixFacts,
    PipelineChange,
    PipelineFacts,
    PipelineRate,
    PipelineStage,
    ProgramFacts,
    StepFacts,
    StepSpan,
    StepTimeline,
    TfDataFacts,
    TracedFunction,
    TraceSignature,
    TracingFacts,
)
from gpuwhy.record import Record
from tests import builders as b

GiB = 1024**3


def steps(
    count: int = 400, start: float = 4.0, epochs: int = 2, warmup: int = 1, seed: int = 1
) -> StepFacts:
    """``count`` steps of ~40 ms, ~15 ms of them waiting for input, a slow first step
    (tracing) and now and then a slow one; the statistics are computed as the collector
    does (gpuwhy/collect/inprocess/steps.py)."""
    rng = random.Random(seed)
    starts, durations, waits = [], [], []
    t = start
    per_epoch = max(count // epochs, 1)
    phases = []
    for i in range(count):
        if i % per_epoch == 0 and len(phases) < epochs:
            if phases:
                t += 0.5  # epoch end: a pause without steps
            phases.append([f"epoch {len(phases)}", t, t])
        wait = 0.010 + rng.random() * 0.010
        duration = wait + 0.020 + rng.random() * 0.010 + (0.3 if rng.random() < 0.002 else 0.0)
        if i == 0:
            duration += 0.8
        starts.append(round(t, 6))
        durations.append(round(duration, 6))
        waits.append(round(wait, 6))
        t += duration + 0.001
        phases[-1][2] = t
    after = durations[warmup:]
    ordered = sorted(after)
    return StepFacts(
        source="tf-data",
        marker="next() on a tf.data iterator at train.py:74",
        count=count,
        warmup=warmup,
        median_s=statistics.median(after),
        p90_s=ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))],
        total_s=sum(after),
        input_wait_fraction=sum(waits[warmup:]) / sum(after),
        input_wait_median_s=statistics.median(waits[warmup:]),
        run_s=t + 1.0,
        first_step_s=start,
        starts=tuple(starts),
        durations=tuple(durations),
        input_waits=tuple(waits),
        phases=tuple((n, round(a, 6), round(e, 6)) for n, a, e in phases),
    )


def gpu_series(
    samples: int = 300,
    hz: float = 10.0,
    start: float = 0.5,
    index: int = 0,
    seed: int = 2,
    gpm: bool = True,
) -> GpuSeries:
    """A GPU that is busy in short bursts: utilisation is skewed (r**3 of a uniform r), so
    its median (~12.5%) is far from its mean (~25%) and from the median of any bucket
    means; one memory spike at 2/3 of the run is the peak."""
    rng = random.Random(seed)
    t = tuple(round(start + i / hz, 4) for i in range(samples))
    util = tuple(round(rng.random() ** 3, 2) for _ in t)
    memory = [int((30 + 10 * rng.random()) * GiB) for _ in t]
    memory[2 * samples // 3] = 79 * GiB
    return GpuSeries(
        index=index,
        name="NVIDIA H100 80GB HBM3",
        memory_total_bytes=80 * GiB,
        t=t,
        utilization=util,
        memory_used_bytes=tuple(memory),
        own_memory_bytes=tuple(m - 2 * GiB if i % 10 == 0 else None for i, m in enumerate(memory)),
        pcie_tx_bytes_per_s=tuple(rng.random() * 2e8 for _ in t),
        pcie_rx_bytes_per_s=tuple(rng.random() * 1.2e9 for _ in t),
        sm_clock_mhz=tuple(1980.0 for _ in t),
        power_w=tuple(200 + 300 * u for u in util),
        sm_activity=tuple(u * 0.6 for u in util) if gpm else (),
        sm_occupancy=tuple(u * 0.3 for u in util) if gpm else (),
        tensor_activity=tuple(u * 0.1 for u in util) if gpm else (),
    )


def gpu_samples(*series: GpuSeries, hz: float = 10.0) -> GpuSamplesFacts:
    return GpuSamplesFacts(
        hz=hz,
        gpus=series or (gpu_series(),),
        gpm=True,
        tf_peak_memory_bytes={"GPU:0": 38 * GiB},
        watched_pids=(4242,),
    )


NO_DRIVER_SAMPLES = GpuSamplesFacts(hz=10.0, error="LibraryNotFound")


def pipeline() -> PipelineFacts:
    """examples/slow_training.py's pipeline as TF runs it: a py_function map (sequential,
    the bottleneck) fused into MapAndBatch with the batch, then an injected prefetch."""
    stages = (
        PipelineStage(
            name="TensorSlice",
            kind="source",
            written_as=("from_tensor_slices",),
            location="train.py:41",
            elements=1536,
            self_time_s=0.02,
            self_time_per_element_s=1.3e-5,
            root_elements_per_s=2.4e6,
        ),
        PipelineStage(
            name="MapAndBatch",
            kind="map",
            written_as=("map", "batch"),
            location="train.py:41",
            function="<lambda>",
            function_location="train.py:36",
            parallelism=1,
            parallelism_written=None,
            elements=48,
            self_time_s=1.9,
            self_time_per_element_s=0.0396,
            ratio=32.0,
            root_elements_per_s=25.3,
            python=True,
            stateful=True,
        ),
        PipelineStage(
            name="Prefetch",
            kind="prefetch",
            written_as=(),
            buffer_size=2,
            elements=48,
            self_time_s=0.001,
            self_time_per_element_s=2.1e-5,
            root_elements_per_s=4.7e4,
        ),
    )
    return PipelineFacts(
        id=1,
        location="train.py:41",
        consumer="python-loop",
        iterators=2,
        elements=48,
        stages=stages,
        bottleneck=1,
        prefetch_run=True,
        cardinality=48,
        element_bytes=393344,
        gap_median_s=0.024,
        wait_per_element_s=0.015,
        consume_s=1.9,
        throughput_per_s=25.1,
    )


def tracing(at=(4.0, 4.9, 5.8)) -> TracingFacts:
    sigs = tuple(
        TraceSignature(
            at_s=a,
            args=(("x", "float32[32,32,32,3]"), ("lr", f"{0.05 / 2**i} (float)")),
            seconds=0.1,
            caller="train.py:76",
        )
        for i, a in enumerate(at)
    )
    return TracingFacts(
        functions=(
            TracedFunction(
                name="train_step",
                location="train.py:55",
                calls=400,
                call_s=9.0,
                traces=len(at),
                trace_s=0.3,
                changed_args=("lr",),
                signatures=sigs,
            ),
        )
    )


def eager() -> EagerFacts:
    return EagerFacts(
        sampled_steps=20,
        ops=2000,
        per_step=100.0,
        dispatch_fraction=0.08,
        median_gap_us=30.0,
        counted_s=1.0,
        sites=(
            EagerOpSite(
                op="AddV2", location="train.py:80", count=200, median_elements=1, device="GPU:0"
            ),
        ),
    )


def placement():
    return b.placement(
        groups=[
            b.op_group("MatMul", count=4),
            b.op_group(
                "Mean",
                reason="forced-cpu",
                in_dtypes=("float64",),
                requested="CPU",
                locations=("train.py:65",),
            ),
            b.op_group(
                "Sqrt", reason="forced-cpu", in_dtypes=("float64",), locations=("train.py:65",)
            ),
            b.op_group("ReadVariableOp", reason="gpu-host-memory", count=6),
        ],
        copies=[b.host_copy(location="train.py:65", cause="Cast_1")],
        tensor_ops=[b.tensor_op()],
    )


def watched_run(
    steps_facts: StepFacts | None = None, samples: GpuSamplesFacts | None = None, **sections
) -> Record:
    """A diagnosed run record; any section can be replaced (None drops it)."""
    steps_facts = steps_facts if steps_facts is not None else steps()
    samples = samples if samples is not None else gpu_samples()
    parts = dict(
        environment=b.environment(),
        devices=(b.gpu(0),),
        placement=placement(),
        program=ProgramFacts(
            command=("train.py", "--epochs", "2"),
            seconds=steps_facts.run_s,
            tensorflow_imported=True,
            tensorflow_version="2.21.0",
            keras_version="3.15.1",
            gpus_seen_by_tf=("/device:GPU:0",),
        ),
        steps=steps_facts,
        eager=eager(),
        tracing=tracing(),
        gpu_samples=samples,
        tfdata=TfDataFacts(
            pipelines=(pipeline(),),
            host_cores=2,
            host_cpu_busy_fraction=0.97,
            process_cpu_fraction=0.55,
        ),
    )
    parts.update(sections)
    return Record.diagnose("run", Facts(**parts))


def large_run() -> Record:
    """100,000 steps and an hour of samples at 10 Hz (36,000 per metric)."""
    return watched_run(
        steps(count=100_000, epochs=10), gpu_samples(gpu_series(samples=36_000, seed=3))
    )


def _rate(median: float, low: float, high: float) -> PipelineRate:
    return PipelineRate(median=median, min=low, max=high, passes=5, elements_per_pass=32)


INPUT_FIXES = InputFixFacts(
    fixes=(
        InputFix(
            dataset="map: num_parallel_calls=AUTOTUNE",
            before=_rate(25.1, 24.3, 25.9),
            after=_rate(88.4, 86.3, 90.5),
            ideal=_rate(101.0, 99.5, 102.5),
            speedup=88.4 / 25.1,
            changes=(
                PipelineChange(
                    kind="parallel-map",
                    stage="map(load)",
                    location="train.py:41",
                    code="ds = ds.map(load, num_parallel_calls=tf.data.AUTOTUNE)",
                    why="runs one element at a time",
                ),
            ),
        ),
        InputFix(dataset="prefetch", before=_rate(88.4, 88.4, 88.4), after=_rate(97.0, 97.0, 97.0)),
        InputFix(
            dataset="cache",
            before=_rate(97.0, 90.0, 99.5),
            after=_rate(180.0, 170.0, 181.0),
        ),
        InputFix(dataset="not measured", error="the pipeline itself fails"),
    )
)


def with_input_fixes(record: Record) -> Record:
    """A record that also holds measured input-pipeline fixes (section ``input_fixes``)."""
    return Record.diagnose(record.command, replace(record.facts, input_fixes=INPUT_FIXES))


def long_steps(
    count: int = 150_000, kept: int = 5000, width: float = 32.0, pause_at: int = 90_000
) -> StepFacts:
    """A run longer than the steps a record keeps one by one, as the collector records
    it (gpuwhy/collect/inprocess/steps.py): the first ``kept`` steps, the timeline in
    windows of ``width`` seconds, the last 512 steps and the 32 slowest. Steps of ~40 ms
    (~15 ms waiting for input), a traced first step, a 200 s pause without steps at step
    ``pause_at`` (an evaluation) and steps 20 ms slower after it, so a chart of the first
    steps alone would miss both."""
    rng = random.Random(5)
    starts, durations, waits = [], [], []
    t = 3.0
    for i in range(count):
        if i == pause_at:
            t += 200.0
        wait = 0.010 + rng.random() * 0.010
        duration = wait + 0.020 + rng.random() * 0.010 + (0.020 if i >= pause_at else 0.0)
        duration += 0.5 if rng.random() < 0.0005 else 0.0
        if i == 0:
            duration += 0.8
        starts.append(round(t, 6))
        durations.append(round(duration, 6))
        waits.append(round(wait, 6))
        t += duration + 0.001
    windows: dict[int, list[int]] = {}
    for i, start in enumerate(starts):
        windows.setdefault(int(start // width), []).append(i)
    spans = []
    for n, members in sorted(windows.items()):
        per_step = sorted(durations[i] for i in members)
        spans.append(
            StepSpan(
                start_s=n * width,
                steps=len(members),
                p50_s=statistics.median(per_step),
                p90_s=per_step[min(len(per_step) - 1, int(0.9 * len(per_step)))],
                max_s=per_step[-1],
                step_s=sum(per_step),
                input_wait_s=sum(waits[i] for i in members),
            )
        )
    after = durations[1:]
    ordered = sorted(after)
    slowest = sorted(range(1, count), key=lambda i: durations[i], reverse=True)[:32]
    return StepFacts(
        source="tf-data",
        marker="next() on a tf.data iterator at train.py:74",
        count=count,
        warmup=1,
        median_s=statistics.median(after),
        p90_s=ordered[int(0.9 * len(ordered))],
        total_s=sum(after),
        input_wait_fraction=sum(waits[1:]) / sum(after),
        input_wait_median_s=statistics.median(waits[1:]),
        input_wait_source="next() timing",
        run_s=t + 1.0,
        first_step_s=starts[0],
        starts=tuple(starts[:kept]),
        durations=tuple(durations[:kept]),
        input_waits=tuple(waits[:kept]),
        last_steps=tuple(zip(starts[-512:], durations[-512:], waits[-512:])),
        slowest=tuple((starts[i], durations[i]) for i in slowest),
        timeline=StepTimeline(width_s=width, windows=tuple(spans)),
        all_kept=False,
    )


def long_run() -> Record:
    """:func:`long_steps` and a sample a second from the GPU over the whole run."""
    steps_facts = long_steps()
    samples = round(steps_facts.run_s)
    gpu = gpu_series(samples=samples, hz=1.0, seed=4)
    return watched_run(steps_facts, gpu_samples(gpu, hz=1.0))
