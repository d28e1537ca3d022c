"""``gpuwhy fix SCRIPT`` on real programs, in real subprocesses: each fix it tries is run
on a copy, judged (ran, same results, faster) and only the ones that held are patched;
the user's folder is left as it was."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAMS = Path(__file__).parent / "programs"
CORPUS = Path(__file__).parent.parent / "corpus" / "programs"


def fix(
    tmp_path: Path, program: Path, *extra: str
) -> tuple[dict, str, subprocess.CompletedProcess]:
    shutil.copy(program, tmp_path / program.name)
    before = sorted(p.name for p in tmp_path.iterdir())
    done = subprocess.run(
        [
            sys.executable, "-m", "gpuwhy", "fix", "--runs", "2", "--bound", "30",
            "--json", "fix.json", "--patch", "fix.diff", *extra, program.name,
        ],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    after = sorted(p.name for p in tmp_path.iterdir())
    record = json.loads((tmp_path / "fix.json").read_text())
    patch = record["fix_trial"]["patch"] or ""
    written = ["fix.diff"] if patch else []  # no empty patch: it would apply as if one held
    assert after == sorted([*before, "fix.json", *written]), "the user's folder was written"
    if patch:
        assert (tmp_path / "fix.diff").read_text() == patch
    else:
        why = "no fix held" if record["fixes_tried"] else "no fix was tried"
        assert f"no patch written to fix.diff: {why}" in done.stderr
    return record, patch, done


def tried(record: dict, finding: str) -> list[dict]:
    return [t for t in record["fixes_tried"] if t["finding"] == finding]


def judged(t: dict) -> dict:
    """What a trial's verdict rests on: an assertion's message that a loaded CI host's
    failure can be read from (pytest cuts the whole entry after its first fields)."""
    keys = ("held", "same_results", "difference", "speedup", "speedup_low", "called", "runs")
    return {k: t.get(k) for k in (*keys, "in_patch", "left_out", "speed_note", "error")}


def patched_runs(tmp_path: Path, program: str, patch: str) -> subprocess.CompletedProcess:
    """The patch applied by git to a fresh copy, and the patched program run."""
    work = tmp_path / "patched"
    work.mkdir()
    shutil.copy(tmp_path / program, work / program)
    (work / "fix.diff").write_text(patch)
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    applied = subprocess.run(["git", "apply", "fix.diff"], cwd=work, capture_output=True, text=True)
    assert applied.returncode == 0, applied.stderr
    assert (work / program).read_text() != (tmp_path / program).read_text()
    return subprocess.run(
        [sys.executable, program], cwd=work, capture_output=True, text=True, timeout=300
    )


def test_the_eager_step_traced_is_proven_faster_and_patched(tmp_path):
    record, patch, done = fix(tmp_path, CORPUS / "eager_loop.py")
    (graph, xla) = tried(record, "launch.eager-ops")
    assert graph["ran"] and graph["same_results"] is True, graph
    assert graph["speedup"] >= 1.3 and graph["speedup_low"] > 1.0 and graph["called"] == "faster"
    assert graph["held"] and graph["in_patch"] and not xla["in_patch"] or xla["in_patch"]
    assert "+@tf.function" in patch and patch.count("@tf.function") == 1
    assert "Fixes tried on a copy of the program" in done.stderr
    assert "✓ HELD train_step traced" in done.stderr
    ran = patched_runs(tmp_path, "eager_loop.py", patch)
    assert ran.returncode == 0 and "epoch 2 loss" in ran.stdout, ran.stderr[-2000:]


def test_a_fix_that_changes_the_loss_is_said_so_and_left_out(tmp_path):
    record, patch, done = fix(tmp_path, PROGRAMS / "python_side_effect.py")
    graph = tried(record, "launch.eager-ops")[0]
    assert graph["ran"] and graph["same_results"] is False, graph
    assert "against" in graph["difference"]
    assert not graph["held"] and not graph["in_patch"] and "+@tf.function" not in patch
    # nothing else holds but, on a loaded host, the fix of TF's race at its epochs' ends
    held = {t["finding"] for t in record["fixes_tried"] if t["held"]}
    assert held <= {"input.iterator-end-wait"} and (patch == "") is (not held), held
    assert "same results: NO" in done.stderr


def test_a_fix_that_crashes_is_said_so_and_left_out(tmp_path):
    record, patch, done = fix(tmp_path, PROGRAMS / "numpy_in_step.py")
    graph = tried(record, "launch.eager-ops")[0]
    assert not graph["ran"] and "numpy" in graph["error"], graph
    assert not graph["in_patch"] and "+@tf.function" not in patch
    # nothing else holds but, on a loaded host, the fix of TF's race at its epochs' ends
    held = {t["finding"] for t in record["fixes_tried"] if t["held"]}
    assert held <= {"input.iterator-end-wait"} and (patch == "") is (not held), held
    assert "runs: NO" in done.stderr


def test_a_python_float_passed_as_a_tensor_ends_the_retracing(tmp_path):
    record, patch, _ = fix(tmp_path, CORPUS / "retracing.py")
    (rate,) = tried(record, "launch.retracing")
    assert rate["ran"] and rate["same_results"] is True and rate["speedup"] >= 1.3, judged(rate)
    assert "tf.constant(learning_rate, tf.float32)" in patch
    assert patched_runs(tmp_path, "retracing.py", patch).returncode == 0


def test_a_program_that_prints_its_trace_count_keeps_the_fix_that_ends_its_traces(tmp_path):
    """ "Tracing count: 1" against "Tracing count: 128" is what the fix is for: compared
    as a result, it refused a fix 40x faster (a review's program, as TF's guide prints
    its traces). The losses printed beside it are still compared."""
    source = tmp_path / "source" / "retracing_counted.py"
    source.parent.mkdir()
    traces = 'print("Tracing count:", train_step.experimental_get_tracing_count())\n'
    source.write_text((CORPUS / "retracing.py").read_text() + traces)
    record, patch, _ = fix(tmp_path, source)
    (rate,) = tried(record, "launch.retracing")
    assert rate["ran"] and rate["same_results"] is True and rate["held"], judged(rate)
    assert "tf.constant(learning_rate, tf.float32)" in patch
    ran = patched_runs(tmp_path, "retracing_counted.py", patch)
    assert ran.returncode == 0 and "Tracing count: 1\n" in ran.stdout, ran.stderr[-2000:]


def test_float64_made_float32_is_faster_within_its_stated_tolerance(tmp_path):
    # 1.4x on this CPU: with 2 runs a side a loaded machine leaves its interval unclear
    record, patch, _ = fix(
        tmp_path, PROGRAMS / "float64_fit.py", "--finding", "placement.float64", "--runs", "3"
    )
    (floatx,) = tried(record, "placement.float64")
    assert floatx["ran"] and floatx["same_results"] is True, floatx
    assert "10% relative" in floatx["tolerance"] and "initial weights" in floatx["tolerance"]
    assert floatx["speedup"] >= 1.2 and floatx["in_patch"]
    assert 'set_floatx("float32")' in patch


def test_the_input_fixes_written_into_the_program_are_measured_on_its_training(tmp_path):
    record, patch, _ = fix(tmp_path, PROGRAMS / "slow_input.py", "--finding", "input.bound")
    (pipeline,) = tried(record, "input.bound")
    assert pipeline["ran"] and pipeline["same_results"] is True, pipeline
    assert pipeline["speedup"] >= 1.2 and pipeline["in_patch"]
    # the map fused with the batch runs one element at a time: in parallel, and the
    # elements every epoch repeats cached
    assert ".batch(32).cache()\n" in patch
    assert patched_runs(tmp_path, "slow_input.py", patch).returncode == 0


def test_a_python_map_fused_with_its_batch_is_made_parallel_and_fixes_that_held_run_together(
    tmp_path,
):
    program = PROGRAMS / "eager_step_python_input.py"
    # 3 runs a side: with 2, the loop's time per step under the full suite's load read
    # 1.74x (0.93x-3.25x) where its steps alone were 2.01x, and the fix did not hold
    record, patch, _ = fix(tmp_path, program, "--runs", "3")
    (parallel,) = [t for t in record["fixes_tried"] if "Python functions in parallel" in t["fix"]]
    assert parallel["ran"] and parallel["same_results"] is True, parallel
    assert parallel["held"] and parallel["speedup"] >= 1.3 and parallel["in_patch"]
    # a .map(f).batch(n) runs as one MapAndBatch stage of parallelism 1: sequential
    assert "map(load, num_parallel_calls=tf.data.AUTOTUNE).batch(16)" in patch
    held = {t["finding"] for t in record["fixes_tried"] if t["held"]}
    combined = record["fix_trial"]["combined"]
    # the traced step may hold too (how much the input lets it is the host's), and the one
    # iterator for the run where the host's load made TF lose its race at epochs' ends
    if len(held) > 1:
        assert combined is not None and "+" in combined["finding"], record["fix_trial"]
        if combined["in_patch"]:
            assert ("+@tf.function" in patch) is ("launch.eager-ops" in held), held
    else:
        assert combined is None
    assert patched_runs(tmp_path, program.name, patch).returncode == 0


def test_a_healthy_program_gets_no_fix_claimed(tmp_path):
    record, patch, done = fix(tmp_path, CORPUS / "healthy_loop.py")
    # but for TF's race at its epochs' iterators' ends, which a loaded host makes it lose
    # (its corpus entry's `maybe`): one iterator for the run is then a true gain
    race = "input.iterator-end-wait"
    assert not any(t["held"] for t in record["fixes_tried"] if t["finding"] != race)
    if any(t["held"] for t in record["fixes_tried"]):
        assert "itertools.islice(" in patch
        return
    why = "no fix held" if record["fixes_tried"] else "no fix was tried"
    assert patch == "" and f"no patch: {why}" in done.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["--runs", "1", "x.py"], "--runs 1: between 2 and 20"),
        (["--keep", ".", "x.py"], "--keep . holds the program's folder"),
        (["--bound", "-1", "x.py"], "--bound must be"),
        (["--finding", "env.no-gpu", "x.py"], "--finding env.no-gpu"),
        (["missing.py"], "missing.py: no such file"),
        (
            ["--assume-pure", "--repeats", "3", "x.py"],
            "--assume-pure, --repeats: options of gpuwhy fix --input",
        ),
    ],
)
def test_bad_input_is_one_line_and_status_2(tmp_path, args, message):
    (tmp_path / "x.py").write_text("print(1)\n")
    done = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "fix", *args], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_a_float64_custom_loop_is_made_float32_from_its_inputs_to_its_variables(tmp_path):
    # a 1.4x-1.5x gain on this CPU: 3 runs a side (and a fourth where they leave it
    # unclear) call it on a loaded machine, where 2 left it unclear in CI
    record, patch, _ = fix(tmp_path, PROGRAMS / "float64_loop.py", "--runs", "3")
    (f32,) = tried(record, "placement.float64")
    assert f32["ran"] and f32["same_results"] is True, f32
    assert f32["speedup"] >= 1.2 and f32["in_patch"]
    assert (
        "tf.cast(tf.random.normal((256, 1024), stddev=0.05, dtype=tf.float64), tf.float32)" in patch
    )
    assert patched_runs(tmp_path, "float64_loop.py", patch).returncode == 0


def test_an_eager_loop_on_numpy_float64_gets_its_arrays_cast_where_they_are_made(tmp_path):
    """placement.float64 from the eager ops' dtypes (no tf.function to audit); the float
    arrays NumPy makes are cast to float32 where they are made, alone and beside the
    step traced."""
    # 3 runs a side, as the float64 loop's: on a loaded CI host 2 left the graph's 4x
    # unjudged once (other processes took 45 % of its CPU)
    record, patch, _ = fix(tmp_path, PROGRAMS / "float64_eager_numpy.py", "--runs", "3")
    found = {f["id"]: f for f in record["findings"]}
    assert "run eagerly" in found["placement.float64"]["title"]
    (f32,) = tried(record, "placement.float64")
    assert f32["ran"] and f32["same_results"] is True, f32
    assert f32["fix"] == "float32 for the 3 NumPy float array(s) the program makes"
    # the loop's body cannot move whole (total += float(loss), read by the epoch's
    # print): the statements issuing the ops become loss = train_step(xb, yb)
    graph = tried(record, "launch.eager-ops")[0]
    assert graph["held"] and graph["speedup"] >= 1.3, judged(graph)
    assert "+        loss = train_step(xb, yb)" in patch and "+    return loss" in patch
    assert "         total += float(loss)" in patch  # context: the Python stays as it was
    ran = patched_runs(tmp_path, "float64_eager_numpy.py", patch)
    assert ran.returncode == 0 and "epoch 3 loss" in ran.stdout, ran.stderr[-2000:]


def test_a_fit_fed_by_a_sequence_gets_worker_threads_proven(tmp_path):
    """fit on a keras.utils.Sequence: the Python source Keras reads a batch at a time;
    workers=4 in the class's __init__ makes them ahead of the step."""
    record, patch, done = fix(tmp_path, PROGRAMS / "sequence_fit.py")
    (threads,) = [t for t in record["fixes_tried"] if "worker threads" in t["fix"]]
    assert threads["ran"] and threads["same_results"] is True, threads
    assert threads["speedup"] >= 1.3 and threads["held"] and threads["in_patch"], judged(threads)
    assert "+        super().__init__(workers=4)" in patch
    assert "tried for input.bound, which it answers too" in done.stderr
    assert patched_runs(tmp_path, "sequence_fit.py", patch).returncode == 0


