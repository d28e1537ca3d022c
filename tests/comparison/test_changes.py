"""The comparison's figures on small facts: called only beyond both runs' spread, the
parts that moved named, GPU busy for records without steps."""

import random

import pytest

from gpuwhy.comparison import ONE_RUN_A_SIDE, compare, diff_verdict
from gpuwhy.comparison.changes import MIN_STEP_CHANGE, busy_change, part_changes, step_change
from gpuwhy.comparison.comparable_units import run_units
from gpuwhy.comparison.gate import crossed_by_comparison, parse
from gpuwhy.facts import (
    Facts,
    GpuWindow,
    ProjectionFacts,
    RunTimeline,
    RunWindow,
    StepFacts,
    StepSpan,
    StepTimeline,
)
from gpuwhy.record import Record


def steps(durations, waits=None, width=1.0, all_kept=True):
    """A steps section as a run records it: every step kept, and its 1 s windows."""
    starts, t = [], 0.0
    for d in durations:
        starts.append(t)
        t += d
    windows = {}
    for i, (s, d) in enumerate(zip(starts, durations)):
        windows.setdefault(int(s // width), []).append((d, waits[i] if waits else None))
    spans = tuple(
        StepSpan(
            start_s=k * width,
            steps=len(v),
            p50_s=sorted(d for d, _ in v)[len(v) // 2],
            p90_s=max(d for d, _ in v),
            max_s=max(d for d, _ in v),
            step_s=sum(d for d, _ in v),
            input_wait_s=sum(w for _, w in v) if waits else None,
        )
        for k, v in sorted(windows.items())
    )
    return StepFacts(
        source="tf-data",
        marker="loop",
        count=len(durations),
        starts=tuple(starts) if all_kept else (),
        durations=tuple(durations) if all_kept else (),
        input_waits=tuple(waits) if waits and all_kept else (),
        input_wait_source="next() timing" if waits else None,
        timeline=StepTimeline(width_s=width, windows=spans),
        all_kept=all_kept,
    )


def noisy(n, mean, seed, spread=0.1):
    rng = random.Random(seed)
    return [mean * rng.uniform(1 - spread, 1 + spread) for _ in range(n)]


def test_two_runs_of_one_program_are_no_measurable_difference():
    before = run_units(Facts(steps=steps(noisy(3000, 0.01, 1))))
    after = run_units(Facts(steps=steps(noisy(3000, 0.01, 2))))
    change = step_change(before, after)
    assert change.called == "same"
    assert change.low < 1 < change.high
    assert change.detectable == MIN_STEP_CHANGE  # the interval is narrower than the floor
    text = diff_verdict(change, None, (), ())
    assert text.startswith("No measurable difference in step time: 10.0 ms and 10.0 ms a step")
    assert "cannot show a change under 5%" in text


@pytest.mark.parametrize("factor, called", [(1.08, "slower"), (0.8, "faster")])
def test_a_real_change_is_called_with_its_interval(factor, called):
    before = run_units(Facts(steps=steps(noisy(3000, 0.01, 1))))
    after = run_units(Facts(steps=steps([d * factor for d in noisy(3000, 0.01, 2)])))
    change = step_change(before, after)
    assert change.called == called
    assert change.low < factor < change.high
    assert abs(change.estimate - factor) < 0.01


def test_a_change_under_the_floor_is_not_called_however_narrow_its_interval():
    before = run_units(Facts(steps=steps(noisy(4000, 0.01, 1, spread=0.001))))
    after = run_units(Facts(steps=steps([d * 1.04 for d in noisy(4000, 0.01, 2, spread=0.001)])))
    change = step_change(before, after)
    assert change.low > 1.0  # measurable, but 4 % is what two runs of one program differ by
    assert change.called == "same"


def test_a_noisy_short_pair_says_how_large_a_change_it_could_have_shown():
    before = run_units(Facts(steps=steps(noisy(60, 0.01, 1, spread=0.9))))
    after = run_units(Facts(steps=steps(noisy(60, 0.01, 3, spread=0.9))))
    change = step_change(before, after)
    assert change.called == "same"
    assert change.detectable > 0.1  # said: this pair cannot show a change under that
    assert f"cannot show a change under {change.detectable:.0%}" in diff_verdict(
        change, None, (), ()
    )


def test_too_few_steps_compare_nothing_and_say_why():
    record_b = Record(command="run", facts=Facts(steps=steps(noisy(10, 0.01, 1))))
    record_a = Record(command="run", facts=Facts(steps=steps(noisy(3000, 0.01, 2))))
    comparison = compare(record_b, record_a)
    assert comparison.step_time is None
    assert comparison.verdict.startswith("Nothing to compare")
    assert any("BEFORE has fewer than 30 training steps" in n for n in comparison.notes)


def test_a_run_whose_input_slowed_names_the_input_with_its_share():
    before_d = noisy(3000, 0.004, 1)
    after_d = [d + 0.002 for d in noisy(3000, 0.004, 2)]
    waits_b = [0.0005] * 3000
    waits_a = [0.0025] * 3000
    b, a = Facts(steps=steps(before_d, waits_b)), Facts(steps=steps(after_d, waits_a))
    ub, ua = run_units(b), run_units(a)
    parts, notes = part_changes(ub, ua, b, a)
    (input_part,) = [p for p in parts if p.part == "input"]
    assert input_part.called and input_part.low_s > 0
    assert input_part.delta_s == pytest.approx(0.002, rel=0.01)
    assert input_part.share == pytest.approx(1.0, abs=0.05)
    text = diff_verdict(step_change(ub, ua), None, parts, ())
    assert text.startswith("AFTER is 1.50x slower per step")
    assert "waiting for input 0.5 ms -> 2.5 ms (100% of the change)" in text


def test_a_part_measured_in_one_record_only_is_not_compared():
    b = Facts(steps=steps(noisy(3000, 0.004, 1), [0.001] * 3000))
    a = Facts(steps=steps(noisy(3000, 0.004, 2)))
    parts, notes = part_changes(run_units(b), run_units(a), b, a)
    assert not [p for p in parts if p.part == "input"]
    assert notes == ("waiting for input: measured in BEFORE only, not compared",)


def test_the_windows_speak_for_a_run_longer_than_its_kept_steps():
    b = run_units(Facts(steps=steps(noisy(6000, 0.002, 1), width=0.25, all_kept=False)))
    assert b.basis == "48 windows of 0.25 s"
    a = run_units(Facts(steps=steps(noisy(6000, 0.0024, 2), width=0.25, all_kept=False)))
    change = step_change(b, a)
    assert change.called == "slower"
    assert change.estimate == pytest.approx(1.2, rel=0.01)


def gpu_timeline(busy, seed):
    rng = random.Random(seed)
    return RunTimeline(
        width_s=1.0,
        run_s=len(busy),
        windows=tuple(
            RunWindow(
                start_s=float(i),
                gpus=(GpuWindow(index=0, samples=10, utilization=b * rng.uniform(0.95, 1.05)),),
            )
            for i, b in enumerate(busy)
        ),
    )


def test_watch_records_compare_the_gpus_busy_share():
    before = Record(command="watch", facts=Facts(timeline=gpu_timeline([0.4] * 30, 1)))
    after = Record(command="watch", facts=Facts(timeline=gpu_timeline([0.8] * 30, 2)))
    comparison = compare(before, after)
    busy = comparison.gpu_busy
    assert busy.called == "higher" and busy.estimate == pytest.approx(0.4, abs=0.02)
    assert comparison.verdict.startswith("The GPUs are busy higher in AFTER: 40% -> 80%")
    same = busy_change(run_units(before.facts), run_units(before.facts))
    assert same.called == "same"


def projection(step_s, gpu="A100"):
    return ProjectionFacts(
        gpu=gpu,
        requested=gpu,
        function="train_step (train.py:9)",
        step_s=step_s,
        step_low_s=step_s * 0.7,
        step_high_s=step_s * 1.4,
        tensor_s=step_s / 2,
        kernels_s=step_s / 2,
        copies_s=0.0,
    )


def test_the_projected_step_is_compared_on_the_same_gpu_only():
    before = Record(command="run", facts=Facts(projection=projection(0.010)))
    after = Record(command="run", facts=Facts(projection=projection(0.013)))
    c = compare(before, after)
    assert c.projected_gpu == "A100"
    p = c.projected_step
    assert (p.called, p.estimate, p.low, p.high) == ("slower", 1.3, 0.91, 1.82)
    gate = [parse("projected:+5%")]
    assert crossed_by_comparison(gate, c) == [
        "projected:+5%: the step projected on A100 is 30.0% slower (a prediction from the "
        "traced graph)"
    ]
    # the host's own work measured in each run moves from run to run (the step time sees
    # it): the gate compares the GPU's part the traced graph gives
    from dataclasses import replace

    gpu_part = dict(device_s=0.004, device_low_s=0.003, device_high_s=0.006)
    host_paced = replace(projection(0.010), host_s=0.010, **gpu_part)
    slower_host = replace(projection(0.013), host_s=0.013, **gpu_part)
    c = compare(
        Record(command="run", facts=Facts(projection=host_paced)),
        Record(command="run", facts=Facts(projection=slower_host)),
    )
    assert c.projected_step.called == "same" and c.projected_step.estimate == 1.0
    assert crossed_by_comparison(gate, c) == []
    other = Record(command="run", facts=Facts(projection=projection(0.013, "T4")))
    c = compare(before, other)
    assert c.projected_step is None
    assert (
        "BEFORE projected onto A100, AFTER onto T4: the findings drawn from a projection "
        "are not compared"
    ) in c.notes


def test_findings_a_projection_made_are_not_changes_where_one_side_did_not_project():
    """A diff of a run with --target A100 against one without: input.projected-bound is
    not "gone", nor launch.eager-ops (its severity the projection raised) "better"; the
    findings both sides measured still compare, and the note says why the others do not."""
    from gpuwhy.finding import Finding

    projected = Finding(
        "input.projected-bound",
        "high",
        "On A100 ...",
        evidence={"gpu": "A100", "projected_input_wait": 0.9},
    )
    eager_high = Finding("launch.eager-ops", "high", "ops", evidence={"projected": "on A100 ..."})
    eager_low = Finding("launch.eager-ops", "low", "ops", evidence={"eager_ops_per_step": 107})
    retrace = Finding("launch.retracing", "medium", "traced 12 times")
    before = Record(
        command="run",
        facts=Facts(projection=projection(0.010)),
        findings=[projected, eager_high, retrace],
    )
    after = Record(command="run", facts=Facts(), findings=[eager_low])
    c = compare(before, after)
    assert [(f.id, f.change) for f in c.findings] == [("launch.retracing", "gone")]
    assert (
        "BEFORE projected onto A100, AFTER onto no GPU (no --target): the findings drawn "
        "from a projection are not compared"
    ) in c.notes


def loaded(steps_facts, others, program=0.45):
    """The steps with timeline rows saying which share of the host's cores other
    processes and the program kept busy."""
    return Facts(
        steps=steps_facts,
        timeline=RunTimeline(
            width_s=1.0,
            run_s=len(steps_facts.timeline.windows),
            windows=tuple(
                RunWindow(
                    start_s=w.start_s,
                    steps=w.steps,
                    cpu_others_share=others,
                    cpu_process_share=program,
                )
                for w in steps_facts.timeline.windows
            ),
        ),
    )


def test_a_slowdown_while_neighbours_took_the_busy_host_s_cores_is_the_machine_s():
    before = Record(command="run", facts=loaded(steps(noisy(3000, 0.01, 1)), others=0.05))
    slower = steps([d * 1.3 for d in noisy(3000, 0.01, 2)])
    after = Record(command="run", facts=loaded(slower, others=0.45))
    c = compare(before, after)
    assert c.step_time.called == "slower"
    assert c.confounded_by == (
        "other processes used 45% of the host's CPU during AFTER against 5% during BEFORE, "
        "when its cores were busy (90% with the program's): part of the difference may be "
        "the machine's"
    )
    assert c.verdict.endswith(f"; but {c.confounded_by}.")
    # the same neighbours on a host with cores to spare took nothing from the program
    idle = Record(command="run", facts=loaded(slower, others=0.45, program=0.2))
    assert compare(before, idle).confounded_by is None
    # the neighbours were there in both runs: the slowdown is the program's
    both = Record(command="run", facts=loaded(steps(noisy(3000, 0.01, 1)), others=0.40))
    assert compare(both, after).confounded_by is None
    # and a speed-up while the neighbours left is said the other way round
    faster = compare(after, before)
    assert faster.step_time.called == "faster"
    assert faster.confounded_by.startswith(
        "other processes used 45% of the host's CPU during BEFORE against 5% during AFTER"
    )


def test_a_slowdown_beyond_what_the_neighbours_cores_could_explain_is_the_program_s():
    before = Record(command="run", facts=loaded(steps(noisy(3000, 0.01, 1)), others=0.57))
    # 12 more points of a busy host's CPU to neighbours: at most (0.3 + 0.12) / 0.3 = 1.4x
    much = steps([d * 2.3 for d in noisy(3000, 0.01, 2)])
    after = Record(command="run", facts=loaded(much, others=0.69, program=0.3))
    c = compare(before, after)
    assert c.step_time.called == "slower" and c.confounded_by is None
    little = steps([d * 1.2 for d in noisy(3000, 0.01, 2)])
    within = Record(command="run", facts=loaded(little, others=0.69, program=0.3))
    assert compare(before, within).confounded_by is not None


def test_two_merged_clusters_compare_their_workers_windows_pooled(tmp_path):
    from dataclasses import replace

    from gpuwhy.modes.merge import merge
    from tests.builders_workers import save, worker_record

    def cluster(name, mean, seed):
        folder = tmp_path / name
        folder.mkdir()
        for i, worker in enumerate(("worker-0", "worker-1")):
            record = worker_record(worker)
            timed = steps(noisy(2000, mean, seed + i), waits=[mean / 10] * 2000)
            save(folder, replace(record, facts=replace(record.facts, steps=timed)))
        return merge(str(folder))

    before, after = cluster("before", 0.010, 1), cluster("after", 0.008, 5)
    assert all(w.windows for w in before.facts.workers.workers)
    c = compare(before, after)
    assert c.before.basis.endswith("windows of 2 workers")
    assert c.step_time.called == "faster"
    assert c.step_time.estimate == pytest.approx(0.8, rel=0.02)
    (input_part,) = [p for p in c.parts if p.part == "input"]
    assert input_part.delta_s == pytest.approx(-0.0002, rel=0.05)


def test_a_bigger_batch_is_judged_per_example():
    from gpuwhy.comparison.changes import example_change

    step = step_change(
        run_units(Facts(steps=steps(noisy(3000, 0.005, 1)))),
        run_units(Facts(steps=steps(noisy(3000, 0.012, 2)))),
    )
    example = example_change(step, 256, 1024)  # 4x the batch, 2.4x the step
    assert example.called == "faster"
    assert example.estimate == pytest.approx(0.6, rel=0.02)
    assert example.low == pytest.approx(step.low / 4, abs=1e-5)
    text = diff_verdict(step, None, (), (), example=example, batches=(256, 1024))
    assert text.startswith("AFTER trains on batches of 1024 against 256: 1.67x faster per example")
    assert "2.40x slower per step" in text
    assert example_change(step, 256, 256) is None


def test_the_pair_is_said_when_it_is_one_record_or_two_programs():
    from gpuwhy.facts import ProgramFacts

    def run_of(script, seed):
        return Record(
            command="run",
            facts=Facts(
                program=ProgramFacts(command=(script,)), steps=steps(noisy(500, 0.01, seed))
            ),
        )

    one = run_of("train.py", 1)
    assert compare(one, one).notes[0].startswith("BEFORE and AFTER are the same record")
    two = compare(one, run_of("other/eval.py", 2))
    assert two.notes[0] == "the records are of two programs: train.py and other/eval.py"
    assert ("program", "train.py", "other/eval.py") in [
        (e.what, e.before, e.after) for e in two.environment
    ]
    # the same script: only what one run a side cannot see
    assert compare(one, run_of("./train.py", 3)).notes == (ONE_RUN_A_SIDE,)


def test_the_rest_of_the_step_shows_where_the_time_of_a_shrinking_part_went():
    """The input wait grew by 2 ms and the step did not: the time moved out of the part
    the split does not name, and the table says so (the parts add up to the step)."""
    durations = noisy(3000, 0.004, 1)
    b = Facts(steps=steps(durations, [0.0005] * 3000))
    a = Facts(steps=steps(durations, [0.0025] * 3000))
    ub, ua = run_units(b), run_units(a)
    parts, _ = part_changes(ub, ua, b, a)
    by_name = {p.part: p for p in parts}
    assert by_name["input"].delta_s == pytest.approx(0.002, rel=0.01)
    rest = by_name["rest"]
    assert rest.label == "the rest (not split)" and rest.measured_by.startswith("the step")
    assert rest.delta_s == pytest.approx(-0.002, rel=0.01) and rest.called
    for side in ("before_s", "after_s"):  # the parts and the rest: the step's time
        assert sum(getattr(p, side) for p in parts) == pytest.approx(
            sum(durations[1:]) / len(durations[1:]), rel=0.05
        )
    # the verdict names a part the split names, never the rest
    step = step_change(ub, ua)
    text = diff_verdict(step, None, parts, ())
    assert "the rest" not in text
