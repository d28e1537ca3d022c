"""``read_capture``: the ``capture`` section of the committed captures, each figure checked
against the capture itself read by TensorFlow's own parser (tests/collect/capture/
reference.py) or against tests/data/xplane/SOURCE.md; and of a capture TensorFlow's
profiler writes in the test, around steps it marks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from gpuwhy.collect.capture import xspace
from gpuwhy.collect.capture.analysis import NO_DEVICE, read_capture
from gpuwhy.collect.capture.files import capture_files
from gpuwhy.facts import CaptureFacts, PythonFrame
from tests.collect.capture import reference, variants
from tests.collect.capture.reference import CAPTURES, H100, TF_CPU

ROOT = Path(__file__).resolve().parents[3]
PS = 1e-12
STEPS_PER_H100_RUN = 20
KERNELS_PER_H100_STEP = 38  # jit_train_step's kernels (SOURCE.md: 760 = 20 x 38)
OP_KERNEL = re.compile(r"^([^\s:][^\s]*):([A-Za-z_][A-Za-z0-9_]*)$")


@pytest.fixture(scope="module")
def h100() -> CaptureFacts:
    return read_capture(capture_files(H100))


@pytest.fixture(scope="module")
def tf_cpu() -> dict[str, CaptureFacts]:
    return {name: read_capture(capture_files(TF_CPU / name)) for name in reference.TF_NAMES}


# -- the H100 capture (Keras 3 on JAX, input-bound) -------------------------------------------
def h100_kernels(tf_spaces) -> list[tuple[int, int, str, str | None, bool]]:
    """(start, end, name, XLA module, on the compute stream) of every kernel: a device
    event with ``kernel_details``, read by TensorFlow's parser."""
    gpu = reference.plane(tf_spaces["h100_slow_input"], "/device:GPU:0")
    found = []
    for line in gpu.lines:
        for start, event in zip(reference.starts_ps(line).tolist(), line.events):
            stats = reference.event_stats(gpu, event)
            if "kernel_details" in stats:
                name = reference.event_name(gpu, event)
                found.append(
                    (
                        start,
                        start + event.duration_ps,
                        name,
                        stats.get("hlo_module"),
                        "Compute" in line.name,
                    )
                )
    return found


def h100_steps(tf_spaces) -> list[tuple[int, int]]:
    """The 20 steps, found apart from gpuwhy: jit_train_step's kernels in runs of 38, each
    step from its first kernel to the next step's first (the last: to its last kernel)."""
    train = sorted(k for k in h100_kernels(tf_spaces) if k[3] == "jit_train_step")
    assert len(train) == STEPS_PER_H100_RUN * KERNELS_PER_H100_STEP
    starts = [train[i][0] for i in range(0, len(train), KERNELS_PER_H100_STEP)]
    return list(zip(starts, [*starts[1:], max(k[1] for k in train)]))


def test_the_h100_steps_are_found_from_the_devices_repeating_work(h100, tf_spaces):
    assert h100.producer == "jax"
    assert h100.steps_from == "device pattern"
    assert h100.step_name == "jit_train_step"
    assert h100.step_count == len(h100.steps) == STEPS_PER_H100_RUN
    # each step starts at a kernel the GPU runs once per step: within a few kernels of
    # the step's first (a kernel run twice a step may come first)
    for step, (start, _) in zip(h100.steps, h100_steps(tf_spaces)):
        assert 0 <= step.start_s - start * PS < 20e-6
        assert step.kernels >= KERNELS_PER_H100_STEP
    # 20 steps of a 20 ms sleep each: the median step is the generator's
    assert 0.020 <= h100.median_step_s <= 0.030


def test_the_h100_busy_share_is_the_compute_streams_kernel_union_in_the_steps(h100, tf_spaces):
    kernels = [(s, e) for s, e, _, _, compute in h100_kernels(tf_spaces) if compute]
    steps = h100_steps(tf_spaces)
    busy = sum(reference.clipped_total(kernels, a, b) for a, b in steps)
    expected = busy / sum(b - a for a, b in steps)
    assert 0.02 < expected < 0.05  # 3 %: the GPU idles, waiting for the generator
    assert h100.busy_share == pytest.approx(expected, abs=0.02)


