"""The step cost model from small placement facts: each term by hand, then together."""

from dataclasses import replace

import pytest

from gpuwhy.facts import AuditedFunction, Facts, KernelWork, PipelineFacts, StepFacts
from gpuwhy.gpu_specs import find_gpu
from gpuwhy.projection.cost import project_step, training_function
from gpuwhy.projection.step import projection_facts
from tests import builders as b
from tests import builders_tfdata as t

TRAIN = "train_step (train.py:12)"
A100 = find_gpu("A100")


def train_function(**changes):
    base = dict(
        name="train_step",
        nodes=10,
        gpu=10,
        host=0,
        cpu=0,
        location="train.py:12",
        input_copies=1,
        kernels=(KernelWork("Relu", count=1, bytes=100_000_000, sized=1),),
    )
    return AuditedFunction(**{**base, **changes})


def placement(**changes):
    ops = [b.tensor_op(flops=2_000_000_000, function=TRAIN, gradient=True)]
    base = dict(tensor_ops=ops, functions=(train_function(),), tf32_enabled=True)
    return b.placement(**{**base, **changes})


def test_each_term_at_the_middle_efficiency():
    projection = project_step(placement(), A100, input_bytes=4_000_000)
    # 2 GFLOP of float32 at TF32's 156 TFLOPS, of which training steps reach 30%
    assert projection.tensor.mid == pytest.approx(2e9 / (156e12 * 0.30))
    # a Relu writes 100 MB and reads as much (its input): 200 MB at 2,039 GB/s, 70%
    # reached: above its launch
    assert projection.kernels.mid == pytest.approx(2e8 / (2039e9 * 0.70))
    # one copy's latency, and the 4 MB batch over PCIe 4 at 75%
    assert projection.copies.mid == pytest.approx(10e-6 + 4e6 / (32e9 * 0.75))
    step = projection.step
    assert step.low < step.mid < step.high
    assert projection.function == TRAIN and projection.tensor_ops_unsized == 0


def test_precision_tf32_and_small_kernels_change_the_time():
    tf32_off = project_step(placement(tf32_enabled=False), A100)
    assert tf32_off.tensor.mid == pytest.approx(2e9 / (19.5e12 * 0.63))  # FP32 units
    conv = [b.tensor_op(op="Conv2D", flops=2_000_000_000, function=TRAIN, gradient=True)]
    winograd = project_step(placement(tensor_ops=conv, tf32_enabled=False), A100)
    assert winograd.tensor.mid == pytest.approx(2e9 / (19.5e12 * 1.25))  # past the peak
    half = [b.tensor_op(dtype="float16", flops=2_000_000_000, function=TRAIN, gradient=True)]
    assert project_step(placement(tensor_ops=half), A100).tensor.mid == pytest.approx(
        2e9 / (312e12 * 0.49)
    )
    # an op's size is its time at the share: 0.3 GFLOP takes 6.4 µs at an A100's TF32
    # (under 6.5 µs: 0.6 of the share), 0.005 GFLOP 0.11 µs (under 0.65 µs: 0.25)
    small = [b.tensor_op(flops=300_000_000, function=TRAIN, gradient=True)]
    assert project_step(placement(tensor_ops=small), A100).tensor.mid == pytest.approx(
        3e8 / (156e12 * 0.30 * 0.6)
    )
    # without XLA TF's executor launches each op: none shorter than a launch (4 µs);
    # under XLA its start and drain (2.5 µs on an A100) add to its work
    tiny_op = [b.tensor_op(flops=5_000_000, function=TRAIN, gradient=True)]
    assert project_step(placement(tensor_ops=tiny_op), A100).tensor.mid == pytest.approx(4e-6)
    xla = (train_function(jit_compile=True),)
    assert project_step(
        placement(tensor_ops=tiny_op, functions=xla), A100
    ).tensor.mid == pytest.approx(5e6 / (156e12 * 0.30 * 0.25) + 2.5e-6)
    # a GPU three times as fast runs the same FLOPs as a smaller kernel: 0.2 GFLOP in
    # float16 is 1.3 µs at an A100's share (0.6) and 0.6 µs at an H100's (0.25)
    half_op = [b.tensor_op(dtype="float16", flops=200_000_000, function=TRAIN, gradient=True)]
    h100 = find_gpu("H100")
    assert project_step(
        placement(tensor_ops=half_op, functions=xla), A100
    ).tensor.mid == pytest.approx(2e8 / (312e12 * 0.49 * 0.6) + 2.5e-6)
    assert project_step(
        placement(tensor_ops=half_op, functions=xla), h100
    ).tensor.mid == pytest.approx(2e8 / (989.5e12 * 0.345 * 0.25) + 1.6e-6)
    tiny = train_function(kernels=(KernelWork("AddV2", count=50, bytes=50 * 400, sized=50),))
    launches = project_step(placement(functions=(tiny,)), A100)
    assert launches.kernels.mid == pytest.approx(50 * 4e-6)  # launch-bound
    xla = project_step(
        placement(functions=(train_function(kernels=tiny.kernels, jit_compile=True),)), A100
    )
    # fused: four ops a kernel, each kernel's start and drain (2.5 µs on an A100) added
    # to its work (the bytes moved, far less here)
    moved = 0.92 * 50 * 400 / (2039e9 * 0.7)
    assert xla.kernels.mid == pytest.approx(12 * 2.5e-6 + moved)
    assert project_step(
        placement(functions=(train_function(kernels=tiny.kernels, jit_compile=True),)), h100
    ).kernels.mid == pytest.approx(12 * 1.6e-6 + 0.92 * 50 * 400 / (3350e9 * 0.7))


