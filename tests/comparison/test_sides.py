"""Several records a side on small facts: a change is judged against how the runs differ
from each other (not each run's own spread), the findings most runs have, what the runs
of one side did not share, a host loaded in one side's runs, and the calibration of
unchanged runs."""

import random

import pytest

from gpuwhy.comparison import compare, compare_runs
from gpuwhy.comparison.calibration import calibrate, read_noise
from gpuwhy.facts import Facts, ProgramFacts
from gpuwhy.finding import Finding
from gpuwhy.record import Record
from gpuwhy.report.diff.calibration import calibration_json
from tests.comparison.test_changes import loaded, noisy, steps


def run_at(level, seed, n=1500, spread=0.05, findings=(), others=None, program=None):
    """A run whose steps vary by ``spread`` about its own ``level`` (seconds a step)."""
    facts = Facts(steps=steps(noisy(n, level, seed, spread)))
    if others is not None:
        facts = loaded(facts.steps, others=others)
    if program is not None:
        facts = Facts(steps=facts.steps, timeline=facts.timeline, program=program)
    return Record(command="run", facts=facts, findings=list(findings))


LEVELS_B = (0.0100, 0.0108, 0.0093)  # runs of one program land 7 % apart
LEVELS_A = (0.0096, 0.0105, 0.0101)


def test_runs_that_differ_more_than_each_run_s_spread_are_no_measurable_difference():
    before = [run_at(v, i) for i, v in enumerate(LEVELS_B)]
    after = [run_at(v, 10 + i) for i, v in enumerate(LEVELS_A)]
    # one run a side calls what is only the runs' wander: each is steady in itself
    assert compare(before[1], after[0]).step_time.called == "faster"
    c = compare_runs(before, after)
    assert c.step_time.called == "same"
    assert c.step_time.low < 1 < c.step_time.high
    assert c.spread == "between runs"
    assert c.before.runs == 3 and len(c.after.run_step_s) == 3
    assert c.verdict.startswith("No measurable difference in step time")
    assert f"with 3 runs a side this program can show changes of {c.step_time.detectable:.0%}" in (
        c.verdict
    )
    assert any("Student's t with 4 degrees of freedom" in n for n in c.notes)
    # the runs' fastest steps wander with them: compared, said, calling nothing
    assert c.fast_steps is not None and c.fast_steps.called == "same"
    assert any(n.startswith("The fastest steps: ") and "their runs resolve" in n for n in c.notes)


def test_a_change_beyond_the_runs_spread_is_called_with_its_interval():
    before = [run_at(v, i) for i, v in enumerate(LEVELS_B)]
    after = [run_at(v * 1.3, 10 + i) for i, v in enumerate(LEVELS_B)]
    c = compare_runs(before, after)
    assert c.step_time.called == "slower"
    assert c.step_time.low < 1.3 < c.step_time.high
    assert c.verdict.startswith("AFTER is 1.30x slower per step")
    assert "(3 runs a side)" in c.verdict


def test_one_record_a_side_is_the_two_record_comparison_and_says_what_it_cannot_see():
    a, b = run_at(0.01, 1), run_at(0.01, 2)
    c = compare_runs([a], [b], names=(["a.json"], ["b.json"]))
    assert c == compare(a, b, names=("a.json", "b.json")) and c.spread == "within runs"
    assert any(n.startswith("one run a side: the intervals are each run's own") for n in c.notes)


def test_a_finding_is_a_side_s_when_most_of_its_runs_have_it():
    slow = Finding(id="input.bound", severity="high", title="waits", location="t.py:3")
    odd = Finding(id="launch.retracing", severity="medium", title="retraces", location="t.py:9")
    before = [run_at(v, i, findings=[slow]) for i, v in enumerate(LEVELS_B)]
    after = [
        run_at(LEVELS_A[0], 10, findings=[odd]),
        run_at(LEVELS_A[1], 11),
        run_at(LEVELS_A[2], 12),
    ]
    c = compare_runs(before, after)
    assert [(f.id, f.change) for f in c.findings] == [("input.bound", "gone")]


def test_runs_of_one_side_that_differ_in_more_than_chance_are_said():
    before = [
        run_at(v, i, program=ProgramFacts(command=("train.py",), tensorflow_version=version))
        for i, (v, version) in enumerate(zip(LEVELS_B, ("2.21.0", "2.21.0", "2.20.0")))
    ]
    after = [run_at(v, 10 + i) for i, v in enumerate(LEVELS_A)]
    c = compare_runs(before, after)
    assert "BEFORE's runs differ among themselves in: TensorFlow" in c.notes


def test_a_slowdown_while_neighbours_loaded_one_side_s_runs_is_the_machine_s():
    before = [run_at(v, i, others=0.02) for i, v in enumerate(LEVELS_B)]
    after = [run_at(v * 1.4, 10 + i, others=0.5) for i, v in enumerate(LEVELS_B)]
    c = compare_runs(before, after)
    assert c.step_time.called == "slower"
    assert c.confounded_by is not None
    assert c.confounded_by.startswith("other processes used 50% of the host's CPU during AFTER")