def test_the_h100_device_is_read_with_its_kernels_and_tensor_cores(h100, tf_spaces):
    (device,) = h100.devices
    assert device.name == "/device:GPU:0"
    assert device.model == "NVIDIA H100 80GB HBM3"
    assert device.streams == 4
    found = h100_kernels(tf_spaces)
    assert device.kernels == len(found) == 765
    # SOURCE.md: the compute stream's kernel union 14,187,776 ns (every kernel is on it)
    union = reference.union_total([(s, e) for s, e, *_ in found])
    assert union == 14187776 * 1000
    assert device.busy_s == pytest.approx(union * PS, rel=1e-9)
    assert device.kernel_time_s == pytest.approx(sum(e - s for s, e, *_ in found) * PS, rel=1e-9)
    time_by_name = Counter()
    for s, e, name, _, _ in found:
        time_by_name[name] += e - s
    tf32 = {n for n in time_by_name if "_xmma_" in n and "tf32" in n and n.startswith("sm")}
    assert len(tf32) == 5  # fprop, dgrad, two wgrads (sm90) and an sm80 fprop
    top = {k.name: k for k in device.top_kernels}
    for name in tf32:
        kernel = top[name]
        assert kernel.tensor_core == "tf32" and kernel.matmul
        assert kernel.count == STEPS_PER_H100_RUN
        assert kernel.module == "jit_train_step"
        assert kernel.time_s == pytest.approx(time_by_name[name] * PS, rel=1e-9)
    tf32_time = sum(time_by_name[n] for n in tf32) * PS
    assert device.matmul_tensor_core_s >= tf32_time > 0
    assert device.tensor_core_s >= device.matmul_tensor_core_s
    assert device.matmul_s > device.matmul_tensor_core_s  # cuDNN's FP32 wgrad_alg0 too
    assert device.modules[0].name == "jit_train_step"


def test_the_h100_copies_are_48_pinned_host_to_device_copies(h100):
    (device,) = h100.devices
    copies = {c.direction: c for c in device.copies}
    h2d = copies["host_to_device"]
    assert h2d.count == 48
    assert h2d.bytes == 66065688
    assert (h2d.pinned, h2d.pageable) == (48, 0)
    assert h2d.time_s == pytest.approx(1693056e-9, rel=1e-6)  # SOURCE.md
    assert copies["device_to_host"].count == 21 and copies["device_to_host"].bytes == 84
    assert copies["device_to_device"].count == 42
    assert copies["device_to_device"].bytes == 276488


def test_the_h100_gpu_idles_on_input_and_the_scripts_generator_is_named(h100):
    shares = [s.share for s in h100.idle]
    assert shares == sorted(shares, reverse=True)
    assert sum(shares) == pytest.approx(1.0, abs=1e-6)
    assert h100.idle[0].activity == "input"
    assert h100.idle[0].share >= 0.9
    assert "$builtins next" in h100.idle[0].top
    first = h100.python[0]
    assert (first.function, first.file, first.line) == ("slow", "xplane_capture.py", 14)
    script = (reference.DATA / "h100_xplane_capture.py").read_text().splitlines()
    assert script[13].startswith("def slow():")  # line 14 of the script that ran
    assert all(isinstance(f, PythonFrame) for f in h100.python)
    # the 20 sleeps of 20 ms the generator made: most of it inside the steps
    assert 0.3 < first.seconds < 0.45


# -- TensorFlow's CPU captures -----------------------------------------------------------------
@pytest.mark.parametrize("name", reference.TF_NAMES)
def test_a_cpu_capture_says_it_has_no_gpu(name, tf_cpu):
    facts = tf_cpu[name]
    assert facts.producer == "tensorflow"
    assert facts.no_device == NO_DEVICE == "no GPU: the capture has no device plane"
    assert facts.devices == ()
    assert facts.busy_share is None
    assert facts.host == "vm"
    assert facts.path == str(CAPTURES[name])