def test_the_training_step_is_projected_not_a_predict():
    predict = AuditedFunction(name="predict_step", nodes=5, gpu=5, host=0, cpu=0)
    facts = placement(functions=(predict, train_function()))
    assert training_function(facts).name == "train_step"


def test_the_input_side_trusts_the_measured_delivery_over_the_stage_timers():
    # the steps waited 60% of a 10 ms step: a batch came every 10 ms
    steps = StepFacts(
        source="tf-data",
        marker="m",
        count=101,
        warmup=1,
        total_s=1.0,
        median_s=0.01,
        input_wait_fraction=0.6,
        input_wait_median_s=0.006,
    )
    fast = b.placement_facts(tensor_ops=placement().tensor_ops, functions=(train_function(),))
    slow_alone = PipelineFacts(id=1, stages=(_stage(rate=50.0),))  # 20 ms alone: impossible
    found = projection_facts(fast, "A100", slow_alone, steps)
    assert found.input_batch_measured_s == pytest.approx(0.010)
    assert any("the measured one is used" in note for note in found.notes)
    # a step of ~0.2 ms against a batch every 10 ms: nearly all of it waits
    assert 0.9 < found.input_wait_low <= found.input_wait_fraction <= found.input_wait_high < 1
    quick = PipelineFacts(id=1, stages=(_stage(rate=5000.0),))  # 0.2 ms alone
    both = projection_facts(fast, "A100", quick, steps)
    assert both.input_batch_s == pytest.approx(0.0002)
    assert both.input_wait_low < both.input_wait_fraction < both.input_wait_high


def test_auto_needs_a_gpu_here():
    from gpuwhy.gpu_specs import UnknownGpuError

    with pytest.raises(UnknownGpuError):
        projection_facts(Facts(placement=placement()), "auto")
    here = Facts(placement=placement(), devices=(b.gpu(0),))
    assert projection_facts(here, "auto").gpu == "H100"


def _stage(rate: float):
    from gpuwhy.facts import PipelineStage

    return PipelineStage(name="ParallelMapV2", kind="map", root_elements_per_s=rate)


