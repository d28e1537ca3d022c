"""The rules that decide from a profiler capture (input.bound, launch.host-bound,
tensorcore.unused, placement.host-transfers, placement.measured-cpu-ops), the capture
verdict and the GPU busy block's kernels share, from small capture facts."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest

from gpuwhy.derived.stage import derived
from gpuwhy.facts import (
    CaptureCopies,
    CaptureDevice,
    CaptureFacts,
    CaptureKernel,
    CaptureStep,
    Facts,
    GpuSamplesFacts,
    HostOp,
    HostShare,
    PythonFrame,
    StepFacts,
)
from gpuwhy.record import Record
from gpuwhy.rules.input.bound import InputBound
from gpuwhy.rules.launch.host_bound import HostBound
from gpuwhy.rules.placement.host_transfers import HostTransfers
from gpuwhy.rules.placement.measured_cpu_ops import MeasuredCpuOps
from gpuwhy.rules.tensorcore.unused import TensorCoreUnused
from gpuwhy.verdict import busy_text, verdict
from tests import builders as b

STEP_S = 0.020
DATA = Path(__file__).parents[1] / "data" / "nvml" / "h100"


def run(rule_cls, facts, **options):
    return rule_cls().check(facts, {**rule_cls.options, **options})


def device(**changes) -> CaptureDevice:
    fields = dict(
        name="/device:GPU:0",
        model="NVIDIA H100 80GB HBM3",
        streams=4,
        kernels=800,
        busy_s=0.05,
        kernel_time_s=0.05,
        tensor_core_s=0.03,
        matmul_s=0.03,
        matmul_tensor_core_s=0.03,
        steps_busy_s=0.05,
    )
    fields.update(changes)
    return CaptureDevice(**fields)


def capture(
    steps=10,
    busy=0.25,
    kernels=40,
    median_kernel_s=50e-6,
    idle=(("input", 0.7),),
    devices=None,
    **changes,
) -> CaptureFacts:
    """``steps`` steps of STEP_S, the GPU busy ``busy`` of each; ``idle``: (activity,
    share of the idle time) pairs."""
    idle_s = (1 - busy) * STEP_S * steps
    fields = dict(
        path="/runs/vm.xplane.pb",
        producer="tensorflow",
        span_s=STEP_S * steps,
        devices=(device(steps_busy_s=busy * STEP_S * steps),) if devices is None else devices,
        steps_from="function calls",
        step_name="train_function",
        steps=tuple(
            CaptureStep(
                start_s=i * STEP_S,
                duration_s=STEP_S,
                busy_s=busy * STEP_S,
                kernels=kernels,
                median_kernel_s=median_kernel_s,
                median_gap_s=5e-6,
            )
            for i in range(steps)
        ),
        step_count=steps,
        idle=tuple(HostShare(a, share * idle_s, share) for a, share in idle),
    )
    fields.update(changes)
    return CaptureFacts(**fields)


# -- input.bound ---------------------------------------------------------------------------
def test_a_capture_whose_gpu_waits_for_input_names_the_programs_own_frame():
    frames = (
        PythonFrame("slow", "train.py", 14, 0.1),
        PythonFrame("iterator_step", None, None, 0.1),
    )
    facts = Facts(capture=capture(idle=(("input", 0.9),), python=frames, producer="jax"))
    (finding,) = run(InputBound, facts)
    assert finding.severity == "high"
    assert finding.location == "train.py:14"
    assert "the wait is inside slow() at train.py:14" in finding.title
    assert finding.evidence["input_wait_fraction"] == pytest.approx(0.9 * 0.75, abs=1e-3)
    assert "`slow` (train.py:14)" in finding.fix and "PyDataset" in finding.fix
    ast.parse(finding.fix)  # pastes as Python


def test_a_tensorflow_capture_gets_the_tf_data_fix_around_its_generator():
    frames = (PythonFrame("make_batches", "train.py", 9, 0.1),)
    stages = ("Iterator::Root::FlatMap", "Iterator::Root::FlatMap[0]::Generator")
    facts = Facts(capture=capture(idle=(("input", 0.5),), python=frames, input_stages=stages))
    (finding,) = run(InputBound, facts)
    assert "from_generator(make_batches, args=(shard,)" in finding.fix
    assert "prefetch(tf.data.AUTOTUNE)" in finding.fix  # no Prefetch stage
    assert finding.evidence["tf_data_stages_in_the_wait"].startswith("Iterator::Root::FlatMap")
    ast.parse(finding.fix)


@pytest.mark.parametrize(
    ("stages", "expected", "absent"),
    [
        (
            ("Iterator::Root::Prefetch::Map", "EagerPyFunc:EagerPyFunc"),
            "tf.py_function",
            "prefetch",
        ),
        (("Iterator::Root::Prefetch::Map::TensorSlice",), "one element at a time", "py_function"),
        (("Iterator::Root::Prefetch::ParallelMapV2",), "steps_per_execution", "ds.map"),
    ],
    ids=["py_function", "sequential map", "already parallel"],
)
def test_the_tf_data_fix_follows_the_stages_in_the_wait(stages, expected, absent):
    facts = Facts(capture=capture(idle=(("input", 0.5),), input_stages=stages))
    (finding,) = run(InputBound, facts)
    assert expected in finding.fix and absent not in finding.fix
    ast.parse(finding.fix)


def arrays_capture(adapter_s: float, **changes) -> CaptureFacts:
    """A capture of Keras' fit on NumPy arrays: the GPU busy a quarter of 10 steps of
    20 ms, the host in input 80% of the idle time (0.12 s: 60% of the steps), Keras'
    array adapter's frames ``adapter_s`` of it."""
    frames = (
        PythonFrame("_get_iterator", "array_data_adapter.py", 326, adapter_s),
        PythonFrame("slice_and_convert_to_jax", "array_data_adapter.py", 251, adapter_s * 0.9),
    )
    fields = dict(
        idle=(("input", 0.8), ("python", 0.2)),
        producer="jax",
        steps_from="device pattern",
        step_name="jit_train_step",
        input_frames=frames,
        python=(PythonFrame("train", "train.py", 30, 0.12),),
    )
    return capture(**{**fields, **changes})