def test_the_calibration_says_what_n_runs_a_side_can_show_and_checks_it_on_the_runs():
    rng = random.Random(5)
    levels = [0.01 * rng.gauss(1, 0.05) for _ in range(8)]
    runs = [run_at(v, i) for i, v in enumerate(levels)]
    c = calibrate(runs, [f"run-{i}.json" for i in range(8)], runs_a_side=3)
    assert 0.02 < c.between_runs < 0.1  # the 5 % the runs were drawn with
    assert c.within_run < c.between_runs
    three = next(r for r in c.by_runs if r.runs == 3)
    percent = round(float(c.fail_on.removeprefix("step:+").removesuffix("%")))
    assert percent == pytest.approx(three.called_half * 100, abs=1)
    assert three.called_9_in_10 > three.called_half
    assert three.splits == 60 and three.splits_called <= 9  # about 1 in 20 of unchanged
    ten = next(r for r in c.by_runs if r.runs == 10)
    assert ten.splits == 0 and ten.called_half < three.called_half
    assert c.one_run_pairs == 20
    assert c.verdict.endswith(f"use --fail-on {c.fail_on} (rounded up).")
    with pytest.raises(ValueError, match="at least 3 records"):
        calibrate(runs[:2], ["a", "b"])
    assert "the spread is estimated from 4 runs" in " ".join(
        calibrate(runs[:4], ["a", "b", "c", "d"]).notes
    )


def test_a_loaded_host_during_calibration_is_said():
    runs = [
        run_at(v, i, others=share)
        for i, (v, share) in enumerate(zip((0.010, 0.0102, 0.0098, 0.0101), (0.0, 0.02, 0.4, 0.0)))
    ]
    c = calibrate(runs, ["a", "b", "c", "d"])
    assert any(n.startswith("other processes used 0% to 40% of the host's CPU") for n in c.notes)


def test_a_calibration_gives_one_run_a_side_an_interval_that_sees_between_runs(tmp_path):
    levels = (0.0100, 0.0108, 0.0093, 0.0104, 0.0097, 0.0101)
    runs = [run_at(v, i) for i, v in enumerate(levels)]
    path = tmp_path / "cal.json"
    path.write_text(calibration_json(calibrate(runs, [f"r{i}" for i in range(6)])))
    noise = read_noise(str(path))
    assert noise.df == 5
    a, b = run_at(0.0100, 20), run_at(0.0106, 21)  # 6 %: one run a side calls it alone
    assert compare(a, b).step_time.called == "slower"
    c = compare_runs([a], [b], noise=noise)
    assert c.step_time.called == "same" and c.spread == "between runs"
    assert not any(n.startswith("one run a side") for n in c.notes)
    assert any(f"as the calibration {path} measured it (6 unchanged runs" in n for n in c.notes)
    assert c.parts == compare(a, b).parts  # each run's own spread still splits the step
    far = compare_runs([a], [run_at(0.0150, 22)], noise=noise)
    assert far.step_time.called == "slower" and far.verdict.startswith("AFTER is 1.50x slower")


@pytest.mark.parametrize(
    "text, said",
    [
        ("{", "is not valid JSON"),
        ('{"schema": 1, "runs": 5}', "is not a calibration"),
        ('{"schema": 1, "runs": 2, "between_runs": 0.1, "by_runs": []}', "of 2 runs cannot"),
    ],
)
def test_a_calibration_that_cannot_be_read_is_one_line(tmp_path, text, said):
    path = tmp_path / "cal.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=said):
        read_noise(str(path))
    with pytest.raises(ValueError, match="cannot read"):
        read_noise(str(tmp_path / "missing.json"))


def test_a_run_without_steps_is_left_out_and_said():
    crashed = Record(command="run", facts=Facts())  # failed before its first step
    before = [run_at(v, i) for i, v in enumerate(LEVELS_B)]
    after = [run_at(LEVELS_A[0], 10), crashed, run_at(LEVELS_A[1], 11)]
    names = (["b1", "b2", "b3"], ["a1", "a2", "a3"])
    c = compare_runs(before, after, names=names)
    assert c.after.runs == 2 and c.step_time is not None
    assert c.notes[0].startswith("AFTER's a2: left out, no training steps to compare")
    # one run left a side: the two-record comparison, with what was left out said first
    alone = compare_runs(before[:2], [after[0], crashed], names=(["b1", "b2"], ["a1", "a2"]))
    assert alone.notes[0].startswith("AFTER's a2: left out") and alone.before.runs == 2
    nothing = compare_runs([crashed, crashed], [crashed])
    assert nothing.verdict.startswith("Nothing to compare") and nothing.verdict.endswith("sides.")


def test_records_on_both_sides_and_two_programs_are_said_first():
    runs = [run_at(v, i) for i, v in enumerate(LEVELS_B)]
    same = compare_runs(runs, runs)
    assert same.notes[0] == "BEFORE and AFTER are the same records"
    overlap = compare_runs(runs[:2], runs[1:], names=(["r1", "r2"], ["r2", "r3"]))
    assert overlap.notes[0] == "on both sides: r2"
    other = [
        run_at(v, 20 + i, program=ProgramFacts(command=("eval.py",)))
        for i, v in enumerate(LEVELS_A)
    ]
    mine = [
        run_at(v, i, program=ProgramFacts(command=("train.py",))) for i, v in enumerate(LEVELS_B)
    ]
    assert (
        "the records are of two programs: train.py and eval.py" in compare_runs(mine, other).notes
    )


def test_several_runs_a_side_list_the_rest_of_the_step_beside_the_parts():
    def run(seed, wait):
        durations = noisy(1500, 0.004, seed)
        return Record(command="run", facts=Facts(steps=steps(durations, [wait] * 1500)))

    c = compare_runs([run(i, 0.0005) for i in range(3)], [run(10 + i, 0.0025) for i in range(3)])
    by_name = {p.part: p for p in c.parts}
    assert by_name["input"].delta_s == pytest.approx(0.002, rel=0.02)
    assert by_name["rest"].delta_s == pytest.approx(-0.002, rel=0.05)
    assert by_name["rest"].measured_by == "the step time less the parts above"