def test_on_the_target_gpu_itself_the_measured_step_is_put_beside_the_projection():
    from dataclasses import replace

    from gpuwhy.facts import ProgramFacts
    from gpuwhy.report.run.summary import projection_lines

    steps = StepFacts(
        source="keras-fit",
        marker="m",
        count=101,
        warmup=1,
        median_s=0.012,
        input_wait_median_s=0.002,
    )
    trained_here = Facts(
        placement=placement(),
        devices=(b.gpu(0),),  # an H100 80GB HBM3
        program=ProgramFacts(command=("train.py",), gpus_seen_by_tf=("/physical_device:GPU:0",)),
    )
    found = projection_facts(trained_here, "auto", None, steps)
    assert found.gpu == "H100" and found.measured_step_s == pytest.approx(0.010)
    (line,) = [text for text in projection_lines(found) if text.startswith("measured here")]
    assert line.startswith("measured here, on the H100 itself: 10.0 ms per step less its input")
    # another GPU than the one that ran, or TF on the CPU: nothing measured to compare
    assert projection_facts(trained_here, "A100", None, steps).measured_step_s is None
    on_cpu = replace(trained_here, program=ProgramFacts(command=("train.py",)))
    assert projection_facts(on_cpu, "auto", None, steps).measured_step_s is None
    # a capture of its steps on that GPU: the kernels a step ran, beside those costed
    from gpuwhy.facts import CaptureDevice, CaptureFacts, CaptureStep

    captured = tuple(
        CaptureStep(start_s=i * 0.012, duration_s=0.012, busy_s=0.01, kernels=k,
                    median_kernel_s=4e-6)
        for i, k in enumerate((310, 300, 305))
    )  # fmt: skip
    gpu = CaptureDevice("/device:GPU:0", "H100", 1, 915, 0.03, 0.03, 0.02, 0.02, 0.02)
    capture = CaptureFacts(
        path="vm.xplane.pb", producer="tensorflow", span_s=0.04, devices=(gpu,), steps=captured
    )
    with_capture = replace(trained_here, capture=capture)
    notes = projection_facts(with_capture, "auto", None, steps).notes
    assert any(
        note.startswith(
            "the capture measured 305 kernels a step on this GPU, the median 4.0 µs long"
        )
        and "the capture is the measurement" in note
        for note in notes
    )
    assert not any(
        "capture measured" in n for n in projection_facts(trained_here, "auto", None, steps).notes
    )


def test_under_xla_the_traffic_follows_what_the_whole_step_writes():
    ops = [b.tensor_op(flops=2_000_000_000, function=TRAIN, gradient=True, output_bytes=10**9)]
    compiled = train_function(jit_compile=True)
    xla = project_step(placement(tensor_ops=ops, functions=(compiled,)), A100)
    # 0.92 x all the step writes (1 GB of convolution outputs, 100 MB of Relu), at 70%
    # of 2,039 GB/s, and its one fused kernel's start and drain (2.5 µs on an A100)
    assert xla.kernels.mid == pytest.approx(0.92 * 1.1e9 / (2039e9 * 0.70) + 2.5e-6)
    found = projection_facts(
        Facts(placement=placement(tensor_ops=ops, functions=(compiled,))), "A100"
    )
    assert found.calibrated is True and found.jit_compile is True
    plain = projection_facts(Facts(placement=placement()), "A100")
    assert plain.calibrated is False
    assert any("not XLA-compiled" in note for note in plain.notes)


def _eager(per_step: float = 160.0, gap_us: float = 50.0):
    from gpuwhy.facts import EagerFacts

    return EagerFacts(sampled_steps=40, ops=int(40 * per_step), per_step=per_step,
                      median_gap_us=gap_us)  # fmt: skip


LOOP = StepFacts(source="tf-data", marker="next() at train.py:7", count=200, median_s=0.01)


def test_python_issuing_eager_ops_bounds_the_step_on_any_gpu():
    from gpuwhy.projection.step import NothingToProject

    # an eager GradientTape loop: no traced function, 160 ops at 50 µs each per step
    found = projection_facts(Facts(), "A100", None, LOOP, _eager())
    assert found.graph is False and found.function == "the eager step (next() at train.py:7)"
    assert found.eager_s == pytest.approx(0.008) == pytest.approx(found.step_s)
    assert found.eager_ops_per_step == 160
    assert found.step_low_s == pytest.approx(0.7 * 0.008)
    assert found.step_high_s == pytest.approx(0.008 + 160 * 6e-6)  # a launch each on top
    assert found.tensor_s == found.kernels_s == 0 and found.calibrated is False
    assert any("no tf.function in it" in note for note in found.notes)
    # no traced function and no sampled step: nothing to cost, said so
    with pytest.raises(NothingToProject):
        projection_facts(Facts(), "A100", None, LOOP, _eager(per_step=0.0))


def test_a_graph_step_with_a_few_eager_ops_around_it_overlaps_them():
    ops = [b.tensor_op(flops=2e11, function=TRAIN, gradient=True)]  # ~6.4 ms on an A100
    facts = Facts(placement=placement(tensor_ops=ops))
    alone = projection_facts(facts, "A100", None, LOOP)
    few = projection_facts(facts, "A100", None, LOOP, _eager(per_step=10.0))  # 0.5 ms
    # the GPU's work hides Python's issuing at best; they add up at worst
    assert few.step_s == pytest.approx(alone.step_s)
    assert few.step_low_s == pytest.approx(alone.step_low_s)
    assert few.step_high_s == pytest.approx(alone.step_high_s + 10 * (50e-6 + 6e-6))
    assert few.graph is True and few.eager_s == pytest.approx(0.0005)
    many = projection_facts(facts, "A100", None, LOOP, _eager(per_step=400.0))  # 20 ms
    assert many.step_s == pytest.approx(0.02)