def test_kerass_slicing_of_in_memory_arrays_is_named_with_the_fixes_for_arrays():
    (finding,) = run(InputBound, Facts(capture=arrays_capture(0.1)))
    assert finding.title == (
        "The training thread slices and converts each NumPy batch, 60% of the step: Keras' "
        "fit on in-memory arrays, the GPU idle meanwhile (measured in 10 captured steps of "
        "20.0 ms); fit is called in train (train.py:30)"
    )
    assert finding.severity == "high" and finding.location == "train.py:30"
    assert finding.evidence["array_slicing_ms_per_step"] == pytest.approx(10.0)
    assert finding.evidence["keras_frames_in_the_wait"].startswith(
        "_get_iterator (array_data_adapter.py:326), slice_and_convert_to_jax"
    )
    assert "jax.device_put(x)" in finding.fix and "from_tensor_slices((x, y))" in finding.fix
    assert "PyDataset" not in finding.fix and "workers" not in finding.fix
    ast.parse(finding.fix)


def test_in_memory_arrays_on_another_backend_get_no_jax_in_their_fix():
    facts = Facts(capture=arrays_capture(0.1, producer="tensorflow", input_stages=()))
    (finding,) = run(InputBound, facts)
    assert "jax" not in finding.fix and "from_tensor_slices((x, y))" in finding.fix
    ast.parse(finding.fix)


def test_array_adapter_frames_in_a_sliver_of_the_wait_do_not_make_it_theirs():
    # 10 ms of a 120 ms wait: under a tenth, the wait is something else's
    (finding,) = run(InputBound, Facts(capture=arrays_capture(0.01)))
    assert finding.title.startswith("Steps wait for input 60% of the time")


@pytest.mark.parametrize(
    "python",
    [
        (PythonFrame("_on_train_batch_end", "callback_list.py", 217, 0.1),),
        (PythonFrame("error_handler", "traceback_utils.py", 110, 0.1),),
        (PythonFrame("fit", "trainer.py", 361, 0.1),),  # Keras' (installed here), by its def
    ],
    ids=["keras callbacks", "keras error handler", "installed trainer.py"],
)
def test_a_librarys_frame_is_never_the_location(python):
    """A record written before the reader left libraries' frames out may list one
    first: the location and the fix skip it, to the program's frame after it or none."""
    facts = Facts(capture=capture(idle=(("input", 0.9),), python=python, producer="jax"))
    (finding,) = run(InputBound, facts)
    assert finding.location is None
    assert python[0].function not in finding.title and python[0].function not in finding.fix
    mine = replace(facts.capture, python=(*python, PythonFrame("slow", "train.py", 14, 0.1)))
    (finding,) = run(InputBound, Facts(capture=mine))
    assert finding.location == "train.py:14"