def starts_of(space, matches) -> list[int]:
    host = reference.plane(space, "/host:CPU")
    found = []
    for line in host.lines:
        for start, event in zip(reference.starts_ps(line).tolist(), line.events):
            if matches(host, event):
                found.append(start)
    return sorted(found)


def test_keras_fits_steps_are_its_train_functions_calls(tf_cpu, tf_spaces):
    facts = tf_cpu["keras_fit_slow_generator"]
    assert facts.steps_from == "function calls"
    assert facts.step_name == "multi_step_on_iterator"
    assert facts.step_count == len(facts.steps) == 12
    call = re.compile(r"^EagerLocalExecute: __inference_multi_step_on_iterator_\d+$")
    starts = starts_of(
        tf_spaces["keras_fit_slow_generator"],
        lambda host, event: bool(call.match(reference.event_name(host, event))),
    )
    assert [s.start_s for s in facts.steps] == pytest.approx([s * PS for s in starts], abs=1e-9)


def test_a_custom_loops_steps_are_its_step_markers(tf_cpu, tf_spaces):
    facts = tf_cpu["custom_loop_step_markers"]
    assert facts.steps_from == "step markers"
    assert facts.step_name == "train"
    assert facts.step_count == len(facts.steps) == 10

    def marker(host, event) -> bool:
        stats = reference.event_stats(host, event)
        return "step_num" in stats and "_r" in stats

    starts = starts_of(tf_spaces["custom_loop_step_markers"], marker)
    assert len(starts) == 10
    assert [s.start_s for s in facts.steps] == pytest.approx([s * PS for s in starts], abs=1e-9)


def test_an_eager_loop_without_markers_or_functions_steps_by_an_op_run_once_a_step(tf_cpu):
    """10 steps, each one next() (IteratorGetNext) and one Mean among 3 MatMuls, 3
    ReadVariableOps and 2 Relus run eagerly: the op run once a step marks it, and the
    py_function in the pipeline's map (about 3.7 ms of a 3.9 ms step) is the input wait."""
    facts = tf_cpu["eager_python_loop"]
    assert facts.steps_from == "eager op pattern"
    assert facts.step_name in ("IteratorGetNext", "Mean")
    assert facts.step_count == len(facts.steps) == 10
    assert max(facts.idle, key=lambda s: s.share).activity == "input"


def test_a_slow_generators_fit_spends_its_steps_mostly_on_input(tf_cpu):
    facts = tf_cpu["keras_fit_slow_generator"]
    by_activity = {s.activity: s for s in facts.idle}
    assert max(facts.idle, key=lambda s: s.share).activity == "input"
    assert by_activity["input"].share > 0.5  # 15 ms sleeps in ~17 ms steps
    # without a GPU the shares are of the steps' whole time
    steps_time = sum(s.duration_s for s in facts.steps)
    assert sum(s.seconds for s in facts.idle) == pytest.approx(steps_time, rel=1e-6)


# -- JAX's capture without a GPU (Keras 3 fit on NumPy arrays) -------------------------------
ARRAYS_SCRIPT = reference.DATA / "jax_cpu_capture.py"


@pytest.fixture(scope="module")
def jax_arrays() -> CaptureFacts:
    return read_capture(capture_files(reference.JAX_CPU_ARRAYS))


def outermost_jit_calls(space, name: str) -> list[tuple[int, int]]:
    """(start, end) of the calls of the jitted ``name``, read apart from gpuwhy: JAX
    records each call as two ``PjitFunction(name)`` events, one inside the other."""
    host = reference.plane(space, "/host:CPU")
    calls = []
    for line in host.lines:
        for start, event in zip(reference.starts_ps(line).tolist(), line.events):
            if reference.event_name(host, event) == f"PjitFunction({name})":
                calls.append((start, start + event.duration_ps))
    kept: list[tuple[int, int]] = []
    for start, end in sorted(calls, key=lambda c: (c[0], -c[1])):
        if not kept or start >= kept[-1][1]:
            kept.append((start, end))
    assert len(calls) == 2 * len(kept)
    return kept


