"""host.memory-growth from hand-built timelines: a steady leak, a buffer that fills once,
growth too small to matter, and memory read before training."""

from __future__ import annotations

from dataclasses import replace

from gpuwhy.facts import (
    Facts,
    GrowingObject,
    RunTimeline,
    RunWindow,
    StepFacts,
    StepLoop,
    TracedFunction,
    TracingFacts,
)
from gpuwhy.rules.host.memory_growth import MemoryGrowth
from tests import builders as b

MiB = 2**20
GiB = 2**30


def facts(rss, steps_per_window=100, first_s=0.0, host=16 * GiB, traces=0):
    windows = tuple(
        RunWindow(
            start_s=float(i),
            steps=steps_per_window if i >= first_s else 0,
            host_rss_max_bytes=v,
            traces=traces,
        )
        for i, v in enumerate(rss)
    )
    n = len(rss)
    count = steps_per_window * n
    steps = StepFacts(
        source="tf-data",
        marker="train.py:40",
        count=count,
        run_s=float(n),
        loops=(StepLoop("tf-data", "train.py:40", count, first_s, last_s=n - 0.5),),
    )
    timeline = RunTimeline(width_s=1.0, run_s=float(n), host_memory_bytes=host, windows=windows)
    return Facts(steps=steps, timeline=timeline)


def check(f):
    return MemoryGrowth().check(f, dict(MemoryGrowth.options))


def test_a_steady_leak_gives_its_rate_its_bytes_per_step_and_when_the_host_runs_out():
    (finding,) = check(facts([600 * MiB + i * 4 * MiB for i in range(60)]))
    assert finding.title.startswith("The program's memory grows 236.0 MiB a minute while it trains")
    assert "41.0 KiB per step" in finding.title
    evidence = finding.evidence
    assert (
        evidence["bytes_per_step"] == 40 * 1024 + 405
        or abs(evidence["bytes_per_step"] - 4 * MiB / 100) < 2048
    )
    assert evidence["host_full_in_s"] is not None and evidence["host_full_in_s"] < 24 * 3600
    assert finding.severity == "high"  # the host is full within a day at this rate
    assert "losses.append(float(loss))" in finding.fix


def test_a_buffer_that_fills_once_then_stops_is_not_a_leak():
    filling = [600 * MiB + min(i, 20) * 20 * MiB for i in range(60)]
    assert check(facts(filling)) == []


def test_small_or_unsteady_growth_is_not_a_finding():
    assert check(facts([600 * MiB + i * 256 * 1024 for i in range(60)])) == []  # 15 MiB
    wobble = [600 * MiB + (i % 7) * 30 * MiB for i in range(60)]
    assert check(facts(wobble)) == []


def test_memory_before_training_and_too_few_windows_are_not_read():
    # start-up loads the model (a big rise), then training holds still
    rss = [100 * MiB + i * 100 * MiB for i in range(10)] + [1100 * MiB] * 50
    assert check(facts(rss, first_s=10.0)) == []
    assert check(facts([600 * MiB + i * 50 * MiB for i in range(6)])) == []


def test_growth_while_a_function_retraces_all_along_points_at_the_retracing():
    (finding,) = check(facts([600 * MiB + i * 4 * MiB for i in range(60)], traces=3))
    assert "tf.function traced 180 times meanwhile, each trace keeps its graph" in finding.title
    assert "reduce_retracing=True" in finding.fix
    # the program's own function and the scalars that changed, each as a tensor
    step = b.retraced_by_scalars()
    retracing = facts([600 * MiB + i * 4 * MiB for i in range(60)], traces=3)
    (named,) = check(replace(retracing, tracing=TracingFacts(functions=(step,))))
    assert (
        "train_step(..., lr=tf.constant(lr, tf.float32), step=tf.constant(step, tf.int64))"
        in named.fix
    )


def test_growth_while_model_after_model_is_built_names_the_models_not_a_retracing():
    """TF's time-series tutorial builds and fits thirteen models: their traces are the
    Keras step functions of each new model, none to stop; the memory is the models'."""
    keras_step = TracedFunction(
        name="one_step_on_data",
        location="ts.py:365",
        calls=0,
        call_s=0.0,
        traces=39,
        trace_s=7.0,
        library=True,
        instances=26,
        models=13,
        most_per_model=2,
    )
    growing = facts([600 * MiB + i * 8 * MiB for i in range(60)], traces=3)
    (finding,) = check(replace(growing, tracing=TracingFacts(functions=(keras_step,))))
    assert "13 Keras models were built and traced meanwhile" in finding.title
    assert "clear_session()" in finding.fix and "lr=tf.constant" not in finding.fix
    assert finding.evidence["keras_models_built"] == 13
    assert finding.severity == "medium"  # the rate holds only while models are built
    one_model = replace(keras_step, models=1, most_per_model=26)
    (retraced,) = check(replace(growing, tracing=TracingFacts(functions=(one_model,))))
    assert "tf.function traced 180 times meanwhile" in retraced.title


