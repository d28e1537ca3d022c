"""Live metrics over a run longer than the steps each loop keeps one by one: a real
Prometheus scrapes a real training loop watched by a Session, whose loops keep
``HEAD_STEPS`` steps (made small here, in the module every reader reads it from) and
only count the later ones. The step histogram must take in every step after warm-up,
mid-run and at the end, and a finding that stops holding must leave."""

from __future__ import annotations

import time

import numpy as np
import tensorflow as tf

from gpuwhy.collect.inprocess import step_record
from gpuwhy.export.live import LiveMetrics, MetricsOptions
from gpuwhy.modes.run.session import Session
from tests.export.conftest import free_port

HEAD = 40
STEPS = 300


def test_every_step_beyond_the_head_is_published_once(monkeypatch, prometheus):
    monkeypatch.setattr(step_record, "HEAD_STEPS", HEAD)
    port = free_port()
    server = prometheus(port)
    session = Session(hz=5, audit=False, eager=False, command=["train.py"])
    # updates are made by the test (interval far away), so it knows what each holds
    options = MetricsOptions(port=port, interval_s=600)
    live = LiveMetrics(options, "run", "train.py", time.perf_counter(), session.live)
    ds = tf.data.Dataset.from_tensor_slices(np.ones((STEPS, 4), dtype="float32")).batch(1)
    w = tf.Variable(1.0)

    @tf.function
    def step(x):
        w.assign_add(tf.reduce_sum(x) * 1e-6)

    mid: list[tuple[int, int]] = []
    with session:
        live.start()
        for i, x in enumerate(ds):
            step(x)
            if i == STEPS // 2:
                facts, loops = session.live()
                live.update(facts, loops, [("input.bound", "high")])
                assert facts.steps is not None and facts.steps.count > 3 * HEAD
                mid.append((facts.steps.count - facts.steps.warmup, _count(server, ">", 0)))
                server.wait_for('gpuwhy_finding{id="input.bound"}')
    try:
        ((counted, scraped),) = mid
        assert scraped == counted  # beyond the head: not stopped at HEAD_STEPS
        record = session.record
        assert record is not None and record.facts.steps is not None
        steps = record.facts.steps
        assert steps.count >= STEPS - 1
        facts, loops = session.live()  # stopped: the final facts' steps
        live.update(facts, loops, [], final=True)
        total = steps.count - steps.warmup
        assert _count(server, "==", total) == total
        assert server.query("gpuwhy_step_seconds_sum")[0]["value"][1]
        # the finding no longer holds: its series goes (stale in Prometheus)
        _gone(server, 'gpuwhy_finding{id="input.bound"}')
    finally:
        live.finish(None)


def _count(server, op: str, value: int) -> int:
    (found,) = server.wait_for(f"gpuwhy_step_seconds_count {op} {value}", timeout_s=30)
    return int(float(found["value"][1]))


def _gone(server, expression: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while server.query(expression):
        assert time.monotonic() < deadline, f"{expression} never left"
        time.sleep(0.5)