def test_a_jax_capture_without_a_gpu_steps_by_its_jitted_train_steps_calls(jax_arrays, tf_spaces):
    """No device plane, no step marker, no tf.function: each call of the jitted train
    step is a step (SOURCE.md: 6 calls, median 1.0 ms from one to the next); JAX wrote
    no metadata plane (its HLO protos off), its jitted calls say it wrote the capture."""
    facts = jax_arrays
    assert facts.producer == "jax"
    assert facts.devices == () and facts.no_device == NO_DEVICE
    assert (facts.steps_from, facts.step_name, facts.step_count) == (
        "function calls",
        "train_step",
        6,
    )
    calls = outermost_jit_calls(tf_spaces["jax_cpu_keras_fit_numpy_arrays"], "train_step")
    assert [s.start_s for s in facts.steps] == pytest.approx([a * PS for a, _ in calls], abs=1e-9)
    assert facts.median_step_s == pytest.approx(1.0006501e-3, abs=1e-9)


def test_kerass_array_slicing_is_the_input_wait_and_only_the_programs_frame_is_named(jax_arrays):
    """The training thread waits in next() of Keras' array adapter, slicing each batch
    (slice_and_convert_to_jax); the Python frames named are the program's own only:
    train (the script's line 24), never Keras' (its fit, its callbacks on their pool)."""
    facts = jax_arrays
    wait = next(s for s in facts.idle if s.activity == "input")
    assert wait.share > 0.5
    assert [(f.function, f.file, f.line) for f in facts.python] == [
        ("train", "jax_cpu_capture.py", 24)
    ]
    assert ARRAYS_SCRIPT.read_text().splitlines()[23].startswith("def train(")
    frames = {(f.function, f.file, f.line): f.seconds for f in facts.input_frames}
    slicing = frames[("slice_and_convert_to_jax", "array_data_adapter.py", 251)]
    adapter = frames[("_get_iterator", "array_data_adapter.py", 326)]
    assert 0 < slicing <= adapter <= wait.seconds + 1e-9
    assert adapter > 0.5 * wait.seconds
    assert not {f.file for f in facts.input_frames} & {"callback_list.py", "jax_cpu_capture.py"}


def test_a_fit_called_at_the_top_level_names_no_frame_of_a_library(tmp_path):
    """The same capture without the script's frame (fit called at the module's top
    level: the tracer starts inside it): nothing is named, where Keras' error_handler
    (traceback_utils.py) and the callbacks' _async_dispatch were before."""
    source = next(reference.JAX_CPU_ARRAYS.rglob("*.xplane.pb"))
    folder = variants.without_events(source, tmp_path / "logs", "$jax_cpu_capture.py")
    facts = read_capture(capture_files(folder))
    assert facts.python == ()
    assert {f.file for f in facts.input_frames} >= {"array_data_adapter.py"}


def threads_capture(path: Path, lines: dict[str, list[tuple[str, int, int]]]) -> Path:
    """A host-only capture of 10 steps of 10 ms (a jitted train_step called at 6 ms of
    each) with ``lines``: thread name -> (event name, start ms in each step, length ms),
    an event of length 100 once, from 0."""
    _, _, xspace_class = xspace.classes()
    space = xspace_class()
    host = space.planes.add(id=1, name="/host:CPU")
    names = sorted({n for events in lines.values() for n, _, _ in events})
    ids = {name: i for i, name in enumerate(["PjitFunction(train_step)", *names], start=1)}
    for name, i in ids.items():
        host.event_metadata[i].id, host.event_metadata[i].name = i, name
    ms = 1_000_000_000  # ps
    for number, (thread, events) in enumerate(lines.items(), start=1):
        line = host.lines.add(id=number, name=thread, timestamp_ns=0)
        for name, at, length in events:
            steps = [0] if length == 100 else range(10)
            for step in steps:
                line.events.add(
                    metadata_id=ids[name], offset_ps=(step * 10 + at) * ms, duration_ps=length * ms
                )
        if number == 1:  # the training thread calls the step
            for step in range(10):
                line.events.add(metadata_id=1, offset_ps=(step * 10 + 6) * ms, duration_ps=ms)
    path.write_bytes(space.SerializeToString())
    return path


