"""The step profile from hand-made trace events, and where the profiler is never started."""

import json
import time

import pytest

from gpuwhy.collect.inprocess.collective_time import collective_time
from gpuwhy.collect.inprocess.profiler import MULTI_WORKER
from gpuwhy.collect.inprocess.step_profile import StepSampler, profile
from gpuwhy.tfapi.profiler_trace import FUNCTION_CALL, Event

US = 1_000_000  # picoseconds


def call(start_us, duration_us, name="train_step"):
    return Event(f"{FUNCTION_CALL}__inference_{name}_42", (1, 1), start_us * US, duration_us * US)


def op(kernel, node, start_us, duration_us, host=True):
    return Event(kernel, (1, 2), start_us * US, duration_us * US, op=node, host=host)


def test_each_op_counts_in_the_call_it_starts_in_per_step():
    events = [
        call(0, 100),
        op("StringToNumber", "parse", 10, 30),
        op("_MklMatMul", "dense/MatMul", 50, 20),
        op("Relu", "gpu_kernel", 60, 5, host=False),  # a GPU's event: not a host op
        call(200, 100),
        op("StringToNumber", "parse", 210, 50),
        op("StringToNumber", "other_call", 150, 40),  # between the calls: none's
        Event("CollectiveReduceV2", (1, 3), 80 * US, 10 * US),
    ]
    found = profile(sorted(events, key=lambda e: e.start_ps), "train_step")
    assert found is not None and (found.steps, found.function) == (2, "train_step")
    assert found.step_s == pytest.approx(100e-6)
    assert [(n.node, n.kernel) for n in found.nodes] == [
        ("parse", "StringToNumber"),
        ("dense/MatMul", "_MklMatMul"),
    ]
    assert found.nodes[0].seconds == pytest.approx(40e-6)  # (30 + 50) / 2 steps
    assert dict(found.kernels) == pytest.approx({"StringToNumber": 40e-6, "_MklMatMul": 10e-6})
    measured = collective_time(found)  # one call of two ran a collective
    assert measured is not None and measured.steps == 1
    assert (measured.per_step_s, measured.share) == pytest.approx((10e-6, 0.1))


def test_a_calls_own_cost_is_the_python_call_less_the_span_of_its_ops():
    """Function.__call__'s annotation (named as the function) holds the runtime's call;
    the time outside the span of the call's ops, first start to last end, is its own
    cost, whatever the ops do in between."""
    events = [
        Event("train_step", (1, 1), 0, 150 * US),  # Python's call
        call(20, 120),
        op("MatMul", "dense/MatMul", 40, 30),
        op("Relu", "dense/Relu", 90, 10),  # ops span 40..100: 60 us
        call(300, 100),  # no annotation around it: the runtime's call alone
        op("MatMul", "dense/MatMul", 310, 70),  # span 70: 30 us outside
        call(500, 50),  # no host op in it: not counted
        call(700, 100),
        op("MatMul", "dense/MatMul", 760, 40),  # span 40: 60 us outside
    ]
    found = profile(sorted(events, key=lambda e: e.start_ps), "train_step")
    assert found is not None
    # the median call's, and the range the calls spanned (fewer than four)
    assert found.call_overhead_s == pytest.approx(60e-6)
    assert found.call_overhead_range_s == pytest.approx((30e-6, 90e-6))
    # of more calls, their middle half: one that paused sets neither
    paused = [Event("train_step", (1, 1), 900 * US, 5000 * US), call(900, 5000)]
    paused += [op("MatMul", "dense/MatMul", 5000, 10)]
    more = sorted(events + paused + [call(7000, 100), op("MatMul", "m", 7050, 40)],
                  key=lambda e: e.start_ps)  # fmt: skip
    found = profile(more, "train_step")
    assert found is not None and found.call_overhead_s == pytest.approx(60e-6)
    # calls of 30, 60, 60, 90 and 4,990 us: the paused one is no call's own cost (over
    # 3x the median), the band is the quartiles of the others
    assert found.call_overhead_range_s == pytest.approx((52.5e-6, 67.5e-6))