def test_the_report_and_verdict_say_an_eager_step_is_a_lower_bound():
    from gpuwhy.report.run.summary import projection_lines
    from gpuwhy.verdict import projection_clause

    found = projection_facts(Facts(), "A100", None, LOOP, _eager())
    first = projection_lines(found)[0]
    assert first.startswith("step of the eager step (next() at train.py:7): at least 8.0 ms")
    assert "Python issuing 160 eager ops 8.0 ms (measured here)" in first
    assert projection_clause(found) == (
        "on an A100 (projected): step at least 8.0 ms (5.6 ms–9.0 ms), most of it Python "
        "issuing eager ops"
    )


def test_ops_that_stay_on_the_cpu_on_the_target_are_said_to_lengthen_the_step():
    groups = (
        b.op_group("StringSplitV2", reason="no-gpu-kernel", count=2,
                   locations=("train.py:20",), functions=(TRAIN,)),
        b.op_group("IteratorGetNext", reason="colocated", functions=(TRAIN,)),  # the input
        b.op_group("Unique", reason="no-gpu-kernel", functions=("predict_step (train.py:40)",)),
    )  # fmt: skip
    found = projection_facts(Facts(placement=placement(groups=groups)), "A100")
    (note,) = [n for n in found.notes if "stay on the CPU" in n]
    assert note.startswith("2 op(s) of the step stay on the CPU on that GPU too "
                           "(StringSplitV2 at train.py:20): their CPU time is not")  # fmt: skip
    plain = projection_facts(Facts(placement=placement()), "A100")
    assert not [n for n in plain.notes if "stay on the CPU" in n]


def test_a_mixed_precision_step_under_xla_moves_half_width_activations():
    """Keras computes normalisations in float32 between casts; XLA fuses the casts
    away, so their float32 outputs move at float16 width and the casts move nothing."""
    half = [b.tensor_op(dtype="float16", flops=2_000_000_000, function=TRAIN, gradient=True)]
    kernels = (
        KernelWork("Mul", count=4, bytes=400_000_000, sized=4, float32_bytes=300_000_000),
        KernelWork("Cast", count=4, bytes=200_000_000, sized=4, float32_bytes=100_000_000),
    )
    compiled = train_function(jit_compile=True, kernels=kernels)
    mixed = project_step(placement(tensor_ops=half, functions=(compiled,)), A100)
    # 100 MB of float16 + 300 MB of float32 at half width; the casts left out; 8 ops
    # fused into 2 kernels
    assert mixed.kernels.mid == pytest.approx(0.92 * 2.5e8 / (2039e9 * 0.70) + 2 * 2.5e-6)
    full = [b.tensor_op(flops=2_000_000_000, function=TRAIN, gradient=True)]
    float32 = project_step(placement(tensor_ops=full, functions=(compiled,)), A100)
    assert float32.kernels.mid == pytest.approx(0.92 * 4e8 / (2039e9 * 0.70) + 2 * 2.5e-6)


def test_depthwise_convolutions_cost_more_than_their_bytes():
    depthwise = (
        KernelWork("DepthwiseConv2dNative", count=2, bytes=100_000_000, sized=2),
        KernelWork("DepthwiseConv2dNativeBackpropInput", count=2, bytes=100_000_000, sized=2),
    )
    compiled = train_function(jit_compile=True, kernels=depthwise)
    found = project_step(placement(functions=(compiled,)), A100)
    # their 200 MB as traffic, and 7.2x it again for the depthwise kernels
    assert found.kernels.mid == pytest.approx((0.92 + 7.2) * 2e8 / (2039e9 * 0.70) + 2.5e-6)