def test_a_generator_of_array_slices_is_replaced_by_slicing_proven_and_patched(tmp_path):
    """from_generator over a zip of two arrays in a custom loop: the same elements sliced
    by from_tensor_slices (the features cast to the signature's float32), faster, the
    loss the program prints the same."""
    record, patch, _ = fix(tmp_path, PROGRAMS / "generator_loop.py", "--finding", "input.bound")
    (sliced,) = [t for t in tried(record, "input.bound") if "from_tensor_slices" in t["fix"]]
    assert sliced["ran"] and sliced["same_results"] is True, sliced
    assert sliced["speedup"] >= 1.3 and sliced["in_patch"], judged(sliced)
    assert (
        '+dataset = tf.data.Dataset.from_tensor_slices((features.astype("float32"), labels))'
        ".batch(32)\n" in patch
    )
    done = patched_runs(tmp_path, "generator_loop.py", patch)
    assert done.returncode == 0 and "epoch 3: loss" in done.stdout, done.stderr[-2000:]


def test_an_eager_loop_inside_main_gets_its_step_statements_traced_not_main(tmp_path):
    record, patch, _ = fix(tmp_path, PROGRAMS / "eager_loop_in_main.py")
    graph = tried(record, "launch.eager-ops")[0]
    assert graph["ran"] and graph["same_results"] is True and graph["held"], judged(graph)
    text = (PROGRAMS / "eager_loop_in_main.py").read_text().splitlines()
    first = next(i for i, line in enumerate(text, 1) if "tf.GradientTape()" in line)
    last = next(i for i, line in enumerate(text, 1) if "apply_gradients" in line)
    assert "main traced" not in graph["fix"] and f"lines {first}-{last}" in graph["fix"]
    assert "+            logits, loss = train_step(xb, yb)" in patch
    ran = patched_runs(tmp_path, "eager_loop_in_main.py", patch)
    assert ran.returncode == 0 and "epoch 4:" in ran.stdout, ran.stderr[-2000:]


