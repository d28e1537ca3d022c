"""A custom loop that prints nothing is still compared: a few elements of its trainable
variables after its first steps, read in a real trial child (gpuwhy run --trial-results)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gpuwhy.trial.same_results import VARIABLES, compare, read_values

tf = pytest.importorskip("tensorflow")

PROGRAM = Path(__file__).parent / "programs" / "silent_loop.py"


def test_samples_read_a_few_elements_of_each_variable_and_sum_one_name_and_shape():
    from gpuwhy.tfapi import variable_samples

    big = tf.Variable(tf.reshape(tf.range(1000, dtype=tf.float32), [10, 100]), name="big")
    twin_a = tf.Variable([1.0, 2.0], name="twin")
    twin_b = tf.Variable([10.0, 20.0], name="twin")
    frozen = tf.Variable([5.0], name="frozen", trainable=False)
    got = variable_samples.VariableReader().samples()
    mine = {k: v for k, v in got.items() if k.startswith(("big:0", "twin:0", "frozen:0"))}
    places = [k * 1000 // variable_samples.PER_VARIABLE for k in range(8)]
    assert {k: v for k, v in mine.items() if k.startswith("big")} == {
        f"big:0[10, 100]#{p}": float(p) for p in places
    }
    assert mine["twin:0[2]#0"] == 11.0 and mine["twin:0[2]#1"] == 22.0
    assert not any(k.startswith("frozen") for k in mine)
    del big, twin_a, twin_b, frozen


def _run(tmp_path: Path, name: str, source: str) -> tuple[str, str]:
    script = tmp_path / f"{name}.py"
    script.write_text(source)
    results = tmp_path / f"{name}.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "run", "--trial-results", str(results)]
        + ["--trial-seed", "7", "--no-audit", str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return str(results), done.stdout


def test_a_silent_loop_is_compared_by_its_variables_and_a_broken_step_differs(tmp_path):
    source = PROGRAM.read_text()
    traced = source.replace("def step(", "@tf.function\ndef step(")
    broken = source.replace("zip(grads,", "zip([g * 0.0 for g in grads],")
    assert traced != source and broken != source
    originals = [read_values(*_run(tmp_path, f"original{i}", source)) for i in (1, 2)]
    assert originals[0].source == VARIABLES
    # after 1, 5 and 20 steps: 4 variables, up to 8 elements each
    assert len(originals[0].items) >= 3 * 4 * 2
    same = compare(originals, read_values(*_run(tmp_path, "traced", traced)))
    assert same.same is True and VARIABLES in same.how
    changed = compare(originals, read_values(*_run(tmp_path, "broken", broken)))
    assert changed.same is False and changed.first_difference.startswith("variables")
    values = originals[0].as_dict()
    assert np.isfinite(list(values.values())).all()
