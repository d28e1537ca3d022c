"""The Keras compatibility set: real ``fit`` and custom loops, mixed precision included,
under the Keras the setup pins and under the oldest Keras the pinned TensorFlow accepts.

Each Keras runs ``fit_matrix.py`` once in its own interpreter (the other Keras first on
``PYTHONPATH``, as ``make setup`` installs it under ``.venv/keras-compat/<version>``);
the tests below read its lines. Each test names one thing gpuwhy relies on in Keras'
training step, so a Keras that builds its step differently fails by that name instead
of turning into a false finding.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuwhy.facts import KERAS_TRAIN_FUNCTIONS, is_input_boundary
from tests.keras.configs import FIT_CONFIGS, LOOP_POLICIES, fit_name
from tests.markers import line as line_at

ROOT = Path(__file__).parents[2]
MATRIX = Path(__file__).with_name("fit_matrix.py")
# `make setup` installs the oldest Keras of the supported range here (Makefile: KERAS_OLDEST)
COMPAT_DIR = Path(os.environ.get("GPUWHY_KERAS_COMPAT", ROOT / ".venv" / "keras-compat"))
OLDEST = os.environ.get("GPUWHY_KERAS_OLDEST", "3.12.0")
KERAS = ["installed", OLDEST]
FIT_NAMES = [fit_name(*config) for config in FIT_CONFIGS]
# the dense models, placed op by op (jit_compile=False) or as Keras' "auto" on a GPU
CLEAN_FITS = [fit_name(*c) for c in FIT_CONFIGS if c[3] == "dense"]
PER_OP_FITS = [fit_name(*c) for c in FIT_CONFIGS if c[3] == "dense" and c[4] is False]
MIXED_FITS = [n for n in CLEAN_FITS if ":mixed_" in n]
# an Embedding's sparse gradient under mixed_float16 with XLA (on a GPU) or bfloat16
EMBEDDING_FIXED = [
    fit_name("mixed_float16", "adam", 1, "embedding", True),
    fit_name("mixed_float16", "adam", 1, "embedding", "auto"),
    fit_name("mixed_bfloat16", "adam", 1, "embedding", False),
]
LOOPS = [f"loop:{policy}" for policy in LOOP_POLICIES]
# Findings that would say the step copies or runs something on the host.
PLACEMENT_FINDINGS = ("placement.host-transfers", "placement.no-gpu-kernel", "placement.forced-cpu")


def _keras_path(keras: str) -> str | None:
    if keras == "installed":
        return None
    folder = COMPAT_DIR / keras
    if not (folder / "keras" / "__init__.py").exists():
        pytest.fail(
            f"Keras {keras} is not installed in {folder}: `make setup` installs it "
            "(the compatibility set runs on the oldest supported Keras too)"
        )
    return str(folder)


@pytest.fixture(scope="module", params=KERAS)
def matrix(request) -> dict[str, dict]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    path = _keras_path(request.param)
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join([path, str(ROOT)])
    else:
        env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, str(MATRIX)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    found = {line["name"]: line for line in lines}
    expected = (
        FIT_NAMES
        + LOOPS
        + [
            "fit:compiled-before",
            "fit:two-models",
            "fit:fine-tune",
            "predict:never-compiled",
        ]
    )
    assert set(found) == set(expected), done.stderr[-3000:]
    if request.param != "installed":
        assert {line["keras"] for line in lines} == {request.param}
    return found


def test_the_docs_name_the_keras_versions_the_set_runs_on():
    """docs/testing.md's table says which Keras the suite tests: the one installed (the
    setup's pin) and the oldest."""
    import keras

    readme = (ROOT / "docs" / "testing.md").read_text()
    assert f"Keras {OLDEST}" in readme
    assert f"Keras {keras.__version__}" in readme
    makefile = (ROOT / "Makefile").read_text()
    assert f"KERAS_SPEC ?= keras=={keras.__version__}" in makefile
    assert f"KERAS_OLDEST ?= {OLDEST}" in makefile