def test_little_input_wait_or_too_few_steps_decide_nothing():
    assert run(InputBound, Facts(capture=capture(idle=(("input", 0.05),)))) == []
    assert run(InputBound, Facts(capture=capture(steps=2, idle=(("input", 0.9),)))) == []


def test_a_watched_runs_own_steps_decide_over_the_capture():
    facts = replace(b.facts(), steps=None, capture=capture(idle=(("input", 0.9),)))
    assert run(InputBound, facts)  # the capture alone
    # with watched steps the steps decide: the capture is not a second finding
    watched = Record.diagnose("run", facts)
    assert [f.id for f in watched.findings].count("input.bound") == 1


# -- launch.host-bound ---------------------------------------------------------------------
def test_many_small_kernels_with_the_host_dispatching_are_launch_bound():
    facts = Facts(
        capture=capture(
            busy=0.2, kernels=400, median_kernel_s=3e-6, idle=(("dispatch", 0.8), ("python", 0.2))
        )
    )
    (finding,) = run(HostBound, facts)
    assert finding.severity == "high"  # busy under half of max_busy
    assert "400 kernels a step of 3.0 µs" in finding.title
    assert "jit_compile=True" in finding.fix and "steps_per_execution" in finding.fix
    jax = run(HostBound, Facts(capture=replace(facts.capture, producer="jax")))
    assert "jax.lax.scan" in jax[0].fix


def test_a_step_whose_host_work_outlasts_its_few_kernels_is_host_bound():
    facts = Facts(
        capture=capture(
            busy=0.2,
            kernels=38,
            median_kernel_s=80e-6,
            idle=(("python", 0.5), ("synchronisation", 0.4), ("input", 0.1)),
        )
    )
    (finding,) = run(HostBound, facts)
    assert finding.evidence["kind"] == "host-bound"
    assert finding.title.startswith("The GPU idles 80% of each 20.0 ms step while its host works")
    assert "python 40%" in finding.title and "synchronisation 32%" in finding.title
    assert "every N steps" in finding.fix  # the host reads results back every step
    ast.parse(finding.fix)


@pytest.mark.parametrize(
    "changes",
    [
        dict(busy=0.7, kernels=400, median_kernel_s=3e-6, idle=(("dispatch", 1.0),)),
        dict(busy=0.2, kernels=400, median_kernel_s=80e-6, idle=(("compile", 1.0),)),
        dict(busy=0.2, kernels=400, median_kernel_s=3e-6, idle=(("input", 0.9),)),
    ],
    ids=["busy", "compiling, not the host's step work", "waits for input"],
)
def test_not_host_bound(changes):
    assert run(HostBound, Facts(capture=capture(**changes))) == []


def test_a_capture_without_a_gpu_has_no_kernel_pattern():
    assert run(HostBound, Facts(capture=capture(devices=(), no_device="no GPU"))) == []


# -- tensorcore.unused ---------------------------------------------------------------------
SGEMM = CaptureKernel("ampere_sgemm_128x64_nn", 10, 0.02, None, True)
TF32 = CaptureKernel("sm90_xmma_fprop_implicit_gemm_tf32f32", 10, 0.01, "tf32", True)


def test_matmuls_measured_off_tensor_cores():
    gpu = device(matmul_s=0.03, matmul_tensor_core_s=0.0, top_kernels=(SGEMM,))
    (finding,) = run(TensorCoreUnused, Facts(capture=capture(devices=(gpu,))))
    assert finding.severity == "medium"
    assert finding.title.startswith("100% of the convolution/matmul kernel time")
    assert "enable_tensor_float_32_execution(True)" in finding.fix
    assert finding.evidence["kernels_off_tensor_cores"] == ["ampere_sgemm_128x64_nn"]