def test_a_pools_thread_meanwhile_is_not_where_the_wait_is(tmp_path):
    """The training thread waits in next() under the program's main; the program's own
    callback runs on Keras' callback pool meanwhile (a thread started by threading):
    main is where the wait is, not the callback, however much shorter it is."""
    path = threads_capture(
        tmp_path / "vm.xplane.pb",
        {
            "python": [("$train.py:10 main", 0, 100), ("$builtins next", 0, 6)],
            "python ": [
                ("$threading.py:988 _bootstrap", 0, 100),
                ("$train.py:40 on_train_batch_end", 0, 8),
            ],
        },
    )
    facts = read_capture([path])
    assert (facts.steps_from, facts.step_name, facts.step_count) == (
        "function calls",
        "train_step",
        10,
    )
    assert [(f.function, f.file, f.line) for f in facts.python] == [("main", "train.py", 10)]


def test_a_main_thread_that_waits_through_another_still_names_its_frame(tmp_path):
    """tf.data's consumer thread waits (TensorFlow's fit reads its batch there); the main
    thread, in the program's main around the calls, is still the program's frame."""
    path = threads_capture(
        tmp_path / "vm.xplane.pb",
        {
            "python": [("$train.py:10 main", 0, 100)],
            "tf_data_iterator_get_next/7": [("IteratorGetNextOp::DoCompute", 0, 6)],
        },
    )
    facts = read_capture([path])
    assert facts.idle[0].activity == "input"
    assert [(f.function, f.file, f.line) for f in facts.python] == [("main", "train.py", 10)]


def independent_host_ops(space, step_starts: list[int], last_end: int) -> tuple[Counter, Counter]:
    """(time, count) by (node, op type) of TF's op kernels starting inside the steps:
    events named ``node:OpType`` whose metadata's display name is that type, on every
    thread but tf.data's producers (their ops run ahead of the step, by design)."""
    host = reference.plane(space, "/host:CPU")
    time: Counter = Counter()
    count: Counter = Counter()
    for line in host.lines:
        name = line.display_name or line.name
        if name.startswith("tf_data_") and not name.startswith("tf_data_iterator_get_next"):
            continue
        for start, event in zip(reference.starts_ps(line).tolist(), line.events):
            metadata = host.event_metadata[event.metadata_id]
            match = OP_KERNEL.match(metadata.name)
            if match and metadata.display_name == match.group(2):
                if step_starts[0] <= start < last_end:
                    time[match.groups()] += event.duration_ps
                    count[match.groups()] += 1
    return time, count


@pytest.fixture(scope="module")
def keras_host_ops(tf_cpu, tf_spaces) -> tuple[CaptureFacts, Counter, Counter]:
    facts = tf_cpu["keras_fit_slow_generator"]
    starts = [round(s.start_s / PS) for s in facts.steps]
    end = round((facts.steps[-1].start_s + facts.steps[-1].duration_s) / PS)
    time, count = independent_host_ops(tf_spaces["keras_fit_slow_generator"], starts, end)
    return facts, time, count


def test_host_ops_list_tfs_op_kernels_by_node_and_type(keras_host_ops):
    facts, time, count = keras_host_ops
    assert facts.host_ops and facts.host_ops_known is False  # no GPU: on_cpu cannot be told
    # the generator's PyFunc runs on tf.data's producer threads: not the step's
    assert not any(op.type == "PyFunc" for op in facts.host_ops)
    for op in facts.host_ops:
        key = (op.name, op.type)
        assert key in count, key
        assert op.count == count[key], key
        assert op.time_s == pytest.approx(time[key] * PS, rel=1e-9), key
        assert op.on_cpu is None
        assert OP_KERNEL.match(f"{op.name}:{op.type}"), key  # the event's name, split
    times = [op.time_s for op in facts.host_ops]
    assert times == sorted(times, reverse=True)
    loss = [op for op in facts.host_ops if "compile_loss/" in op.name]
    assert loss and all(op.name.startswith("StatefulPartitionedCall/") for op in loss)