@pytest.mark.parametrize("name", CLEAN_FITS + LOOPS)
def test_fit_step_is_the_function_gpuwhy_audits(matrix, name):
    """The placement audit finds the training step: for fit, a function of the names
    gpuwhy's Keras rules know (KERAS_TRAIN_FUNCTIONS); for a loop, the user's own."""
    line = matrix[name]
    if name.startswith("fit:"):
        assert line["audited"] and set(line["audited"]) <= KERAS_TRAIN_FUNCTIONS, line
    else:
        assert line["audited"] == ["train_step"], line


@pytest.mark.parametrize("name", MIXED_FITS + LOOPS + EMBEDDING_FIXED)
def test_mixed_precision_step_makes_no_host_transfers(matrix, name):
    """The master weights' casts and the loss-scale optimizer's branches read variables
    that live on the GPU: TF colocates each read with its variable, so no copy."""
    line = matrix[name]
    assert not set(line["findings"]) & set(PLACEMENT_FINDINGS), line
    assert line["float_step_copies"] == [], line


@pytest.mark.parametrize("name", PER_OP_FITS + LOOPS)
def test_variable_reads_are_colocated_with_their_variables_on_the_gpu(matrix, name):
    line = matrix[name]
    assert line["variable_reads_on_gpu"] > 0, line
    on_host = [g for g in line["bad_groups"] if not is_input_boundary(g[0])]
    assert on_host == [], line


@pytest.mark.parametrize("name", CLEAN_FITS)
def test_the_inner_step_runs_inside_the_fit_function(matrix, name):
    """Keras calls its per-batch step (one_step_on_data) from the graph of the function
    fit calls: that one is called, the inner one is said to run inside it."""
    line = matrix[name]
    functions = {f["name"]: f for f in line["functions"]}
    (outer,) = [f for f in functions.values() if f["calls"] > 0]
    assert outer["name"] in KERAS_TRAIN_FUNCTIONS, functions
    inner = functions.get("one_step_on_data")
    assert inner is not None and inner["calls"] == 0, functions
    assert inner["inside"] == [outer["name"]], functions