def test_some_shapes_off_tensor_cores_beside_tf32_ones_are_low():
    gpu = device(matmul_s=0.03, matmul_tensor_core_s=0.01, top_kernels=(SGEMM, TF32))
    (finding,) = run(TensorCoreUnused, Facts(capture=capture(devices=(gpu,))))
    assert finding.severity == "low" and "tf32" in finding.title
    assert "enable_tensor_float_32" not in finding.fix  # TF32 already runs


def test_the_capture_is_trusted_over_a_prediction_that_disagrees():
    predicted = b.placement(
        tensor_ops=[b.tensor_op(dims={"m": 4096, "n": 4096, "k": 4096})],
        compute_capability=(7, 0),
        gpu_name="Tesla V100",
    )
    alone = run(TensorCoreUnused, Facts(placement=predicted))
    assert alone and alone[0].severity == "medium"
    gpu = device(matmul_s=0.03, matmul_tensor_core_s=0.03, top_kernels=(TF32,))
    (finding,) = run(TensorCoreUnused, Facts(placement=predicted, capture=capture(devices=(gpu,))))
    assert finding.severity == "info"
    assert "the measurement is trusted" in finding.title
    assert finding.evidence["predicted"] == alone[0].title


# -- placement.host-transfers --------------------------------------------------------------
def copies(seconds, pageable=0, overlapped=0.0):
    return (
        CaptureCopies("host_to_device", 20, 64 << 20, seconds, pageable, 20 - pageable, overlapped),
    )


def exposed(facts_capture: CaptureFacts, seconds_a_step: float) -> CaptureFacts:
    steps = tuple(replace(s, exposed_copy_s=seconds_a_step) for s in facts_capture.steps)
    return replace(facts_capture, steps=steps)


def test_copies_exposed_for_a_third_of_the_steps():
    gpu = device(copies=copies(0.08, pageable=20))
    (finding,) = run(HostTransfers, Facts(capture=exposed(capture(devices=(gpu,)), 0.008)))
    assert "40% of the captured steps" in finding.title
    assert "20 from pageable memory" in finding.title
    assert "prefetch_to_device" in finding.fix


def test_copies_hidden_behind_kernels_or_outside_the_steps_are_no_finding():
    # 80 ms of copies in the capture, of which 1 ms a step not behind a kernel (the
    # rest overlapped, or an upload before the steps)
    gpu = device(copies=copies(0.08, overlapped=0.07))
    assert run(HostTransfers, Facts(capture=exposed(capture(devices=(gpu,)), 0.001))) == []


# -- placement.measured-cpu-ops ------------------------------------------------------------
def cpu_op(kind, seconds, on_cpu=True):
    return HostOp(f"model/{kind.lower()}", kind, 10, seconds, on_cpu)


def test_ops_that_ran_on_the_cpu_in_the_step():
    ops = (
        cpu_op("StringToHashBucketFast", 0.03),
        cpu_op("Unique", 0.004),
        cpu_op("Shape", 0.00002),  # a GPU op with no kernel: microseconds, not listed
        cpu_op("MatMul", 0.05, on_cpu=False),
    )
    facts = Facts(capture=capture(host_ops=ops, host_ops_known=True, cpu_ops_s=0.034))
    (finding,) = run(MeasuredCpuOps, facts)
    assert finding.title.startswith("StringToHashBucketFast, Unique ran on the CPU")
    assert finding.evidence["cpu_op_share_of_steps"] == pytest.approx(0.17)
    # the same ops, on two threads at once half of the time: the union, not the sum
    overlapped = Facts(capture=replace(facts.capture, cpu_ops_s=0.02))
    (finding,) = run(MeasuredCpuOps, overlapped)
    assert finding.evidence["cpu_op_share_of_steps"] == pytest.approx(0.10)
    assert not any("Shape" in op for op in finding.evidence["ops"])


def test_cpu_ops_against_the_placers_prediction():
    ops = (cpu_op("StringToHashBucketFast", 0.03), cpu_op("Where", 0.001, on_cpu=False))
    predicted = b.placement(
        groups=[
            b.op_group("StringToHashBucketFast", device="CPU"),
            b.op_group("Where", device="CPU"),
        ]
    )
    facts = Facts(placement=predicted, capture=capture(host_ops=ops, host_ops_known=True))
    (finding,) = run(MeasuredCpuOps, facts)
    assert finding.evidence["predicted_too"] == ["StringToHashBucketFast"]
    assert finding.evidence["predicted_on_cpu_but_ran_on_gpu"] == ["Where"]


