"""A watched run longer than the steps kept one by one, end to end on real TensorFlow:
every step is counted, the record describes the whole run, and it round-trips."""

import json

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from gpuwhy.collect.inprocess.step_record import HEAD_STEPS, LAST_STEPS  # noqa: E402
from gpuwhy.modes.run.session import Session  # noqa: E402
from gpuwhy.record import Record  # noqa: E402

pytestmark = pytest.mark.slow  # at scale: out of make test-fast

STEPS = HEAD_STEPS + 1500


def test_a_loop_past_the_head_is_counted_whole_and_its_record_covers_it(tmp_path):
    ds = tf.data.Dataset.from_tensor_slices(np.arange(STEPS, dtype="float32")).batch(1)
    w = tf.Variable(0.0)

    @tf.function
    def step(x):
        w.assign_add(tf.reduce_sum(x) * 0.0 + 1.0)

    # every step timed: the record's one-by-one state beyond the head is what this reads
    # (with the hooks' pauses, test_hook_pauses.py: the latest steps are the timed ones)
    with Session(hz=5, audit=False, pause_timing=False) as session:
        for x in ds:  # one step per element
            step(x)
    record = session.record
    steps = record.facts.steps
    assert steps.count == STEPS and not steps.all_kept
    assert len(steps.starts) == HEAD_STEPS and len(steps.last_steps) == LAST_STEPS
    assert steps.input_wait_fraction is not None and 0 < steps.input_wait_fraction < 1
    assert sum(w.steps for w in steps.timeline.windows) == STEPS
    timeline = record.facts.timeline
    assert sum(w.steps for w in timeline.windows) == STEPS
    last = steps.last_steps[-1]
    stepped = [w for w in timeline.windows if w.steps]
    assert stepped[-1].start_s <= last[0] < stepped[-1].start_s + timeline.width_s
    assert all(w.start_s <= timeline.run_s for w in timeline.windows)
    assert float(w.numpy()) == STEPS  # the program ran every step, as it would alone
    path = tmp_path / "run.json"
    path.write_text(record.to_json())
    again = Record.load(str(path))
    assert again.facts.steps == steps and again.facts.timeline == timeline
    assert len(json.dumps(json.loads(path.read_text()))) < 1_000_000