@pytest.mark.parametrize("name", CLEAN_FITS)
def test_fit_steps_are_batches_whatever_the_steps_per_execution(matrix, name):
    """2 epochs of 10 batches are 20 steps, also when the epoch's last call runs fewer
    than steps_per_execution batches (Keras reports it as a full one)."""
    line = matrix[name]
    assert (line["step_source"], line["steps"]) == ("keras-fit", 20), line
    outer = next(f for f in line["functions"] if f["calls"] > 0)
    spe = line["steps_per_execution"]
    assert outer["calls"] == 2 * -(-10 // spe), line


def test_keras_auto_jit_places_the_step_as_one_xla_cluster(matrix):
    """jit_compile="auto": no XLA here (no GPU), XLA on a GPU machine; the step is
    placed as the GPU runs it, its ops inside one XLA cluster."""
    line = matrix[fit_name("mixed_float16", "adam", 1, "dense", "auto")]
    per_op = matrix[fit_name("mixed_float16", "adam", 1, "dense", False)]
    assert line["xla_ops"] > 0 and per_op["xla_ops"] == 0, (line, per_op)
    assert line["float_step_copies"] == [], line
    (note,) = line["notes"]
    assert "Keras compiles its step with XLA" in note, note
    assert per_op["notes"] == [], per_op


def test_a_compile_gpuwhy_did_not_see_is_said_to_leave_xla_unknown(matrix):
    """`with gpuwhy.session(): model.fit(...)` after compile(): jit_compile unknown."""
    line = matrix["fit:compiled-before"]
    assert line["xla_ops"] == 0, line
    (note,) = line["notes"]
    assert "compile() ran before gpuwhy watched" in note, note


def test_a_model_never_compiled_is_not_said_to_be_compiled_before_gpuwhy_watched(matrix):
    """predict() of an uncompiled model: no compile() ran at all, so the note says its
    jit_compile is Keras' default, not that a compile went unseen."""
    line = matrix["predict:never-compiled"]
    (note,) = line["notes"]
    assert "the model was never compiled" in note and "compile() ran before" not in note, note


def test_the_loss_scale_check_of_a_sparse_gradient_is_named_with_its_fix(matrix):
    """A true one: Keras' LossScaleOptimizer densifies an Embedding's gradient with a
    bool TensorScatterUpdate, which has no GPU kernel, when the step is not compiled by
    XLA. Its fix (XLA, or bfloat16) is applied in EMBEDDING_FIXED, which find nothing."""
    line = matrix[fit_name("mixed_float16", "adam", 1, "embedding", False)]
    assert "placement.no-gpu-kernel" in line["findings"], line
    assert [g for g in line["bad_groups"] if g[0] == "TensorScatterUpdate"], line
    fix = line["fixes"]["placement.no-gpu-kernel"]
    assert "jit_compile=True" in fix and 'set_global_policy("mixed_bfloat16")' in fix, fix
    for name in EMBEDDING_FIXED:
        assert "placement.no-gpu-kernel" not in matrix[name]["findings"], matrix[name]


def test_a_layer_pinned_to_the_cpu_still_makes_its_copies(matrix):
    """The colocation of variable reads does not hide real copies: a layer whose op is
    pinned to the CPU in a mixed-precision fit is found, with the float16 copies."""
    line = matrix[fit_name("mixed_float16", "adam", 1, "pinned", False)]
    assert "placement.forced-cpu" in line["findings"], line
    assert any(dtype == "float16" for _, dtype, _ in line["float_step_copies"]), line


def test_each_model_is_placed_as_its_own_compile_chose(matrix):
    """Two models compiled with "auto": Keras settles it per model. The Dense model's
    fit and predict are XLA clusters on a GPU; the cuDNN LSTM model's step is not."""
    line = matrix["fit:two-models"]
    placed = {(name, where.rsplit(":", 1)[-1]): jit for name, where, jit in line["placed"]}
    dense, rnn, predict = (
        str(line_at(MATRIX, m)) for m in ("dense-fit", "rnn-fit", "dense-predict")
    )
    assert placed.get(("multi_step_on_iterator", dense)) is True, line["placed"]
    assert placed.get(("multi_step_on_iterator", rnn)) is False, line["placed"]
    predicted = [jit for (name, at), jit in placed.items() if at == predict]
    assert predicted == [True], line["placed"]
    assert any("runs lstm with cuDNN's kernels" in n for n in line["notes"]), line["notes"]


def test_a_second_fit_s_first_steps_are_its_warm_up(matrix):
    """The second model's fit traces its own step: that step is a warm-up, not a step
    of the loop's statistics (one loop of Keras batches spans both fits)."""
    line = matrix["fit:two-models"]
    assert line["steps"] == 40 and line["step_source"] == "keras-fit", line
    assert line["later_warmup"] and line["later_warmup"][0] >= 20, line
    assert line["warmup"] >= 2, line


def test_fine_tuning_s_heavier_steps_are_its_own_pace_not_stalls(matrix):
    """A new compile opens a fit of its own pace: its first (tracing) step is its
    warm-up, its heavier steps are no stalls and no input wait; fit called again in a
    loop on the same compile goes on at that pace (no warm-up of its own)."""
    line = matrix["fit:fine-tune"]
    assert (line["steps"], line["step_source"]) == (60, "keras-fit"), line
    assert "steps.periodic-stall" not in line["findings"], line
    # no input wait of its own: on a loaded host the pipeline's threads wait for a core,
    # and input.bound says so (8 runs in 14 at load 4-5 on 2 cores, "while other
    # processes kept 66% of the host's 2 cores busy"), and a process that takes a core at
    # moments makes this fast pipeline's threads wait too (15% of the cores, 6-17% waits:
    # named the load's, the pipeline keeping up many times over); a wait in the epochs'
    # first steps (each epoch's new iterator: 10 steps an epoch) is named so, low; any
    # other is a misread
    explained = zip(line["input_bound_by_load"], line["input_bound_at_epoch_starts"])
    assert all(load or starts for load, starts in explained), (
        line["input_findings"],
        line["step_ms"],
    )
    at_starts = [f for f in line["input_findings"] if "epoch_start_wait_ms" in f[3]]
    assert all(severity == "low" for _, severity, _, _ in at_starts), at_starts
    assert line["later_warmup"] and all(i >= 30 for i in line["later_warmup"]), line
    assert all(i < 40 for i in line["later_warmup"]), line  # none in the looped fits
