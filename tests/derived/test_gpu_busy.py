"""The one busy figure (gpuwhy/derived/gpu_busy.py): its source, its phases and its
aliasing guard, from small facts and from the real H100 recordings."""

from __future__ import annotations

import math
import time
from dataclasses import replace
from pathlib import Path

import pytest

from gpuwhy.collect.sampler import GpuSampler, ReplaySource
from gpuwhy.derived.gpu_busy import aliasing, beat, gpu_busy, source_of
from gpuwhy.facts import Facts, GpuSamplesFacts, GpuSeries, ProgramFacts, StepFacts
from gpuwhy.record import Record
from gpuwhy.rules.gpu.underutilized import GpuUnderutilized

H100 = Path(__file__).parents[1] / "data" / "nvml" / "h100"
GiB = 1024**3


def replay(name: str) -> GpuSamplesFacts:
    source = ReplaySource(H100 / name)
    sampler = GpuSampler(source=source, pids=source.watched_pids)
    sampler.start(time.perf_counter())
    assert sampler.wait(30)
    sampler.stop()
    return sampler.facts()


def series(n=200, busy=lambda t: 0.5, **columns) -> GpuSeries:
    """A GPU at 10 Hz held by the program throughout; ``columns``: name -> f(t) or None."""
    t = tuple(round(i / 10, 3) for i in range(n))
    own = tuple(10 * GiB if i % 10 == 0 else None for i in range(n))
    made = {
        name: tuple(None if f is None else f(x) for x in t) if f is not None else (None,) * n
        for name, f in columns.items()
    }
    return GpuSeries(
        index=0,
        name="GPU",
        t=t,
        utilization=tuple(busy(x) for x in t),
        own_memory_bytes=own,
        **made,
    )


# -- the aliasing guard ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("period", "phases"),
    [
        (0.2, "1 phase"),
        (0.1, "1 phase"),
        (0.4, "2 phases"),
        (0.6, "3 phases"),
        (0.201, "1 phase"),
        (0.5, "3 phases"),  # at a driver period of 1/6 s (below)
    ],
)
def test_a_step_near_a_multiple_or_divisor_of_the_sample_period_is_aliased(period, phases):
    reason = aliasing(period, 1 / 6 if period == 0.5 else 0.2, samples=60)
    assert reason is not None and phases in reason


@pytest.mark.parametrize(
    ("period", "relation"),
    [
        (0.2, "about the driver's sample period (200 ms)"),
        (0.4, "about 2 times the driver's sample period (200 ms)"),
        (0.1, "about 1/2 of the driver's sample period (200 ms)"),
        (0.1333, "about 2/3 of the driver's sample period (200 ms)"),
    ],
)
def test_the_aliased_period_is_named_against_the_drivers(period, relation):
    assert relation in (aliasing(period, 0.2, samples=60) or "")


@pytest.mark.parametrize("period", [0.137, 0.26, 0.02, 0.003, 1.7])
def test_a_step_that_sweeps_the_samples_phase_or_averages_out_is_not(period):
    assert aliasing(period, 0.2, samples=60) is None


def test_a_slow_drift_makes_the_guard_fail_only_when_it_never_sweeps_the_step():
    # 0.205 s steps drift 2.4 % of a step per sample: 60 samples never sweep it, 600 do
    assert aliasing(0.205, 0.2, samples=60) is not None
    assert aliasing(0.205, 0.2, samples=600) is None


def test_the_point_readings_of_a_phase_locked_loop_beat_and_a_steady_loads_do_not():
    locked = replay("duty_100_100.nvml.jsonl").gpus[0]
    steady = replay("torch_resnet18_launch_bound.nvml.jsonl").gpus[0]
    inside = lambda s, a, b: [
        u for t, u in zip(s.t, s.utilization) if a <= t <= b and u is not None
    ]
    assert beat(inside(locked, 8.0, 19.0), 0.1) is not None  # 53 % sliding to 1 % and back
    assert beat(inside(steady, 15.0, 42.0), 0.1) is None  # 23-31 %, jumping


# -- the source ---------------------------------------------------------------------------
def test_the_best_integrating_source_is_chosen_and_named():
    all_of_them = series(
        graphics_activity=lambda t: 0.6,
        sm_activity=lambda t: 0.5,
        driver_utilization=lambda t: 0.7,
    )
    assert source_of(all_of_them).measure == "graphics utilisation"
    dcgm = replace(all_of_them, activity_source="dcgm")
    assert (source_of(dcgm).source, source_of(dcgm).measure) == ("dcgm", "GR engine activity")
    no_graphics = series(sm_activity=lambda t: 0.5, driver_utilization=lambda t: 0.7)
    assert source_of(no_graphics).measure == "SM activity"
    assert source_of(series(driver_utilization=lambda t: 0.7)).source == "nvml-samples"
    assert source_of(series()).source == "nvml-point"