def test_run_eagerly_left_in_compile_is_set_back_and_proven(tmp_path):
    record, patch, _ = fix(tmp_path, PROGRAMS / "run_eagerly_fit.py")
    (switch,) = [t for t in record["fixes_tried"] if "run_eagerly=False" in t["fix"]]
    assert switch["ran"] and switch["same_results"] is True, switch
    assert switch["held"] and switch["speedup"] >= 2.0, judged(switch)
    assert "+model.compile(" in patch and "run_eagerly=False" in patch
    assert patched_runs(tmp_path, "run_eagerly_fit.py", patch).returncode == 0


def test_a_cheap_parse_map_is_batched_first_and_parses_whole_batches(tmp_path):
    """Of the two fixes for the sequential map, batching first wins (here 6.7x against
    1.6x). input.no-cache's fix (parallel and cached) changes the same line and held too
    (3.9x): which of the two the patch keeps goes by their intervals' low ends, which at
    two runs a side a loaded machine can swap (CI: 5.2x lost to it), and that choice has
    its own tests (tests/trial/test_together.py); so only this finding is tried. At 3
    runs a side: with 2, the full suite's load late in a CI run left this gain unproven
    (the fix not held)."""
    program = PROGRAMS / "tfrecord_parse.py"
    record, patch, _ = fix(tmp_path, program, "--finding", "input.sequential-map", "--runs", "3")
    (first,) = [t for t in record["fixes_tried"] if t["fix"].startswith("batch before map(parse)")]
    assert first["ran"] and first["same_results"] is True, first
    assert first["held"] and first["speedup"] >= 1.5 and first["in_patch"], judged(first)
    assert "+    example = tf.io.parse_example(record, FEATURES)" in patch
    assert "+dataset = dataset.batch(128)\n dataset = dataset.map(parse" in patch
    ran = patched_runs(tmp_path, program.name, patch)
    assert ran.returncode == 0 and "epoch 3 loss" in ran.stdout, ran.stderr[-2000:]


