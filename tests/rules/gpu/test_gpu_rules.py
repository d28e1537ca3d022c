"""gpu.underutilized, memory.near-limit, memory.underused and distribute.idle-gpus, from
small hand-built samples and from the replayed recordings in tests/data/nvml/."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from gpuwhy.collect.sampler import GpuSampler, ReplaySource
from gpuwhy.derived.gpu_activity import step_windows
from gpuwhy.facts import (
    Facts,
    GpuProcess,
    GpuSamplesFacts,
    GpuSeries,
    ProgramFacts,
    StepFacts,
    StepSpan,
    StepTimeline,
)
from gpuwhy.rules import run_rules
from gpuwhy.rules.distribute.idle_gpus import IdleGpus
from gpuwhy.rules.gpu.underutilized import GpuUnderutilized
from gpuwhy.rules.memory.near_limit import MemoryNearLimit
from gpuwhy.rules.memory.underused import MemoryUnderused

DATA = Path(__file__).parents[2] / "data" / "nvml"
GiB = 1024**3
HZ = 10


DRIVER_S = 0.18  # the driver's sample period here: no step period below beats with it


def series(
    util, index=0, own=None, sm=None, total=80 * GiB, others=(), name="NVIDIA H100 80GB HBM3"
):
    """A GPU sampled at 10 Hz; ``util`` (and ``sm``, ``own``) are callables of t or constants."""
    n = len(util) if isinstance(util, list) else 100
    t = tuple(round(i / HZ, 3) for i in range(n))
    at = lambda f, x, i: (f[i] if isinstance(f, list) else f(x) if callable(f) else f)
    return GpuSeries(
        index=index,
        name=name,
        memory_total_bytes=total,
        t=t,
        utilization=tuple(at(util, x, i) for i, x in enumerate(t)),
        # the driver's own samples, one every DRIVER_S (read at the tick after each)
        driver_utilization=tuple(
            at(util, x, i) if i and int(x / DRIVER_S) != int(t[i - 1] / DRIVER_S) else None
            for i, x in enumerate(t)
        ),
        driver_sample_period_s=DRIVER_S,
        own_memory_bytes=tuple(at(own, x, i) if i % HZ == 0 else None for i, x in enumerate(t)),
        sm_activity=tuple(at(sm, x, i) for i, x in enumerate(t)) if sm is not None else (None,) * n,
        others=tuple(others),
    )


def samples(*gpus, tf_peak=None, **changes):
    return GpuSamplesFacts(hz=HZ, gpus=gpus, tf_peak_memory_bytes=dict(tf_peak or {}), **changes)


def steps(start=2.0, end=6.0, duration=0.05, warmup=1, **changes):
    starts = tuple(round(start + i * 0.1, 3) for i in range(int((end - start) / 0.1)))
    return StepFacts(
        source="keras-fit",
        marker="Model.fit (train.py:40)",
        count=len(starts),
        warmup=warmup,
        starts=starts,
        durations=(duration,) * len(starts),
        **changes,
    )


def check(rule, facts):
    return rule().check(facts, dict(rule.options))


def from_recording(name):
    source = ReplaySource(DATA / name)
    sampler = GpuSampler(source=source, pids=source.watched_pids)
    sampler.start(time.perf_counter())
    sampler.wait(10)
    sampler.stop()
    return sampler.facts()


TF = ProgramFacts(command=("train.py",), tensorflow_imported=True, gpus_seen_by_tf=("GPU:0",))


# -- alignment --------------------------------------------------------------------


def test_steps_form_windows_split_by_a_long_pause_and_skip_warmup():
    s = StepFacts(
        source="keras-fit",
        marker="fit",
        count=5,
        warmup=1,
        starts=(0.0, 1.0, 1.1, 1.2, 9.0),
        durations=(0.9, 0.05, 0.05, 0.05, 0.05),
    )
    assert step_windows(s) == [(1.0, 1.25), (9.0, 9.05)]


def test_truncated_steps_extend_to_the_end_of_their_phase():
    s = StepFacts(
        source="keras-fit",
        marker="fit",
        count=500,
        starts=(1.0, 1.1),
        durations=(0.05, 0.05),
        phases=(("fit", 0.5, 30.0), ("epoch 1", 0.9, 12.0)),
    )
    assert step_windows(s) == [(1.0, 12.0)]


def long_steps(windows, last_end, head=(2.0, 2.1, 2.2)):
    """A run longer than its kept steps: ``head`` kept one by one (50 ms each), then
    the timeline's 1 s windows ``{start: seconds in steps}``, its last step ending at
    ``last_end``."""
    spans = tuple(
        StepSpan(start_s=a, steps=10, p50_s=0.05, p90_s=0.05, max_s=0.05, step_s=filled)
        for a, filled in sorted(windows.items())
    )
    return StepFacts(
        source="tf-data",
        marker="next() at train.py:40",
        count=len(head) + 10 * len(spans),
        starts=head,
        durations=(0.05,) * len(head),
        last_steps=((last_end - 0.05, 0.05, None),),
        timeline=StepTimeline(width_s=1.0, windows=spans),
        all_kept=False,
    )


def test_beyond_the_kept_steps_the_timeline_windows_are_training_windows():
    s = long_steps({2.0: 0.3, 3.0: 1.0, 4.0: 1.0, 5.0: 0.4, 10.0: 0.5, 11.0: 1.0, 12.0: 1.0}, 12.7)
    # a window beside the pause is cut to its steps' time, away from the pause; the
    # last one ends with the last step
    assert step_windows(s) == [(2.0, 5.4), (10.5, 12.7)]


def test_a_long_run_is_judged_on_all_of_it():
    # idle-ish while training (2-8 s), busy after (an evaluation): the kept steps alone
    # (2.0-2.25 s) hold too few samples to judge
    gpu = series(lambda t: 0.2 if 2.0 <= t <= 8.0 else 1.0, own=10 * GiB)
    s = long_steps(dict.fromkeys((2.0, 3.0, 4.0, 5.0, 6.0, 7.0), 1.0), 7.9)
    (finding,) = check(GpuUnderutilized, Facts(gpu_samples=samples(gpu), steps=s))
    assert finding.evidence["utilization_percent"] == 20.0
    kept_only = replace(s, timeline=None)
    assert check(GpuUnderutilized, Facts(gpu_samples=samples(gpu), steps=kept_only)) == []


# -- gpu.underutilized ------------------------------------------------------------


def test_underutilized_uses_the_samples_during_steps_only():
    # Busy outside the steps (evaluation, start-up), idle-ish inside them.
    gpu = series(lambda t: 0.2 if 2.0 <= t <= 6.0 else 1.0, own=10 * GiB)
    (finding,) = check(GpuUnderutilized, Facts(gpu_samples=samples(gpu), steps=steps()))
    assert finding.severity == "high"
    assert finding.evidence["utilization_percent"] == 20.0
    assert finding.evidence["measured"] == "during steps"
    assert "steps_per_execution" in finding.fix
    # The mirror image: busy during steps, idle elsewhere: nothing to report.
    gpu = series(lambda t: 0.95 if 2.0 <= t <= 6.0 else 0.0, own=10 * GiB)
    assert check(GpuUnderutilized, Facts(gpu_samples=samples(gpu), steps=steps())) == []


def test_underutilized_medium_between_the_thresholds():
    gpu = series(0.4, own=10 * GiB)
    (finding,) = check(GpuUnderutilized, Facts(gpu_samples=samples(gpu), steps=steps()))
    assert finding.severity == "medium" and finding.gain_value == pytest.approx(0.6)


def test_gpm_sm_activity_catches_a_busy_looking_gpu():
    # NVML says 100% (one small kernel at a time), GPM says 10% of the SMs work.
    gpu = series(1.0, own=10 * GiB, sm=0.10)
    (finding,) = check(GpuUnderutilized, Facts(gpu_samples=samples(gpu), steps=steps()))
    assert finding.evidence["sm_activity_percent"] == 10.0
    assert "SM activity" in finding.title and finding.severity == "high"


def test_without_steps_only_the_time_the_program_held_the_gpu_counts():
    # Idle for 5 s of start-up before the program touched the GPU, then 90% busy.
    gpu = series([0.0] * 50 + [0.9] * 50, own=lambda t: 10 * GiB if t >= 5.0 else 0)
    assert check(GpuUnderutilized, Facts(gpu_samples=samples(gpu))) == []
    gpu = series([0.0] * 50 + [0.1] * 50, own=lambda t: 10 * GiB if t >= 5.0 else 0)
    (finding,) = check(GpuUnderutilized, Facts(gpu_samples=samples(gpu)))
    assert finding.evidence["measured"] == "in its steady work"
    assert finding.evidence["utilization_percent"] == 10.0
    assert "gpuwhy run" in finding.fix


def test_too_few_samples_or_no_samples_say_nothing():
    gpu = series([0.1] * 100, own=GiB)
    short = steps(start=2.0, end=2.3)
    assert check(GpuUnderutilized, Facts(gpu_samples=samples(gpu), steps=short)) == []
    assert check(GpuUnderutilized, Facts(gpu_samples=samples(error="LibraryNotFound"))) == []


def test_a_gpu_the_program_never_touched_is_not_judged():
    used = series(0.9, index=0, own=10 * GiB)
    other = series(0.0, index=1, own=0)
    assert check(GpuUnderutilized, Facts(gpu_samples=samples(used, other), steps=steps())) == []


# -- memory.near-limit ------------------------------------------------------------


def test_near_limit_from_tensorflows_peak():
    gpu = series(0.9, own=79 * GiB)  # TF's pool: says nothing
    facts = Facts(program=TF, gpu_samples=samples(gpu, tf_peak={"GPU:0": int(75 * GiB)}))
    (finding,) = check(MemoryNearLimit, facts)
    assert finding.evidence["peak_share"] == pytest.approx(75 / 80, abs=1e-3)
    assert "TensorFlow" in finding.evidence["read_from"] and "mixed_bfloat16" in finding.fix
    low = replace(facts, gpu_samples=samples(gpu, tf_peak={"GPU:0": 60 * GiB}))
    assert check(MemoryNearLimit, low) == []


def test_near_limit_ignores_tensorflows_pool_when_its_peak_is_unknown():
    gpu = series(0.9, own=79 * GiB)
    assert check(MemoryNearLimit, Facts(program=TF, gpu_samples=samples(gpu))) == []


def test_near_limit_from_the_watched_processes_memory():
    gpu = series(0.9, own=76 * GiB)
    (finding,) = check(MemoryNearLimit, Facts(gpu_samples=samples(gpu)))
    assert "watched processes" in finding.evidence["read_from"]


def test_tf_peak_is_paired_with_nvml_gpus_only_when_the_limit_is_certain():
    big, small = series(0.9, index=0, total=80 * GiB), series(0.9, index=1, total=16 * GiB)
    peak = {"GPU:0": 15 * GiB}  # TF sees one of two different GPUs: which one?
    assert (
        check(MemoryNearLimit, Facts(program=TF, gpu_samples=samples(big, small, tf_peak=peak)))
        == []
    )


# -- memory.underused -------------------------------------------------------------


def test_underused_when_empty_and_idle_and_not_waiting_for_input():
    gpu = series(0.3, own=GiB)
    facts = Facts(
        program=TF,
        steps=steps(input_wait_fraction=0.01),
        gpu_samples=samples(gpu, tf_peak={"GPU:0": 4 * GiB}),
    )
    (finding,) = check(MemoryUnderused, facts)
    assert finding.evidence["batch_could_grow_up_to"] == "16x"
    assert "batch_size * 8" in finding.fix
    # what fits and what to try first, said together: never "8x fits" beside "16x"
    assert "up to 16x the batch fits in the GPU's memory: 8x first" in finding.fix
    waiting = replace(facts, steps=steps(input_wait_fraction=0.3))
    assert check(MemoryUnderused, waiting) == []
    busy = replace(facts, gpu_samples=samples(series(0.9), tf_peak={"GPU:0": 4 * GiB}))
    assert check(MemoryUnderused, busy) == []
    full = replace(facts, gpu_samples=samples(gpu, tf_peak={"GPU:0": 40 * GiB}))
    assert check(MemoryUnderused, full) == []
    # a PyTorch program under gpuwhy watch: the batch in its words, not Keras'
    torch = Facts(
        program=ProgramFacts(command=("python", "train_torch.py")), gpu_samples=samples(gpu)
    )
    (finding,) = check(MemoryUnderused, torch)
    assert "DataLoader" in finding.fix and "model.fit" not in finding.fix
    assert "# A batch up to 64x larger fits: raise it, 8x first" in finding.fix


# -- distribute.idle-gpus ---------------------------------------------------------


def test_idle_gpus_when_tensorflow_sees_four_and_one_works():
    program = replace(TF, gpus_seen_by_tf=("GPU:0", "GPU:1", "GPU:2", "GPU:3"))
    gpus = [series(0.9 if i == 0 else 0.0, index=i, own=70 * GiB) for i in range(4)]
    (finding,) = check(IdleGpus, Facts(program=program, steps=steps(), gpu_samples=samples(*gpus)))
    assert [row["gpu"] for row in finding.evidence["gpus"]] == [0, 1, 2, 3]
    assert finding.gain_value == 0.75 and "MirroredStrategy" in finding.fix
    assert "CUDA_VISIBLE_DEVICES=0" in finding.fix


def test_no_idle_gpus_when_tensorflow_sees_one_or_two_work_or_others_hold_them():
    gpus = [
        series(0.9 if i == 0 else 0.0, index=i, own=70 * GiB if i == 0 else 0) for i in range(2)
    ]
    assert check(IdleGpus, Facts(program=TF, steps=steps(), gpu_samples=samples(*gpus))) == []
    both = [series(0.9, index=i, own=70 * GiB) for i in range(2)]
    assert check(IdleGpus, Facts(gpu_samples=samples(*both))) == []
    taken = series(0.0, index=1, own=0, others=[GpuProcess(pid=9, used_bytes=40 * GiB)])
    assert check(IdleGpus, Facts(gpu_samples=samples(gpus[0], taken))) == []


# -- from replayed recordings -----------------------------------------------------


def ids(facts):
    findings, _ = run_rules(facts)
    return sorted(f.id for f in findings)


def test_recordings_through_every_rule():
    assert ids(Facts(gpu_samples=from_recording("constructed_h100_busy.jsonl"))) == []
    assert ids(Facts(gpu_samples=from_recording("constructed_a100_input_starved.jsonl"))) == [
        "gpu.underutilized",
        "memory.underused",
    ]
    assert ids(Facts(gpu_samples=from_recording("constructed_4gpu_one_busy.jsonl"))) == [
        "distribute.idle-gpus"
    ]
    findings, not_checked = run_rules(
        Facts(gpu_samples=from_recording("constructed_no_driver.jsonl"))
    )
    assert findings == [] and "gpu.underutilized" not in not_checked


def test_rules_are_skipped_without_samples():
    _, not_checked = run_rules(Facts())
    for rule_id in (
        "gpu.underutilized",
        "memory.near-limit",
        "memory.underused",
    ):
        assert not_checked[rule_id] == "needs gpu_samples"
    assert not_checked["distribute.idle-gpus"] == "needs gpu_samples or distribute"


def test_a_strategy_over_fewer_gpus_than_tensorflow_sees():
    """MirroredStrategy(["/gpu:0", "/gpu:1"]) with four GPUs visible: named from the
    program's devices, with or without NVML samples."""
    from gpuwhy.facts import DistributeFacts

    program = replace(TF, gpus_seen_by_tf=("GPU:0", "GPU:1", "GPU:2", "GPU:3"))
    devices = tuple(f"/job:localhost/replica:0/task:0/device:GPU:{i}" for i in range(2))
    two = DistributeFacts(strategy="MirroredStrategy", replicas=2, devices=devices,
                          variable="mirrored")  # fmt: skip
    (finding,) = check(IdleGpus, Facts(program=program, distribute=two))
    assert finding.title.startswith("4 GPUs visible, MirroredStrategy uses 2: 2 GPU(s)")
    assert finding.fix.startswith("mirrored = tf.distribute.MirroredStrategy()")
    assert "CUDA_VISIBLE_DEVICES=0,1" in finding.fix and finding.gain_value == 0.5
    every = replace(two, replicas=4, devices=tuple(d[:-1] + str(i) for i, d in
                                                 enumerate(devices * 2)))  # fmt: skip
    assert check(IdleGpus, Facts(program=program, distribute=every)) == []
    # a strategy over all the GPUs: NVML's one-busy reading is not said on top of it
    gpus = [series(0.9 if i == 0 else 0.0, index=i, own=70 * GiB) for i in range(4)]
    found = Facts(program=program, distribute=every, steps=steps(), gpu_samples=samples(*gpus))
    assert check(IdleGpus, found) == []
