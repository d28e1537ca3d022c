"""`gpuwhy run` of real TensorFlow programs whose memory grows because they keep each
step's output tensor (in a global list, in a function's local list), and of the same
program keeping a Python float instead: host.memory-growth names the list, its line and
its elements, and its fix uses the program's own names; the control has no finding and
no heap census at all (its memory never grows past its mark)."""

import json
import re
import textwrap

import pytest

from tests.test_run_tensorflow import run

# 320 steps of ~45 ms (most of it asleep: little CPU), each output a 512 KiB tensor: on a
# loaded machine the baseline census may come as late as step 150 (4 MiB, 8 steps, past
# the mark), and the list must still be seen to grow by more than 50 after it
HEAD = """
import time
import tensorflow as tf

w = tf.Variable(tf.random.normal([512, 512]))
ds = tf.data.Dataset.from_tensors(tf.random.normal([256, 512])).repeat(320)


@tf.function
def step(x):
    out = tf.tanh(x @ w)
    w.assign_sub(1e-4 * tf.reduce_mean(out) * tf.ones_like(w))
    return out
"""

GLOBAL = (
    HEAD
    + """

history = []
for x in ds:
    out = step(x)
    history.append(out)
    time.sleep(0.04)
print(len(history))
"""
)

LOCAL = (
    HEAD
    + """

def train(dataset):
    kept = []
    for x in dataset:
        out = step(x)
        kept.append(out)
        time.sleep(0.04)
    return len(kept)


print(train(ds))
"""
)

HEALTHY = (
    HEAD
    + """

history = []
for x in ds:
    out = step(x)
    history.append(float(tf.reduce_mean(out)))
    time.sleep(0.04)
print(len(history))
"""
)


def _record(tmp_path_factory, name: str, program: str) -> dict:
    folder = tmp_path_factory.mktemp(name)
    script = folder / "train.py"
    script.write_text(textwrap.dedent(program))
    out = folder / "run.json"
    result = run("--json", out, script, cwd=folder)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(out.read_text())


def _growth(record: dict) -> list[dict]:
    return [f for f in record["findings"] if f["id"] == "host.memory-growth"]


def _line(program: str, text: str) -> int:
    lines = textwrap.dedent(program).splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


@pytest.fixture(scope="module")
def kept_globally(tmp_path_factory):
    return _record(tmp_path_factory, "global", GLOBAL)


@pytest.fixture(scope="module")
def kept_locally(tmp_path_factory):
    return _record(tmp_path_factory, "local", LOCAL)


@pytest.fixture(scope="module")
def healthy(tmp_path_factory):
    return _record(tmp_path_factory, "healthy", HEALTHY)


def test_a_global_list_of_step_outputs_is_named_with_its_line_and_fixed_by_name(kept_globally):
    (finding,) = _growth(kept_globally)
    line = _line(GLOBAL, "history.append(out)")
    assert (
        f"the list `history` (global of train.py, added to at train.py:{line})"
        in (finding["title"])
    )
    # +1 per step, counted on the timeline's 1 s windows: within a few per cent
    assert re.search(
        r"EagerTensor objects \(float32 \(256, 512\) each\), \+(0\.9\d?|1|1\.1) per step",
        finding["title"],
    )
    evidence = finding["evidence"]
    assert evidence["growing"] == "list history (global of train.py)"
    assert evidence["growing_where"] == f"train.py:{line}"
    assert evidence["growing_written"] == "history.append(out)"
    assert evidence["growing_element_bytes"] >= 256 * 512 * 4
    assert 0.9 <= evidence["growing_per_step"] <= 1.1
    assert evidence["growing_length_last"] > evidence["growing_length_first"] + 50
    # a larger tensor per step: a running mean of it, in the program's names
    assert "history_mean.update_state(out)" in finding["fix"]
    assert "instead of history.append(out)" in finding["fix"]
    timeline = kept_globally["timeline"]
    assert 2 <= timeline["heap_censuses"] <= 8 and timeline["heap_census_s"] < 5
    (grown,) = [g for g in timeline["growing"] if g["name"] == "history"]
    assert (grown["element_type"], grown["element_detail"]) == ("EagerTensor", "float32 (256, 512)")


def test_a_local_list_is_named_as_the_local_of_its_function(kept_locally):
    (finding,) = _growth(kept_locally)
    line = _line(LOCAL, "kept.append(out)")
    assert f"the list `kept` (local of train(), added to at train.py:{line})" in finding["title"]
    assert "kept_mean.update_state(out)" in finding["fix"]


def test_memory_that_does_not_grow_gets_no_finding_and_no_heap_census(healthy):
    assert _growth(healthy) == []
    timeline = healthy["timeline"]
    assert timeline["heap_censuses"] == 0
    assert timeline["growing"] == [] and timeline["growing_types"] == []