def test_host_ops_are_the_heaviest_op_kernels_in_the_steps(keras_host_ops):
    facts, time, _ = keras_host_ops
    expected = [key for key, _ in time.most_common(5)]
    assert ("StatefulPartitionedCall/sequential_1/conv2d_1/Relu", "_MklNativeFusedConv2D") in (
        expected
    )
    assert [(op.name, op.type) for op in facts.host_ops[:5]] == expected


# -- a capture TensorFlow's profiler writes in the test -----------------------------------------
PROFILED = textwrap.dedent(
    """
    import sys

    import tensorflow as tf

    logdir = sys.argv[1]
    w = tf.Variable(tf.random.normal([16, 4], seed=1))
    batches = iter(
        tf.data.Dataset.from_tensor_slices(tf.random.normal([512, 16], seed=2)).batch(32).repeat()
    )


    @tf.function
    def train_step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w)))
        w.assign_sub(0.1 * tape.gradient(loss, w))
        return loss


    train_step(next(batches))  # traced outside the capture
    tf.profiler.experimental.start(logdir)
    for step in range(6):
        with tf.profiler.experimental.Trace("train", step_num=step, _r=1):
            train_step(next(batches))
    for _ in range(3):  # unmarked calls after the steps
        train_step(next(batches))
    tf.profiler.experimental.stop()
    print("profiled")
    """
)