def test_an_xla_step_makes_no_copies_between_its_own_ops():
    """Keras' accuracy metric leaves int32 BitwiseAnd -> Less edges in host memory in a
    step TF's executor runs; an XLA cluster keeps them on the device: only the batch's
    copies are costed."""
    traced = train_function(input_copies=2, step_copies=438)
    plain = project_step(placement(functions=(traced,)), A100, input_bytes=4_000_000)
    batch = 4e6 / (32e9 * 0.75)
    assert plain.copies.mid == pytest.approx(440 * 10e-6 + batch)
    compiled = replace(traced, jit_compile=True)
    xla = project_step(placement(functions=(compiled,)), A100, input_bytes=4_000_000)
    assert xla.copies.mid == pytest.approx(2 * 10e-6 + batch)
    # the same where Keras' jit_compile="auto" compiles it on a GPU machine only
    keras = replace(traced, name="multi_step_on_iterator")
    ops = [b.tensor_op(flops=2e9, function="multi_step_on_iterator (train.py:12)", gradient=True)]
    facts = placement(functions=(keras,), tensor_ops=ops)
    auto = project_step(facts, A100, input_bytes=4_000_000, xla_on_gpu=True)
    assert auto.xla_assumed and auto.copies.mid == pytest.approx(xla.copies.mid)
    found = projection_facts(Facts(placement=placement(functions=(compiled,))), "A100")
    assert any("438 host<->device copies" in note and "not costed" in note for note in found.notes)


def test_without_xla_each_kernel_moves_what_it_reads_and_writes():
    # 100 MB out of each: a unary op reads one input, a binary op two, a fused batch norm
    # reads its input twice, its gradient reads the gradient and the input twice each
    def moved(op):
        work = (KernelWork(op, count=1, bytes=100_000_000, sized=1),)
        return project_step(placement(functions=(train_function(kernels=work),)), A100).kernels

    per_byte = 1e8 / (2039e9 * 0.70)
    assert moved("Relu").mid == pytest.approx(2 * per_byte)
    assert moved("AddV2").mid == pytest.approx(3 * per_byte)
    assert moved("ReluGrad").mid == pytest.approx(3 * per_byte)
    assert moved("FusedBatchNormV3").mid == pytest.approx(3 * per_byte)
    assert moved("FusedBatchNormGradV3").mid == pytest.approx(5 * per_byte)
    band = moved("Relu")  # broadcast inputs to cache misses, at 85% to 50% of the bandwidth
    assert band.low == pytest.approx(0.8 * 2e8 / (2039e9 * 0.85))
    assert band.high == pytest.approx(1.5 * 2e8 / (2039e9 * 0.50))


def test_the_steps_band_is_its_architectures_held_out_spread():
    """The band is not one width for every GPU: an XLA step in mixed precision on an
    A100 spans what the A100's held-out figures did, an H100's TF32 step its own; a
    combination no held-out figure measured gets the default, and a small batch's slow
    end is further out."""
    rtx3090 = find_gpu("RTX 3090")
    a6000 = find_gpu("RTX A6000")  # the professional GA102: full-rate FP32 accumulate
    assert rtx3090.geforce and not a6000.geforce and not A100.geforce
    assert not find_gpu("RTX 6000 Ada").geforce  # a workstation part despite its digits
    half = [b.tensor_op(dtype="float16", flops=4_000_000_000, function=TRAIN, gradient=True)]
    compiled = (train_function(jit_compile=True),)
    step = project_step(placement(tensor_ops=half, functions=compiled), A100).step
    assert (step.low / step.mid, step.high / step.mid) == pytest.approx((0.66, 1.15))
    full = [b.tensor_op(flops=4_000_000_000, function=TRAIN, gradient=True)]
    h100 = project_step(placement(tensor_ops=full, functions=compiled), find_gpu("H100")).step
    assert (h100.low / h100.mid, h100.high / h100.mid) == pytest.approx((0.85, 1.2))
    ada = project_step(placement(tensor_ops=full), find_gpu("L40S")).step  # no held-out
    assert (ada.low / ada.mid, ada.high / ada.mid) == pytest.approx((0.65, 1.5))
    sized = [
        b.tensor_op(flops=4_000_000_000, function=TRAIN, gradient=True, flops_batch=batch)
        for batch in (4, 64)
    ]
    small = project_step(placement(tensor_ops=sized[:1]), A100)
    large = project_step(placement(tensor_ops=sized[1:]), A100)
    assert small.step.mid == large.step.mid and small.step.low == large.step.low
    assert small.step.high == pytest.approx(1.3 * large.step.high)  # slow end further