def test_start_up_creep_that_slows_down_is_not_a_leak():
    # TF's allocator, tf.data's buffers and autotuning grow fast at first, then less:
    # as a healthy fit on this host did (11 KiB a step, then 2.5 KiB)
    creep = [int(600 * MiB + 120 * MiB * (1 - 0.93**i)) for i in range(60)]
    assert check(facts(creep)) == []


def test_a_small_leak_is_found_when_the_censuses_name_what_grows():
    # a list of scalar loss tensors on this host: ~1.3 KiB a step, 26 MiB in 20 s
    leak = [580 * MiB + i * 1360 * 1000 for i in range(20)]
    assert check(facts(leak, steps_per_window=1000)) == []  # memory alone: too short, too little
    losses = GrowingObject(
        what="list", name="losses", holder="global of train.py", where="train.py:30",
        written="losses.append(loss)", length_first=2_000, length_last=19_000,
        first_at_s=1.0, last_at_s=18.0, element_type="EagerTensor", element_detail="float32 ()",
        element_bytes=1360,
    )  # fmt: skip
    named = facts(leak, steps_per_window=1000)
    assert named.timeline is not None
    named = replace(named, timeline=replace(named.timeline, growing=(losses,)))
    (finding,) = check(named)
    assert "1.3 KiB per step" in finding.title and "the list `losses`" in finding.title


def test_healthy_keras_creep_over_a_short_fit_is_not_a_leak():
    # the Keras weather LSTM example (3 epochs with validation): 779 -> 812 MiB in 15 s,
    # steadily, nothing named
    creep = [779 * MiB + i * int(2.2 * MiB) for i in range(15)]
    assert check(facts(creep, steps_per_window=20)) == []


# TF's own cache, as censuses that named libraries' containers named it in a 3D-image
# classifier's 16 training steps (1.3 GiB -> 1.33 GiB in 22 s; HIGH on a small host)
TF_CAPTURES = GrowingObject(
    what="list", name="_cached_by_val_capture_tuples", holder="attribute of FunctionCaptures",
    where="/venv/lib/python3.11/site-packages/tensorflow/core/function/capture/"
    "capture_container.py:303",
    written="self._cached_by_val_capture_tuples.append((external, internal))",
    length_first=0, length_last=74, first_at_s=28.0, last_at_s=50.0, element_type="tuple",
    element_bytes=400_000,
)  # fmt: skip
USER_LIST = replace(TF_CAPTURES, name="volumes", holder="global of train.py",
                    where="train.py:30", written="volumes.append(v)")  # fmt: skip
CREEP_22_S = [int(1.30 * GiB + i * 1.5 * MiB) for i in range(22)]  # +31.5 MiB, 2.4 %


def with_growing(f: Facts, *growing: GrowingObject) -> Facts:
    assert f.timeline is not None
    return replace(f, timeline=replace(f.timeline, growing=growing))


def test_a_handful_of_steps_is_no_leak_whatever_grows():
    sixteen_steps = [1 if i % 3 else 0 for i in range(22)]  # a step every 1.4 s
    few = facts(CREEP_22_S, steps_per_window=1)
    assert few.timeline is not None
    windows = tuple(
        replace(w, steps=n) for w, n in zip(few.timeline.windows, sixteen_steps, strict=True)
    )
    few = replace(few, timeline=replace(few.timeline, windows=windows))
    assert check(with_growing(few, USER_LIST)) == []


def test_a_library_s_container_is_not_named_as_the_cause():
    many = with_growing(facts(CREEP_22_S, steps_per_window=100), TF_CAPTURES)
    # nothing of the program's names the growth: resident memory alone, 22 s, 2 %: nothing
    assert check(many) == []
    # and where memory alone is enough to speak, it says nothing names it
    large = [int(1.30 * GiB + i * 40 * MiB) for i in range(22)]
    (finding,) = check(with_growing(facts(large, steps_per_window=100), TF_CAPTURES))
    assert finding.title.endswith("something keeps what each step makes")
    assert "growing" not in finding.evidence


def test_growth_of_a_few_per_cent_is_not_high_even_where_the_host_fills_within_a_day():
    small_host = facts(CREEP_22_S, steps_per_window=100, host=2 * GiB)
    (finding,) = check(with_growing(small_host, USER_LIST))
    assert finding.evidence["host_full_in_s"] < 24 * 3600
    assert finding.severity == "medium"
    # the title says what it grew by: "1.3 GiB -> 1.3 GiB" alone reads as no growth
    assert "(1.3 GiB -> 1.3 GiB, +31.5 MiB from" in finding.title