@pytest.fixture(scope="module")
def profiled(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("profiled")
    script = where / "profiled.py"
    script.write_text(PROFILED)
    logdir = where / "logdir"
    result = subprocess.run(
        [sys.executable, str(script), str(logdir)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "profiled"
    return logdir


def test_a_capture_written_by_tfs_profiler_has_exactly_its_marked_steps(profiled):
    (path,) = capture_files(profiled)
    assert path.parent.parent == profiled / "plugins" / "profile"
    assert path.name.endswith(".xplane.pb")
    facts = read_capture([path])
    assert facts.producer == "tensorflow"
    assert facts.no_device == NO_DEVICE
    assert facts.steps_from == "step markers"
    assert facts.step_name == "train"
    assert facts.step_count == len(facts.steps) == 6
    # the steps start where TF's parser finds the markers (step_num 0..5, _r 1)
    space = reference.parse(path)
    host = reference.plane(space, "/host:CPU")
    markers = []
    for line in host.lines:
        for start, event in zip(reference.starts_ps(line).tolist(), line.events):
            stats = reference.event_stats(host, event)
            if reference.event_name(host, event) == "train" and "step_num" in stats:
                markers.append((start, event.duration_ps, stats["step_num"], stats["_r"]))
    markers.sort()
    assert [(m[2], m[3]) for m in markers] == [(i, 1) for i in range(6)]
    assert [s.start_s for s in facts.steps] == pytest.approx([m[0] * PS for m in markers], abs=1e-9)
    # each step to the next marker; the last to its own end
    last = facts.steps[-1]
    assert last.duration_s == pytest.approx(markers[-1][1] * PS, abs=1e-9)
    ops = {(op.name, op.type) for op in facts.host_ops}
    assert ("Square", "Square") in ops and ("Mean", "Mean") in ops


# -- a TF GPU capture built by hand: which host ops ran on the CPU ------------------------------
def tf_gpu_capture(path: Path) -> Path:
    """A host thread running three op kernels in 3 steps (step markers): a MatMul that
    launches a kernel (a cuLaunchKernel inside it) whose GPU kernel carries no op name
    (its stats were not read), a Conv2D a GPU kernel names, and a Unique with neither:
    the one that ran on the CPU."""
    xplane, _, xspace_class = xspace.classes()
    space = xspace_class()
    host = space.planes.add(id=1, name="/host:CPU")
    gpu = space.planes.add(id=2, name="/device:GPU:0")
    names = {
        1: "train",
        2: "dense/MatMul:MatMul",
        3: "conv/Conv2D:Conv2D",
        4: "lookup/Unique:Unique",
        5: "cuLaunchKernel",
    }
    for i, name in names.items():
        host.event_metadata[i].id = i
        host.event_metadata[i].name = name
        if ":" in name:
            host.event_metadata[i].display_name = name.rsplit(":", 1)[1]
    host.stat_metadata[1].id, host.stat_metadata[1].name = 1, "step_num"
    host.stat_metadata[2].id, host.stat_metadata[2].name = 2, "_r"
    gpu.event_metadata[1].id, gpu.event_metadata[1].name = 1, "volta_sgemm_128x64_nn"
    gpu.event_metadata[2].id, gpu.event_metadata[2].name = 2, "implicit_convolve_sgemm"
    gpu.stat_metadata[1].id, gpu.stat_metadata[1].name = 1, "tf_op"
    thread = host.lines.add(id=1, name="tf_Compute/1", timestamp_ns=0)
    stream = gpu.lines.add(id=7, name="Stream #7(Compute)", timestamp_ns=0)
    ms = 1_000_000_000  # ps
    for step in range(3):
        t = step * 10 * ms
        marker = thread.events.add(metadata_id=1, offset_ps=t, duration_ps=9 * ms)
        marker.stats.add(metadata_id=1, int64_value=step)
        marker.stats.add(metadata_id=2, int64_value=1)
        thread.events.add(metadata_id=2, offset_ps=t + ms, duration_ps=ms)  # MatMul
        thread.events.add(metadata_id=5, offset_ps=t + ms + 100, duration_ps=10)  # its launch
        thread.events.add(metadata_id=3, offset_ps=t + 3 * ms, duration_ps=ms)  # Conv2D
        thread.events.add(metadata_id=4, offset_ps=t + 5 * ms, duration_ps=3 * ms)  # Unique
        stream.events.add(metadata_id=1, offset_ps=t + 2 * ms, duration_ps=ms)
        conv = stream.events.add(metadata_id=2, offset_ps=t + 4 * ms, duration_ps=ms)
        conv.stats.add(metadata_id=1, str_value="conv/Conv2D:Conv2D")
    out = path / "vm.xplane.pb"
    out.write_bytes(space.SerializeToString())
    return out


def test_an_op_that_launched_gpu_work_ran_on_the_gpu_though_no_kernel_names_it(tmp_path):
    facts = read_capture([tf_gpu_capture(tmp_path)])
    assert facts.steps_from == "step markers" and len(facts.steps) == 3
    by_type = {op.type: op for op in facts.host_ops}
    assert by_type["MatMul"].on_cpu is False  # a cuLaunchKernel inside it
    assert by_type["Conv2D"].on_cpu is False  # a GPU kernel carries its name
    assert by_type["Unique"].on_cpu is True
    assert facts.cpu_ops_s == pytest.approx(3 * 3e-3)


def test_an_eager_loop_evaluated_by_a_tf_function_steps_by_its_eager_ops(tmp_path):
    """10 eager training steps of 10 ms (a MatMul and a Mean each, run eagerly), then an
    evaluation tf.function called 4 times in 2 ms: the steps are the loop's, not the
    evaluation's calls (which span a fiftieth of the capture)."""
    _, _, xspace_class = xspace.classes()
    space = xspace_class()
    host = space.planes.add(id=1, name="/host:CPU")
    names = {
        1: "EagerLocalExecute: MatMul",
        2: "EagerLocalExecute: Mean",
        3: "EagerLocalExecute: __inference_test_step_77",
    }
    for i, name in names.items():
        host.event_metadata[i].id, host.event_metadata[i].name = i, name
    thread = host.lines.add(id=1, name="python", timestamp_ns=0)
    ms = 1_000_000_000  # ps
    for step in range(10):
        thread.events.add(metadata_id=1, offset_ps=step * 10 * ms, duration_ps=4 * ms)
        thread.events.add(metadata_id=2, offset_ps=step * 10 * ms + 5 * ms, duration_ps=ms)
    for call in range(4):
        thread.events.add(metadata_id=3, offset_ps=100 * ms + call * ms // 2, duration_ps=ms // 4)
    path = tmp_path / "vm.xplane.pb"
    path.write_bytes(space.SerializeToString())
    facts = read_capture([path])
    assert (facts.steps_from, facts.step_name, facts.step_count) == (
        "eager op pattern",
        "MatMul",
        10,
    )
    assert facts.median_step_s == pytest.approx(0.010)