def test_keras_validation_step_of_the_same_name_and_place_is_not_costed():
    """Keras' fit traces its training and validation steps as one function (one name,
    one place): the audit marks which trace trains, and the projection costs that one's
    matmuls and kernels, not the validation forward pass's as well."""
    label = "multi_step_on_iterator (train.py:30)"
    forward = dict(function=label, flops=2e11)
    training = [
        b.tensor_op(**forward, trains=True),
        b.tensor_op(**forward, gradient=True, trains=True),
    ]
    validation = [b.tensor_op(**forward, trains=False)]
    common = dict(name="multi_step_on_iterator", location="train.py:30")
    val_fn = train_function(**common, trains=False, kernels=(KernelWork("Relu", 1, 4, 1),))
    train_fn = train_function(**common, trains=True)
    both = placement(tensor_ops=training + validation, functions=(val_fn, train_fn))
    alone = placement(tensor_ops=training, functions=(train_fn,))
    found, expected = project_step(both, A100), project_step(alone, A100)
    assert found is not None and expected is not None
    assert found.tensor_ops == 2 and found.tensor.mid == pytest.approx(expected.tensor.mid)
    assert found.kernels.mid == pytest.approx(expected.kernels.mid)  # the training trace's
    # a record from before the audit marked traces: every op of the label, as it was
    unmarked = [replace(op, trains=None) for op in training + validation]
    assert project_step(placement(tensor_ops=unmarked, functions=(train_fn,)), A100).tensor_ops == 3


def test_the_eager_ops_time_is_the_share_their_gaps_measured_where_the_run_has_it():
    """Two eager ops a step, 306 µs apart: one gap a step, not two. The share the gaps
    took of the sampled steps (the run's bar and launch.eager-ops say it) is the direct
    measurement, and the projection costs that."""
    from dataclasses import replace

    steps = replace(LOOP, median_s=0.006)
    measured = replace(_eager(per_step=2.0, gap_us=306.0), dispatch_fraction=0.05)
    found = projection_facts(Facts(), "A100", None, steps, measured)
    assert found.eager_s == pytest.approx(0.0003)  # 5% of 6 ms, not 2 x 306 µs
    note = next(n for n in found.notes if n.startswith("Python issues 2 eager ops"))
    assert "0.3 ms issuing them (5% of the sampled steps' time, measured here)" in note
    counted = projection_facts(Facts(), "A100", None, steps, _eager(per_step=2.0, gap_us=306.0))
    assert counted.eager_s == pytest.approx(0.000612)  # no direct share: count x gap
    assert any("at the 306 µs between two measured here" in n for n in counted.notes)


def test_stage_timers_a_pipeline_that_kept_up_contradicts_are_not_used():
    """The steps of 0.5 ms hardly waited for their batches (measured, 256 of them), yet
    TF's stage timers gave 2.2 ms a batch (a source whose first 64 elements were timed
    with its set-up): a pipeline that slow could not have kept up, so the direct
    measurement wins and no input wait is projected (a healthy fit read as projected
    input-bound at high, in a full suite's run)."""
    steps = t.fit_steps(0.0, count=256, total_s=0.128, median_s=0.0005)
    fast = b.placement_facts(tensor_ops=placement().tensor_ops, functions=(train_function(),))
    slow = PipelineFacts(id=1, stages=(_stage(rate=450.0),))  # 2.2 ms a batch: impossible
    found = projection_facts(fast, "A100", slow, steps)
    assert found.input_batch_s is None and found.input_wait_fraction is None
    assert any("the pipeline kept up with them" in note for note in found.notes)
    # the timers agree with what the steps got: used
    quick = PipelineFacts(id=1, stages=(_stage(rate=5000.0),))  # 0.2 ms a batch
    assert projection_facts(fast, "A100", quick, steps).input_batch_s == pytest.approx(0.0002)
    # too few steps to tell a prefetch buffer from a pipeline that kept up: used
    short = replace(steps, count=10)
    assert projection_facts(fast, "A100", slow, short).input_batch_s is not None


def test_a_step_function_is_projected_before_one_that_trains_an_epoch_a_call():
    """helper-57's distributed tutorial has a tf.function that runs a whole epoch (its
    backward pass inside the graph's while loop) beside the step function; which one
    spent more time in calls decided the projection, run by run."""
    epoch = train_function(name="distributed_train_epoch", location="train.py:191")
    step = train_function(name="distributed_train_step", location="train.py:115")
    ops = [
        b.tensor_op(
            flops=2e9, function="distributed_train_epoch (train.py:191)", gradient=True,
            loop="while", in_loop=True,
        ),
        b.tensor_op(flops=2e9, function="distributed_train_step (train.py:115)", gradient=True),
    ]  # fmt: skip
    facts = placement(tensor_ops=ops, functions=(epoch, step))
    assert training_function(facts).name == "distributed_train_step"
    alone = placement(tensor_ops=ops[:1], functions=(epoch,))
    assert training_function(alone).name == "distributed_train_epoch"  # the one there is
