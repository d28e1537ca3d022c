"""`gpuwhy run` on a real Keras fit starved by its tf.data pipeline
(examples/slow_input_fit.py): the wait, the stages as TF ran them, the culprit's line."""

import json

import pytest

from gpuwhy.schema import validation_errors
from tests.test_run_tensorflow import ROOT, line_with, run

EXAMPLE = ROOT / "examples" / "slow_input_fit.py"
WHERE = "examples/slow_input_fit.py"


@pytest.fixture(scope="module")
def fit_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("fit") / "run.json"
    # 1536 images (48 batches an epoch): the stages under the shuffle stay alive long
    # enough to be read on a loaded machine (TF drops an exhausted input's stages from
    # its model; with 768, one run in four read none of them, and the cache's saving
    # was sometimes under its threshold)
    result = run("--json", out, WHERE, "--epochs", "3", "--images", "1536")
    return result, json.loads(out.read_text())


def _pipeline(record):
    (pipeline,) = [p for p in record["tfdata"]["pipelines"] if p["consumer"] == "keras-fit"]
    return pipeline


def test_the_fit_runs_unchanged_and_its_record_is_valid(fit_run):
    result, record = fit_run
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines()[-1].startswith("final loss ")
    assert validation_errors(record) == []
    assert record["steps"]["source"] == "keras-fit"
    assert record["steps"]["count"] == 144  # 3 epochs x 1536/32 batches


def test_keras_fit_input_wait_comes_from_tf_data_s_gap_timer(fit_run):
    _, record = fit_run
    steps, pipeline = record["steps"], _pipeline(record)
    assert steps["input_wait_source"] == "tf.data gap timer"
    assert pipeline["gap_mean_s"] > 0
    # step = wait + gap: the wait share is what the gaps leave of the mean step, over
    # the steps of the iterators the gaps come from (the first step a warm-up)
    assert not steps["later_warmup"] and steps["all_kept"]
    timed = [
        duration
        for i, (start, duration) in enumerate(zip(steps["starts"], steps["durations"]))
        if i >= steps["warmup"] and start >= pipeline["gaps_since_s"]
    ]
    assert len(timed) >= 96  # two epochs at least
    assert steps["input_wait_fraction"] == pytest.approx(
        max(0.0, 1 - pipeline["gap_mean_s"] / (sum(timed) / len(timed))), abs=1e-3
    )
    # one per epoch (Keras' iterator made ahead of each and never read is not counted)
    assert pipeline["iterators"] == 3, (pipeline["elements"], record["tfdata"]["notes"])


def test_the_stages_are_tf_s_own_joined_with_the_lines_that_wrote_them(fit_run):
    _, record = fit_run
    stages = {s["name"]: s for s in _pipeline(record)["stages"]}
    reader = stages["TFRecord"]
    assert reader["codec_ops"] == ["GZIP"]
    assert reader["location"] == f"{WHERE}:{line_with(EXAMPLE, 'tf.data.TFRecordDataset(files')}"
    # parse is stateless: TF parallelised it without being asked (map_parallelization)
    parse = stages["ParallelMapV2"]
    assert parse["function"] == "parse" and parse["written_as"] == ["map"]
    assert parse["function_location"] == f"{WHERE}:{line_with(EXAMPLE, 'def parse(record)')}"
    assert "DecodePng" in parse["codec_ops"]
    # augment draws random numbers from a stateful op: it stays sequential
    augment = stages["Map"]
    assert augment["function"] == "augment" and augment["stateful"] and augment["random"]
    assert stages["Prefetch"]["written_as"] == []  # injected by TF
    # each call as written, read from the example's source
    assert reader["written_calls"] == ["tf.data.TFRecordDataset(files, compression_type='GZIP')"]
    assert parse["written_calls"] == [".map(parse)"]
    assert stages["Shuffle"]["written_calls"] == [".shuffle(256, seed=0)"]


def test_the_sequential_augmentation_is_named_with_its_line_and_fix(fit_run):
    result, record = fit_run
    augment_line = f"{WHERE}:{line_with(EXAMPLE, 'def augment(image, label)')}"
    pipeline = _pipeline(record)
    assert pipeline["stages"][pipeline["bottleneck"]]["function_location"] == augment_line
    ids = {f["id"]: f for f in record["findings"]}
    map_line = line_with(EXAMPLE, ".map(augment)")
    # at the .map() call its fix gives threads; the stage's own code is input.bound's
    assert ids["input.sequential-map"]["location"] == f"{WHERE}:{map_line}"
    assert "stateless" in ids["input.sequential-map"]["fix"]
    # the fix rewrites the call as written in the chain, nothing else
    assert (
        f"# {WHERE}:{map_line}: in place of: .map(augment)\n"
        ".map(augment, num_parallel_calls=tf.data.AUTOTUNE)\n"
    ) in ids["input.sequential-map"]["fix"]
    assert ids["input.bound"]["location"] == augment_line
    assert "compression.cpu-codec" in ids and "input.no-cache" in ids
    assert "input.no-prefetch" not in ids  # TF injected one
    assert "launch.eager-ops" not in ids  # the record writing is set-up, not steps
    assert f"slowest stage: Map(augment at {augment_line})" in record["verdict"]["text"]
    assert "slowest stage Map(augment at" in result.stderr


PEEKS_THEN_FIT = """
import time

import tensorflow as tf

x = tf.random.uniform([256, 8])
y = tf.zeros([256], tf.int32)
print(next(iter(tf.data.Dataset.from_tensor_slices(x))))  # peeks at datasets,
print(next(iter(tf.data.Dataset.from_tensor_slices(y))))  # as tutorials do
print(next(iter(tf.data.Dataset.from_tensor_slices((x, y)))))
print(next(iter(tf.data.Dataset.from_tensor_slices((y, x)))))


def slow(a, b):
    a = tf.py_function(lambda t: (time.sleep(0.02), t)[1], [a], tf.float32)
    a.set_shape([8])
    return a, b


train = tf.data.Dataset.from_tensor_slices((x, y)).map(slow).batch(32)
model = tf.keras.Sequential([tf.keras.layers.Dense(4)])
model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(train, epochs=3, verbose=0)
"""


def test_the_pipeline_fit_reads_is_followed_after_several_peeks(tmp_path):
    """Four one-element peeks at other datasets, then fit on a pipeline that sleeps 20 ms
    an element: the fit's pipeline is followed and named (the report's row cap of 3 once
    capped the pipelines followed, and this one went unseen: "0% waiting")."""
    script = tmp_path / "peeks.py"
    script.write_text(PEEKS_THEN_FIT)
    out = tmp_path / "run.json"
    result = run("--json", out, script, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(out.read_text())
    assert len(record["tfdata"]["pipelines"]) == 5
    assert any(p["consumer"] == "keras-fit" for p in record["tfdata"]["pipelines"])
    ids = {f["id"] for f in record["findings"]}
    assert "input.bound" in ids, sorted(ids)