def test_a_call_that_traced_again_sets_no_band_even_among_four():
    """A partial last batch retraces once among the profiled calls (a DCGAN tutorial's
    batch of 96 after batches of 256): 400 ms of tracing among calls whose own cost is
    about 1 ms. Of four calls the quartiles reached for it (a band up to 160 ms)."""
    events = []
    for i, own_ms in enumerate((1.0, 1.1, 400.0, 1.05)):
        start = i * 1_000_000  # us
        whole = own_ms * 1000 + 100
        events += [
            Event("train_step", (1, 1), start * US, int(whole * US)),
            call(start, whole),
            op("MatMul", "dense/MatMul", start + own_ms * 1000, 100),
        ]
    found = profile(sorted(events, key=lambda e: e.start_ps), "train_step")
    assert found is not None and found.call_overhead_s == pytest.approx(1.05e-3)
    low, high = found.call_overhead_range_s
    assert low == pytest.approx(1.0e-3) and high == pytest.approx(1.1e-3)


def test_a_real_calls_own_cost_is_measured_under_tfs_profiler():
    tf = pytest.importorskip("tensorflow")
    from gpuwhy.collect.inprocess.step_profile import _kept
    from gpuwhy.tfapi import profiler_trace

    w = tf.Variable(tf.random.normal((256, 256)))

    @tf.function
    def big_step(x):
        for _ in range(8):
            x = tf.tanh(tf.matmul(x, w))
        return x

    x = tf.random.normal((256, 256))
    big_step(x)
    session = profiler_trace.start(device=False)
    for _ in range(4):
        big_step(x)
    found = profile(profiler_trace.stop(session, _kept), "big_step")
    assert found is not None and found.steps == 4 and found.call_overhead_s is not None
    # the call's own cost is a part of it, the matmuls the rest
    assert 0 < found.call_overhead_s < found.step_s


def test_no_call_of_the_function_is_no_profile():
    assert profile([call(0, 100, name="eval_step")], "train_step") is None


@pytest.mark.parametrize(("workers", "profiled"), [(["a:1", "b:2"], False), (["a:1"], True)])
def test_the_profiler_is_never_started_in_a_multi_worker_process(monkeypatch, workers, profiled):
    config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": 0}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(config))
    sampler = StepSampler(lambda: 0, warm=lambda *_: None, calls_of=lambda _: 0)
    sampler.on_tensorflow()
    try:
        assert (sampler.reason == MULTI_WORKER) is not profiled
        assert (sampler._thread is not None and sampler._thread.is_alive()) is profiled
    finally:
        sampler.stop()


def test_a_multi_worker_strategy_forbids_it_before_any_trigger():
    sampler = StepSampler(lambda: 0)
    sampler.forbid(MULTI_WORKER)
    sampler.start_after("train_step")
    assert sampler._thread is None and sampler.reason == MULTI_WORKER


def test_the_sample_gives_way_when_the_program_starts_tfs_profiler():
    """The sampler's session runs (its function warm, its steps slow to come); the
    program, from a module the sampler cannot see in the script's text, starts TF's
    profiler: the sample ends first, and the program's session starts and stops."""
    import tempfile

    import tensorflow as tf

    calls = [5]  # warm at once; no further call: the sample would wait its full time
    sampler = StepSampler(
        lambda: calls[0], warm=lambda *_: ("train_step", calls[0]), calls_of=lambda _: calls[0]
    )
    sampler.on_tensorflow()
    try:
        for _ in range(200):  # until the sampler's session is on
            if sampler._session is not None:
                break
            time.sleep(0.01)
        assert sampler._session is not None
        with tempfile.TemporaryDirectory() as logdir:
            tf.profiler.experimental.start(logdir)  # would raise AlreadyExistsError
            tf.profiler.experimental.stop()
        sampler._thread.join(timeout=10)
        assert sampler.result is None
        assert sampler.reason == "the program started TF's profiler itself: the sample gave way"
        assert tf.profiler.experimental.start.__name__ == "start"  # the hook is undone
        assert not hasattr(tf.profiler.experimental.start, "__wrapped__")
    finally:
        sampler.stop()