def test_a_capture_that_cannot_tell_cpu_from_gpu_ops_says_nothing():
    ops = (cpu_op("StringToHashBucketFast", 0.03, on_cpu=None),)
    assert run(MeasuredCpuOps, Facts(capture=capture(host_ops=ops))) == []


# -- the verdict and the busy block --------------------------------------------------------
def test_the_capture_verdict_leads_with_the_measured_busy_share():
    record = Record.diagnose("capture", Facts(capture=capture(idle=(("input", 0.9),))))
    assert record.verdict.startswith("GPU busy 25% of 10 captured steps of 20.0 ms (measured")
    assert "input" in record.verdict
    no_gpu = Facts(capture=capture(devices=(), no_device="no GPU", idle=(("compute", 1.0),)))
    assert "no GPU in the capture" in verdict(no_gpu, [])
    none = Facts(capture=capture(steps=0, step_count=0))
    assert verdict(none, []).startswith("Captured: no steps found")


def test_the_busy_block_carries_the_captured_kernels_share(h100_samples: GpuSamplesFacts):
    facts = Facts(gpu_samples=h100_samples, capture=capture(busy=0.25))
    block = derived(facts).gpu_busy[0]
    assert block is not None and block.kernels_share == pytest.approx(0.25)
    assert block.kernels_steps == 10
    text = busy_text(facts) or ""
    assert "its kernels ran 25% of 10 captured steps" in text
    # the sampled figure read 43-46% over the whole loop: the direct one is trusted
    assert "measured directly: trusted over the SM activity" in text


@pytest.fixture
def h100_samples() -> GpuSamplesFacts:
    """The GPU samples of a real H100 recording (the 100/100 ms duty loop)."""
    from gpuwhy.modes.recording import recording_facts

    samples = recording_facts(DATA / "duty_100_100.nvml.jsonl").gpu_samples
    assert samples is not None
    return samples


def test_steps_the_profiler_slowed_are_no_measure_of_the_runs_busy(h100_samples):
    """The captured steps ran at 20 ms against the run's 10 ms: the tracing slowed them,
    and their kernels' share is left out of the busy block (the sampled figure stands)."""
    run = StepFacts(
        source="tf-function", marker="train_step (train.py:9)", count=100, median_s=0.010
    )
    facts = Facts(gpu_samples=h100_samples, steps=run, capture=capture(busy=0.25))
    block = derived(facts).gpu_busy[0]
    assert block is not None and block.kernels_share is None
    at_pace = replace(run, median_s=0.019)
    facts = Facts(gpu_samples=h100_samples, steps=at_pace, capture=capture(busy=0.25))
    assert derived(facts).gpu_busy[0].kernels_share == pytest.approx(0.25)


def test_copies_predicted_heavy_but_measured_light_are_said_both_ways():
    """The graph predicts 17 copies a step between host and GPU; the capture measured
    them in 5% of the steps: an info finding, the measurement trusted."""
    copies_ = [b.host_copy(src=f"train_step/op_{i}", shape=(64, 64)) for i in range(17)]
    predicted = b.placement(copies=copies_)
    alone = run(HostTransfers, Facts(placement=predicted))
    assert alone and alone[0].severity != "info"
    gpu = device(copies=copies(0.01))
    facts = Facts(placement=predicted, capture=exposed(capture(devices=(gpu,)), 0.001))
    (finding,) = run(HostTransfers, facts)
    assert finding.severity == "info"
    assert finding.title.startswith(f"Predicted: {alone[0].title}; but the capture measured")
    assert finding.title.endswith("5% of the captured steps' time: the measurement is trusted")


def test_a_custom_loops_fast_pipeline_gets_a_larger_batch_not_a_compile_argument():
    stages = ("Iterator::Root::Prefetch::ParallelMapV2",)
    facts = Facts(
        capture=capture(idle=(("input", 0.5),), input_stages=stages, step_name="train_step")
    )
    (finding,) = run(InputBound, facts)
    assert "ds.rebatch(" in finding.fix and "steps_per_execution" not in finding.fix