def test_point_readings_alone_are_never_a_reliable_busy_figure():
    block = gpu_busy(series(), None)
    assert block.source == "nvml-point" and not block.reliable
    assert "point readings" in block.why
    assert (
        GpuUnderutilized().check(
            Facts(gpu_samples=GpuSamplesFacts(hz=10, gpus=(series(busy=lambda t: 0.1),))),
            dict(GpuUnderutilized.options),
        )
        == []
    )


def test_in_run_a_step_period_on_the_drivers_period_makes_the_figure_unreliable():
    # the driver's samples every 200 ms, a step every 200 ms: its samples see one phase
    samples = series(driver_utilization=lambda t: 0.2 if round(t * 10) % 2 == 0 else None)
    samples = replace(samples, driver_sample_period_s=0.2)
    starts = tuple(round(1.0 + 0.2 * i, 3) for i in range(90))
    steps = StepFacts(
        source="keras-fit", marker="fit", count=90, starts=starts, durations=(0.15,) * 90
    )
    block = gpu_busy(samples, steps)
    assert not block.reliable and "1 phase" in block.why
    facts = Facts(gpu_samples=GpuSamplesFacts(hz=10, gpus=(samples,)), steps=steps)
    assert GpuUnderutilized().check(facts, dict(GpuUnderutilized.options)) == []
    # steps of 137 ms sweep every phase: the same samples are judged
    starts = tuple(round(1.0 + 0.137 * i, 3) for i in range(130))
    steps = replace(steps, count=130, starts=starts, durations=(0.1,) * 130)
    assert gpu_busy(samples, steps).reliable


# -- phases -------------------------------------------------------------------------------
def test_start_up_and_pauses_are_told_from_the_steady_work():
    # 20 s of start-up with the GPU idle, 4 s of work at 90 %, 10 s of autotuning, 4 s more
    work = lambda t: 0.9 if 20 <= t < 24 or 34 <= t < 38 else 0.02
    block = gpu_busy(series(n=400, graphics_activity=work), None)
    assert block.steady_share == pytest.approx(0.9, abs=0.05)
    assert block.steady_span_s == pytest.approx(8.0, abs=1.0)
    assert block.startup_s == pytest.approx(30.0, abs=1.5)  # 20 s before, 10 s between
    assert block.share < 0.3


def test_a_recurring_wait_is_part_of_the_steady_work_not_a_pause():
    # 1 s of work, 4 s waiting for the loader, twelve times: steady at 20 %, no start-up
    cycle = lambda t: 0.95 if t % 5 < 1 else 0.0
    block = gpu_busy(series(n=600, graphics_activity=cycle), None)
    assert block.steady_share == pytest.approx(0.2, abs=0.05)
    assert block.startup_s < 1.0 and block.steady_span_s > 50
    facts = Facts(
        gpu_samples=GpuSamplesFacts(hz=10, gpus=(series(n=600, graphics_activity=cycle),))
    )
    (finding,) = GpuUnderutilized().check(facts, dict(GpuUnderutilized.options))
    assert finding.severity == "high"


def test_a_loop_that_stalls_now_and_then_is_no_beat():
    # the driver's samples of steady work at 82 % with a 1.5 s checkpoint every 10 s
    stalls = [0.0 if (i * 0.2) % 10 < 1.5 else 0.82 for i in range(300)]
    assert beat(stalls, 0.2) is None
    # a sweep between idle and busy over seconds is one
    sweep = [0.5 + 0.45 * math.sin(i * 0.2 * 2 * math.pi / 6) for i in range(300)]
    assert beat(sweep, 0.2) is not None


def test_a_gpu_that_never_worked_has_no_steady_part():
    block = gpu_busy(series(graphics_activity=lambda t: 0.0), None)
    assert block.share == 0.0 and block.steady_share is None and block.reliable


# -- the verdict ---------------------------------------------------------------------------
def test_watching_a_program_without_tensorflow_puts_its_gpu_first():
    samples = replay("duty_40_160.nvml.jsonl")
    program = ProgramFacts(command=("python3", "duty.py"), seconds=17.0)
    record = Record.diagnose("watch", Facts(program=program, gpu_samples=samples))
    assert record.verdict.startswith("GPU busy 18% while the program used it (SM activity)")
    assert record.derived.gpu_busy[0].share is not None
    # the record's file keeps it in its own section; the facts never hold it
    data = record.to_dict()
    assert data["derived"]["gpu_busy"][0]["index"] == 0
    assert data["derived"]["gpu_busy"][0]["busy"]["share"] == record.derived.gpu_busy[0].share
    assert all("busy" not in gpu for gpu in data["gpu_samples"]["gpus"])


def test_varying_point_readings_never_stand_in_for_the_time_share():
    # the 40/160 loop's point readings sit at 0 for seconds, then drift to 41 %
    (gpu,) = replay("duty_40_160.nvml.jsonl").gpus
    block = gpu_busy(gpu, None)
    assert block.time_share is None and block.space_share is None
    # the launch-bound ResNet-18's are steady (23-31 %): they stand in, and say so
    (gpu,) = replay("torch_resnet18_launch_bound.nvml.jsonl").gpus
    assert gpu_busy(gpu, None).time_share == pytest.approx(0.26, abs=0.02)