def test_a_program_that_exits_with_its_usage_error_says_it_and_exits_with_its_status(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import argparse\n\n"
        "import tensorflow as tf  # first, as programs do: its log lines are not the error\n\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--epochs', type=int, default=1)\n"
        "parser.parse_args()\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "fix", "train.py", "--patch", "fix.diff"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    # --patch after the script is the script's own argument: its usage error is said
    said = "the original did not run to its bound: train.py: error: unrecognized arguments:"
    assert said in done.stderr, done.stderr[-2000:]
    assert not (tmp_path / "fix.diff").exists()


def test_a_patch_asked_for_after_the_script_is_said_unwritten_at_the_end(tmp_path):
    """``gpuwhy fix train.py --patch fix.diff``: the script gets --patch (as python -m
    has it); the note at the start scrolls away over minutes of runs, so the end, where
    the patch would be said written, says it was not, and why."""
    script = tmp_path / "train.py"
    script.write_text("import sys\nprint('args', sys.argv[1:])\n")
    done = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "fix", "--bound", "5", "train.py", "--patch", "fix.diff"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("gpuwhy fix: no patch written: --patch came after SCRIPT"), last
    assert not (tmp_path / "fix.diff").exists()


def test_a_finding_asked_for_that_run_1_did_not_find_is_said_so_with_the_bound(tmp_path):
    """``gpuwhy fix --finding input.no-cache`` on a program whose first epochs outlast the
    bound: run 1 finds no second pass to cache. The verdict says the finding was not
    found in the bound, and how to read more of the run, not "no fix gpuwhy can apply"."""
    script = tmp_path / "train.py"
    script.write_text("print('one epoch')\n")
    done = subprocess.run(
        [
            sys.executable, "-m", "gpuwhy", "fix", "--bound", "5", "--json", "fix.json",
            "--finding", "input.no-cache", "train.py",
        ],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    verdict = (
        "input.no-cache was not found in the original's first 5 s: nothing was tried (a "
        "longer --bound, e.g. --bound 20, reads more of the run)."
    )
    assert verdict in done.stderr, done.stderr[-2000:]  # the report: --json has stdout
    record = json.loads((tmp_path / "fix.json").read_text())
    assert record["fix_trial"]["not_tried"] == [
        ["input.no-cache", "not found in run 1 (the original's first 5 s)"]
    ]


def test_a_program_whose_training_starts_after_the_bound_is_said_unjudged(tmp_path):
    """keras-io's TFRecords recipe writes its records for over 30 s before fit: run 1,
    stopped at the bound, saw no training step, and the verdict read "No fix gpuwhy can
    apply to this program's findings", as if the program had nothing to fix."""
    script = tmp_path / "train.py"
    script.write_text(
        "import time\nfor _ in range(300):\n    time.sleep(0.1)  # writing the records\nprint('fit')\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "fix", "--bound", "3", "train.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    verdict = (
        "The original reached no training step in its first 3 s: nothing was judged or "
        "tried (a longer --bound, e.g. --bound 12, reads into its training)."
    )
    assert verdict in done.stderr, done.stderr[-2000:]
    assert "No fix gpuwhy can apply" not in done.stderr


def test_an_eager_validation_loop_between_epochs_is_traced_proven_and_patched(tmp_path):
    """The training step is a tf.function; the validation pass after each epoch runs
    the model and a Keras metric eagerly, most of the loop's time: its body traced
    computes the same accuracies, and the loop (judged as a whole: the steps alone do
    not change) is faster. At the default 3 runs a side: the loop's time per step is
    mostly the validation passes, whose time varies by a third from run to run here
    (0.19-0.63 s a pass), and with 2 runs a side (2 degrees of freedom) one slow run of
    the fix left a 2.6x gain's interval at 0.89x-7.4x, refused (1 trial in 2 here)."""
    record, patch, done = fix(tmp_path, CORPUS / "eager_validation_loop.py", "--runs", "3")
    (traced,) = tried(record, "steps.periodic-stall")
    assert traced["ran"] and traced["same_results"] is True, traced
    assert traced["speedup"] >= 1.2 and traced["in_patch"], judged(traced)
    assert "+def eval_step(features, labels):" in patch
    assert "+        eval_step(features, labels)" in patch
    ran = patched_runs(tmp_path, "eager_validation_loop.py", patch)
    assert ran.returncode == 0 and "epoch 4: loss" in ran.stdout, ran.stderr[-2000:]


def test_a_predict_each_step_made_predict_on_batch_is_proven_faster_and_patched(tmp_path):
    record, patch, _ = fix(
        tmp_path, CORPUS / "predict_each_step.py", "--finding", "steps.keras-call-per-step"
    )
    (one_batch,) = tried(record, "steps.keras-call-per-step")
    assert one_batch["fix"] == "generator.predict_on_batch() for generator.predict()"
    assert one_batch["ran"] and one_batch["same_results"] is True, one_batch
    assert one_batch["held"] and one_batch["speedup"] >= 1.5, judged(one_batch)
    assert "+    fake = generator.predict_on_batch(z)" in patch
    ran = patched_runs(tmp_path, "predict_each_step.py", patch)
    assert ran.returncode == 0 and "step 60:" in ran.stdout, ran.stderr[-2000:]
