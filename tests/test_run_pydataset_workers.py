"""`gpuwhy run` of Keras fit over a PyDataset with worker threads that still feed the
steps too slowly (the corpus's `pydataset_workers`). Keras turns tf.data's autotune off
for it, so TF keeps no gap timer: the wait is timed around the generator's calls, the
class's construction gets more workers, and neither a missing prefetch (the enqueuer
reads ahead) nor a periodic stall (the steps that wait are the input's) is reported."""

import json
import shutil

import pytest

from gpuwhy.schema import validation_errors
from tests.corpus.corpus import PROGRAMS
from tests.test_run_tensorflow import line_with, run


@pytest.fixture(scope="module")
def workers_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pydataset-workers")
    program = tmp / "prog.py"
    shutil.copy(PROGRAMS / "pydataset_workers.py", program)
    result = run("--json", tmp / "run.json", "prog.py", cwd=tmp)
    assert result.returncode == 0, result.stderr[-3000:]
    return program, json.loads((tmp / "run.json").read_text()), result.stdout + result.stderr


def test_the_wait_is_timed_around_the_generator_and_named_by_its_class(workers_run):
    program, record, _ = workers_run
    assert validation_errors(record) == []
    steps = record["steps"]
    assert steps["input_wait_source"] == "generator timing"
    # two workers of 12 ms a batch against steps of about a millisecond: most of it
    assert steps["input_wait_fraction"] > 0.4
    (pipeline,) = [p for p in record["tfdata"]["pipelines"] if p["consumer"] == "keras-fit"]
    assert pipeline["gap_source"] == "generator timing"
    assert pipeline["elements"] == 128  # two epochs of 64 batches, counted by the generator
    assert "Keras turned autotune off" in pipeline["model_error"]
    (bound,) = [f for f in record["findings"] if f["id"] == "input.bound"]
    assert bound["severity"] == "high"
    assert bound["location"] == f"prog.py:{line_with(program, 'def __getitem__')}"
    made = line_with(program, "data = Batches(")
    assert f"# prog.py:{made}: in place of: Batches(2048, 32, workers=2)" in bound["fix"]
    assert "Batches(2048, 32, workers=4)" in bound["fix"].splitlines()


def test_neither_a_missing_prefetch_nor_a_stall_of_the_program_s_own(workers_run):
    _, record, output = workers_run
    ids = {f["id"] for f in record["findings"]}
    assert "input.no-prefetch" not in ids
    assert "steps.periodic-stall" not in ids
    assert "by generator timing" in output
    assert "(options.autotune.enabled=False)" not in output


LOOP_WITHOUT_AUTOTUNE = """
import tensorflow as tf

ds = tf.data.Dataset.range(20000).map(lambda x: tf.cast(x, tf.float32)).batch(4)
options = tf.data.Options()
options.autotune.enabled = False
ds = ds.with_options(options)
total = 0.0
for epoch in range(3):
    for x in ds:
        total += 1.0
print("done", total)
"""


@pytest.mark.parametrize("program", ["corpus", "loop"])
def test_a_pipeline_without_autotune_adds_nothing_to_the_program_s_stderr(tmp_path, program):
    """TF keeps no model of such a pipeline; asking for one anyway made TF log
    "Cannot find this iterator's analytical model" on the program's stderr, once per
    iterator (by the model poll) and once more in a loop of short steps (by the hooks'
    pauses), which plain python never prints."""
    path = tmp_path / "prog.py"
    if program == "corpus":
        shutil.copy(PROGRAMS / "pydataset_workers.py", path)
    else:
        path.write_text(LOOP_WITHOUT_AUTOTUNE)
    result = run("prog.py", cwd=tmp_path, env_extra={"TF_CPP_MIN_LOG_LEVEL": "0"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "analytical model" not in result.stderr
