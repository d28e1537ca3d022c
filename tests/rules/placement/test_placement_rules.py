"""placement.no-gpu-kernel, forced-cpu, host-transfers and float64 from small placement facts,
plus the placement section's way through run_rules and the run record."""

from dataclasses import replace

import pytest

from gpuwhy.facts import AuditedFunction, EagerFacts, EagerOpSite, Facts, StepCode
from gpuwhy.fixes.op_groups import PREDICTION_NOTE, size_text
from gpuwhy.record import Record
from gpuwhy.rules import run_rules
from gpuwhy.rules.placement.float64 import Float64
from gpuwhy.rules.placement.forced_cpu import ForcedCpu
from gpuwhy.rules.placement.host_transfers import HostTransfers
from gpuwhy.rules.placement.no_gpu_kernel import NoGpuKernel
from gpuwhy.schema import validation_errors
from tests import builders as b

MiB = 1024**2


def run(rule_cls, facts, **options):
    return rule_cls().check(facts, {**rule_cls.options, **options})


# A healthy step: dense math on the GPU, int32 shape arithmetic kept in host memory on
# purpose, the input batch arriving from tf.data.
CLEAN_GROUPS = (
    b.op_group("MatMul", count=4, locations=("model.py:20",)),
    b.op_group("BiasAdd", count=4),
    b.op_group("Relu", count=3),
    b.op_group("ReadVariableOp", count=8, in_dtypes=("resource",), out_dtypes=("float32",)),
    b.op_group("Shape", reason="gpu-host-memory", in_dtypes=("float32",), out_dtypes=("int32",)),
    b.op_group("StridedSlice", reason="gpu-host-memory", in_dtypes=("int32",), count=2),
    b.op_group(
        "IteratorGetNext", reason="input", in_dtypes=("resource",), out_dtypes=("float32", "int64")
    ),
    b.op_group("Const", reason="follows-consumer", in_dtypes=(), out_dtypes=("int32",)),
)
INPUT_COPIES = (
    b.host_copy(
        "to-device",
        "input",
        src="train_step/x",
        src_op="_Arg",
        dst="train_step/MatMul_0",
        dst_op="MatMul",
        shape=(1024, 784),
    ),
    b.host_copy(
        "to-device",
        "input",
        src="train_step/y",
        src_op="_Arg",
        dst="train_step/Loss",
        dst_op="SparseSoftmaxCrossEntropyWithLogits",
        dtype="int64",
        shape=(1024,),
    ),
)


@pytest.mark.parametrize("rule", [NoGpuKernel, ForcedCpu, HostTransfers, Float64])
def test_clean_placement_is_quiet(rule):
    assert run(rule, b.placement_facts(groups=CLEAN_GROUPS, copies=INPUT_COPIES)) == []


# -- placement.no-gpu-kernel ---------------------------------------------------------------
def test_string_op_without_gpu_kernel_is_named_with_its_location():
    group = b.op_group(
        "StringToHashBucketFast",
        "no-gpu-kernel",
        in_dtypes=("string",),
        out_dtypes=("int64",),
        locations=("train.py:14", "train.py:30"),
    )
    (finding,) = run(NoGpuKernel, b.placement_facts(groups=CLEAN_GROUPS + (group,)))
    assert finding.id == "placement.no-gpu-kernel"
    assert finding.severity == "medium"
    assert finding.title == (
        "1 op in the step has no GPU kernel and runs on the CPU: "
        "StringToHashBucketFast (string, int64) at train.py:14"
    )
    assert finding.location == "train.py:14"
    assert finding.evidence["ops_on_cpu"] == 1
    assert finding.evidence["placement"] == PREDICTION_NOTE
    assert finding.evidence["ops"] == [
        {
            "op": "StringToHashBucketFast",
            "dtypes": "string, int64",
            "count": 1,
            "reason": "no-gpu-kernel",
            "examples": ["train_step/StringToHashBucketFast_0"],
            "locations": ["train.py:14", "train.py:30"],
        }
    ]
    assert "string work belongs in tf.data" in finding.fix
    assert "num_parallel_calls=tf.data.AUTOTUNE" in finding.fix


def test_string_constants_are_not_ops_on_the_cpu():
    # tf.nn.compute_average_loss asserts its batch size: the messages are string Consts
    messages = b.op_group("Const", "no-gpu-kernel-for-dtype", in_dtypes=(), out_dtypes=("string",),
                          count=6, locations=("train.py:52",))  # fmt: skip
    assert run(NoGpuKernel, b.placement_facts(groups=CLEAN_GROUPS + (messages,))) == []


def test_no_kernel_for_dtype_fires_and_suggests_a_cast():
    group = b.op_group(
        "Cumprod",
        "no-gpu-kernel-for-dtype",
        in_dtypes=("int64", "int32"),
        count=2,
        out_dtypes=("int64",),
        locations=("loss.py:7",),
    )
    (finding,) = run(NoGpuKernel, b.placement_facts(groups=[group]))
    assert finding.severity == "medium"
    assert finding.title.startswith(
        "2 ops in the step have no GPU kernel and run on the CPU: Cumprod"
    )
    assert "×2 at loss.py:7" in finding.title
    assert finding.evidence["ops"][0]["reason"] == "no-gpu-kernel-for-dtype"
    assert (
        "# Cumprod on int64, int32: the GPU has kernels for this op in other dtypes;" in finding.fix
    )
    assert "tf.cast(<the tensor>, tf.float32)" in finding.fix


@pytest.mark.parametrize(
    "op",
    [
        "IteratorGetNext",
        "IteratorGetNextAsOptional",
        "OptionalGetValue",
        "MultiDeviceIteratorGetNextFromShard",
        "TensorSliceDataset",
        "AnonymousIteratorV3",
    ],
)
def test_tf_data_iterator_ops_are_the_input_boundary(op):
    group = b.op_group(op, "no-gpu-kernel", in_dtypes=("resource",), out_dtypes=("variant",))
    assert run(NoGpuKernel, b.placement_facts(groups=[group])) == []


def test_ignore_ops_option():
    groups = [
        b.op_group("PyFunc", "no-gpu-kernel"),
        b.op_group("Unique", "no-gpu-kernel-for-dtype"),
    ]
    facts = b.placement_facts(groups=groups)
    assert run(NoGpuKernel, facts, ignore_ops=["PyFunc", "Unique"]) == []
    (finding,) = run(NoGpuKernel, facts, ignore_ops=["PyFunc"])
    assert [row["op"] for row in finding.evidence["ops"]] == ["Unique"]
    assert "py_function" not in finding.fix


def test_variable_on_gpu_used_by_cpu_only_op_is_high():
    groups = [
        b.op_group(
            "ResourceGather",
            "resource-on-gpu-no-kernel",
            in_dtypes=("resource", "string"),
            locations=("embed.py:5",),
        ),
        b.op_group(
            "Cumsum",
            "no-gpu-kernel-for-dtype",
            count=5,
            in_dtypes=("int8",),
            locations=("other.py:1",),
        ),
    ]
    (finding,) = run(NoGpuKernel, b.placement_facts(groups=groups))
    assert finding.severity == "high"
    assert finding.title.startswith("6 ops cannot run where their variable lives: ResourceGather")
    # the failing op sorts first despite its lower count, and gives the location
    assert finding.location == "embed.py:5"
    assert [row["op"] for row in finding.evidence["ops"]] == ["ResourceGather", "Cumsum"]
    assert "with tf.device('/CPU:0'):" in finding.fix
    assert "Cannot assign a device for operation" in finding.fix


def test_op_in_a_loop_is_high():
    group = b.op_group("UniqueV2", "no-gpu-kernel-for-dtype", in_dtypes=("int64",), in_loop=True)
    (finding,) = run(NoGpuKernel, b.placement_facts(groups=[group]))
    assert finding.severity == "high"
    assert finding.evidence["ops"][0]["in_loop"] is True


def test_location_is_the_first_groups_first_location():
    groups = [
        b.op_group(
            "StringSplit",
            "no-gpu-kernel",
            in_dtypes=("string",),
            count=1,
            locations=("small.py:3",),
        ),
        b.op_group("AsString", "no-gpu-kernel", count=7, locations=("big.py:9", "big.py:11")),
    ]
    (finding,) = run(NoGpuKernel, b.placement_facts(groups=groups))
    assert finding.location == "big.py:9"  # most ops first
    assert finding.evidence["ops_on_cpu"] == 8


@pytest.mark.parametrize(
    "op, dtypes, expected, absent",
    [
        (
            "PyFunc",
            ("float32",),
            "tf.py_function / tf.numpy_function run Python on the host",
            "tf.print",
        ),
        ("EagerPyFunc", ("float32",), "tf.py_function / tf.numpy_function", "string work"),
        ("StringLength", ("string",), "string work belongs in tf.data", "py_function"),
        (
            "RegexReplace",
            ("string",),
            "<dataset>.map(lambda text, y: (<your TextVectorization layer>(text), y),",
            "py_function",
        ),
        ("PrintV2", ("string",), "tf.print in the step runs on the host every step", "py_function"),
        ("SparseToDense", ("int64",), "replace it with ops that have", "py_function"),
    ],
)
def test_fix_depends_on_the_kind_of_op(op, dtypes, expected, absent):
    (finding,) = run(
        NoGpuKernel, b.placement_facts(groups=[b.op_group(op, "no-gpu-kernel", in_dtypes=dtypes)])
    )
    assert expected in finding.fix
    assert absent not in finding.fix


@pytest.mark.parametrize("op", ["DecodeJpeg", "EncodePng", "DecodeCompressed"])
def test_codec_ops_are_left_to_compression_cpu_codec(op):
    facts = b.placement_facts(groups=[b.op_group(op, "no-gpu-kernel", in_dtypes=("string",))])
    assert run(NoGpuKernel, facts) == []


def test_colocated_ops_and_copies_they_cause_are_counted():
    groups = [
        b.op_group("PyFunc", "no-gpu-kernel", examples=("train_step/PyFunc",)),
        b.op_group("Identity", "colocated", count=3),
    ]
    copies = [
        b.host_copy(cause="train_step/PyFunc"),
        b.host_copy("to-device", cause="train_step/PyFunc"),
        b.host_copy(cause="train_step/Other"),
        b.host_copy("to-device", "input", cause="train_step/PyFunc"),
    ]
    (finding,) = run(NoGpuKernel, b.placement_facts(groups=groups, copies=copies))
    assert finding.evidence["colocated_ops_moved_with_them"] == 3
    assert finding.evidence["copies_they_cause"] == 2
    assert finding.evidence["ops_on_cpu"] == 1


def test_measured_placement_names_the_gpu():
    group = b.op_group("PyFunc", "no-gpu-kernel")
    facts = b.placement_facts(
        groups=[group], predicted=False, gpu_name="NVIDIA H100 80GB HBM3", compute_capability=(9, 0)
    )
    (finding,) = run(NoGpuKernel, facts)
    assert (
        finding.evidence["placement"] == "seen on this machine's NVIDIA H100 80GB HBM3 (--verify)"
    )


# -- placement.forced-cpu ------------------------------------------------------------------
def test_forced_cpu_fires_only_for_pinned_ops():
    others = [
        b.op_group("PyFunc", "no-gpu-kernel"),
        b.op_group("Identity", "colocated"),
        b.op_group("Shape", "follows-input"),
    ]
    assert run(ForcedCpu, b.placement_facts(groups=CLEAN_GROUPS + tuple(others))) == []


def test_forced_cpu_names_the_tf_device_site_and_bytes_it_copies():
    pinned = [
        b.op_group(
            "ResizeBilinear",
            "forced-cpu",
            in_dtypes=("float32", "int32"),
            count=2,
            requested="CPU",
            examples=("train_step/resize", "train_step/resize_1"),
            locations=("train.py:40",),
        ),
        b.op_group(
            "Mul",
            "forced-cpu",
            count=5,
            examples=("train_step/mul",),
            locations=("train.py:41", "train.py:40"),
        ),
    ]
    copies = [
        b.host_copy("to-host", cause="train_step/resize", shape=(64, 256, 256, 3)),  # 48 MiB
        b.host_copy("to-device", cause="train_step/mul", shape=(64, 224, 224, 3)),
        b.host_copy("to-device", cause="train_step/mul", shape=(None, 224, 224, 3)),  # unknown size
        b.host_copy("to-device", cause="train_step/PyFunc", shape=(1024, 1024)),  # another cause
        b.host_copy("to-device", "input", cause="train_step/resize", shape=(1024, 1024)),
    ]
    (finding,) = run(
        ForcedCpu, b.placement_facts(groups=CLEAN_GROUPS + tuple(pinned), copies=copies)
    )
    assert finding.id == "placement.forced-cpu"
    # 85 MiB a step: its copies alone are a cost (placement.host-transfers leaves them here)
    assert finding.severity == "high"
    assert finding.title.startswith(
        "tf.device('/CPU:0') pins 7 ops that have GPU kernels: Mul (float32) ×5 at train.py:41"
    )
    assert finding.evidence["ops_pinned"] == 7
    assert finding.evidence["tf_device_sites"] == ["train.py:41", "train.py:40"]
    assert finding.evidence["copies_they_cause"] == 3
    assert finding.evidence["bytes_copied_per_step"] == 4 * 64 * 3 * (256 * 256 + 224 * 224)
    assert finding.location == "train.py:41"
    assert "# train.py:41: remove the `with tf.device('/CPU:0'):` block" in finding.fix
    assert "# train.py:40: remove" in finding.fix
    assert "<dataset>.map(<your preprocessing>" in finding.fix


def test_forced_cpu_singular_title_without_site_or_copies():
    pinned = b.op_group("Softmax", "forced-cpu")
    (finding,) = run(ForcedCpu, b.placement_facts(groups=[pinned]))
    assert finding.title == "tf.device('/CPU:0') pins 1 op that has GPU kernels: Softmax (float32)"
    assert finding.location is None
    assert "tf_device_sites" not in finding.evidence
    assert "copies_they_cause" not in finding.evidence
    assert "bytes_copied_per_step" not in finding.evidence
    assert finding.fix.startswith(
        "# remove the `with tf.device('/CPU:0'):` block around these ops (see `ops` above)"
    )


def test_forced_cpu_copies_of_unknown_size_have_no_byte_total():
    pinned = b.op_group("Softmax", "forced-cpu", examples=("train_step/softmax",))
    copies = [b.host_copy(cause="train_step/softmax", shape=(None, 10))]
    (finding,) = run(ForcedCpu, b.placement_facts(groups=[pinned], copies=copies))
    assert finding.evidence["copies_they_cause"] == 1
    assert "bytes_copied_per_step" not in finding.evidence


def test_forced_cpu_ignore_ops():
    pinned = [b.op_group("ResourceGather", "forced-cpu", count=2), b.op_group("Mul", "forced-cpu")]
    facts = b.placement_facts(groups=pinned)
    (finding,) = run(ForcedCpu, facts, ignore_ops=["ResourceGather"])
    assert finding.evidence["ops_pinned"] == 1
    assert run(ForcedCpu, facts, ignore_ops=["ResourceGather", "Mul"]) == []


# -- placement.host-transfers --------------------------------------------------------------
def _scalar_copies(n=30):
    """int32 shape arithmetic TF keeps in host memory: scalar copies, by design."""
    return [
        b.host_copy(
            "to-device",
            src=f"train_step/strided_slice_{i}",
            src_op="StridedSlice",
            dst=f"train_step/Reshape_{i}",
            dst_op="Reshape",
            dtype="int32",
            shape=(),
        )
        for i in range(n)
    ]


def test_int32_shape_arithmetic_and_the_input_batch_are_not_reported():
    copies = (
        _scalar_copies(30)
        + [b.host_copy("to-device", dtype="int32", shape=(4,))]
        + list(INPUT_COPIES)
    )
    assert all(c.bytes is not None and c.bytes < 1024 for c in copies if c.kind == "step")
    assert run(HostTransfers, b.placement_facts(groups=CLEAN_GROUPS, copies=copies)) == []


def test_many_sizeable_copies_fire():
    sizeable = [
        b.host_copy(
            src=f"train_step/grad_{i}",
            shape=(256, 4),
            cause="train_step/PyFunc",
            location="train.py:50",
        )
        for i in range(17)
    ]  # 4 KiB each
    copies = sizeable + _scalar_copies(5) + list(INPUT_COPIES)
    (finding,) = run(HostTransfers, b.placement_facts(copies=copies))
    assert finding.id == "placement.host-transfers"
    assert finding.severity == "medium"
    assert (
        finding.title == "Each call copies 17 tensors between host and GPU (68.0 KiB of known size)"
    )
    assert finding.evidence["copies_per_step"] == 17
    assert finding.evidence["bytes_per_step_known"] == 17 * 4096
    assert finding.evidence["small_copies_not_counted"] == 5
    assert finding.evidence["input_batch_copies"] == 2
    assert finding.evidence["copies_inside_loops"] == 0
    assert len(finding.evidence["largest"]) == 10
    assert finding.evidence["largest"][0] == {
        "direction": "to-host",
        "tensor": "train_step/grad_0 (BiasAdd) -> train_step/PyFunc (PyFunc)",
        "dtype": "float32",
        "shape": [256, 4],
        "bytes": 4096,
        "location": "train.py:50",
    }
    assert finding.location == "train.py:50"
    assert finding.fix == (
        "# train_step/PyFunc at train.py:50: the op runs on the CPU: replace it with TF ops "
        "that have GPU kernels"
    )
    # 16 is the limit, not above it
    assert run(HostTransfers, b.placement_facts(copies=sizeable[:16])) == []


def test_large_bytes_per_step_are_high():
    copies = [
        b.host_copy(shape=(4096, 4096), cause="train_step/clip", location="train.py:60"),  # 64 MiB
        b.host_copy("to-device", shape=(1024,), cause="train_step/clip"),
    ]  # 4 KiB
    (finding,) = run(HostTransfers, b.placement_facts(copies=copies))
    assert finding.severity == "high"
    assert finding.evidence["bytes_per_step_known"] == 64 * MiB + 4096
    assert (
        finding.title == "Each call copies 2 tensors between host and GPU (64.0 MiB of known size)"
    )
    assert finding.location == "train.py:60"  # the largest first
    # exactly 64 MiB is not above the limit
    assert run(HostTransfers, b.placement_facts(copies=copies[:1])) == []


def test_a_sizeable_copy_in_a_loop_fires():
    copy = b.host_copy(
        shape=(128, 128), in_loop=True, location="decode.py:8", cause="train_step/while/PyFunc"
    )
    (finding,) = run(HostTransfers, b.placement_facts(copies=[copy] + _scalar_copies(3)))
    assert finding.severity == "medium"
    assert finding.title == (
        "Each call copies 1 tensor between host and GPU (64.0 KiB of known size), "
        "1 inside a loop (paid every iteration)"
    )
    assert finding.evidence["copies_inside_loops"] == 1
    assert finding.evidence["largest"][0]["in_loop"] is True
    # a scalar loop counter in the loop does not count
    counter = b.host_copy(dtype="int32", shape=(), in_loop=True)
    assert run(HostTransfers, b.placement_facts(copies=[counter])) == []


def test_many_copies_with_one_in_a_loop_are_high():
    copies = [b.host_copy(src=f"train_step/t{i}", shape=(16, 16)) for i in range(17)]
    copies.append(b.host_copy(shape=(16, 16), in_loop=True, location="loop.py:3"))
    (finding,) = run(HostTransfers, b.placement_facts(copies=copies))
    assert finding.severity == "high"
    assert finding.location == "loop.py:3"  # loop copies sort first
    assert finding.evidence["largest"][0]["in_loop"] is True


def test_copies_of_unknown_size_count_unless_scalar():
    unknown = [b.host_copy(src=f"train_step/t{i}", shape=(None, 128)) for i in range(10)]
    unknown += [b.host_copy(src=f"train_step/u{i}", shape=None) for i in range(7)]
    assert all(c.bytes is None for c in unknown)
    (finding,) = run(HostTransfers, b.placement_facts(copies=unknown))
    assert finding.evidence["copies_per_step"] == 17
    assert finding.evidence["copies_of_unknown_size"] == 17
    assert finding.evidence["bytes_per_step_known"] == 0
    assert finding.title == "Each call copies 17 tensors between host and GPU"
    scalars = [b.host_copy(src=f"train_step/s{i}", shape=(), bytes=None) for i in range(20)]
    assert run(HostTransfers, b.placement_facts(copies=scalars)) == []


def test_host_transfer_thresholds_are_options():
    copies = [b.host_copy(src=f"train_step/t{i}", shape=(64,)) for i in range(3)]  # 256 B each
    facts = b.placement_facts(copies=copies)
    assert run(HostTransfers, facts) == []
    (finding,) = run(HostTransfers, facts, min_copy_bytes=256, max_copies_per_step=2)
    assert finding.evidence["copies_per_step"] == 3 and finding.severity == "medium"
    (finding,) = run(HostTransfers, facts, min_copy_bytes=1, max_bytes_per_step=512)
    assert finding.severity == "high"
    assert finding.evidence["bytes_per_step_known"] == 768
    big = b.placement_facts(copies=[b.host_copy(shape=(4096, 4096, 2))])  # 128 MiB
    assert run(HostTransfers, big, max_bytes_per_step=256 * MiB) == []


# -- placement.float64 ---------------------------------------------------------------------
def test_float64_data_movement_alone_is_not_reported():
    moves = [
        b.op_group("Cast", in_dtypes=("float64",), out_dtypes=("float32",), count=2),
        b.op_group("Identity", in_dtypes=("float64",)),
        b.op_group("Const", "follows-consumer", in_dtypes=(), out_dtypes=("float64",)),
        b.op_group("ReadVariableOp", in_dtypes=("resource",), out_dtypes=("float64",)),
    ]
    assert run(Float64, b.placement_facts(groups=CLEAN_GROUPS + tuple(moves))) == []


def test_float64_elementwise_math_is_medium():
    groups = [
        b.op_group("Cast", in_dtypes=("float32",), out_dtypes=("float64",)),
        b.op_group("Mul", in_dtypes=("float64",), count=3, locations=("physics.py:22",)),
        b.op_group("Tanh", in_dtypes=("float64",), count=2, locations=("physics.py:23",)),
    ]
    (finding,) = run(Float64, b.placement_facts(groups=CLEAN_GROUPS + tuple(groups)))
    assert finding.id == "placement.float64"
    assert finding.severity == "medium"
    assert finding.title == (
        "5 float64 ops in the step: Mul (float64) ×3 at physics.py:22, "
        "Tanh (float64) ×2 at physics.py:23"
    )
    assert finding.evidence["float64_ops"] == 5
    assert finding.evidence["float64_matmuls_and_convs"] == 0
    assert finding.evidence["float64_ops_on_cpu"] == 0
    assert [row["op"] for row in finding.evidence["ops"]] == ["Mul", "Tanh"]
    assert finding.location == "physics.py:22"
    assert "keras.config.set_floatx('float32')" in finding.fix
    assert "tf.cast(x, tf.float32)" in finding.fix


def test_float64_s_fix_names_the_numpy_arrays_the_program_makes_float64(tmp_path):
    """A PyDataset's batches made with np.empty (float64 unless told) in a module of the
    program's: the fix is those calls as written, made float32, not placeholders."""
    from gpuwhy.facts import PipelineFacts, PipelineStage, ProgramFacts, TfDataFacts

    classes = tmp_path / "my_classes.py"
    classes.write_text(
        "import numpy as np\n\n\nclass Gen:\n    def __getitem__(self, i):\n"
        "        X = np.empty((self.batch_size, *self.dim))\n"
        "        y = np.empty((self.batch_size), dtype=int)\n"
        "        noise = np.random.normal(0, 1, size=(4, 4))\n"
        "        return X + noise.sum(), y\n"
    )
    script = tmp_path / "train.py"
    script.write_text("from my_classes import Gen\nmodel.fit(Gen(), epochs=2)\n")
    stage = PipelineStage("Generator", "generator", ("from_generator",), f"{script}:2",
                          function="Gen.__getitem__", function_location=f"{classes}:5")  # fmt: skip
    groups = [b.op_group("Equal", in_dtypes=("float64",), count=2, locations=(f"{script}:2",))]
    facts = replace(
        b.placement_facts(groups=CLEAN_GROUPS + tuple(groups)),
        program=ProgramFacts(command=(str(script),)),
        tfdata=TfDataFacts(pipelines=(PipelineFacts(1, stages=(stage,)),)),
    )
    (finding,) = run(Float64, facts)
    assert "<features>" not in finding.fix and "<dataset>" not in finding.fix
    assert finding.fix.splitlines()[-4:] == [
        f"# {classes}:6: in place of: np.empty((self.batch_size, *self.dim))",
        "np.empty((self.batch_size, *self.dim), dtype='float32')",
        f"# {classes}:8: in place of: np.random.normal(0, 1, size=(4, 4))",
        "np.random.normal(0, 1, size=(4, 4)).astype('float32')",
    ]  # the int array is left as it is
    # no such call in the program's files: the placeholders, as before
    script.write_text("model.fit(data, epochs=2)\n")
    bare = replace(facts, tfdata=None)
    (placeheld,) = run(Float64, bare)
    assert "<features> = <features>.astype('float32')" in placeheld.fix


def test_float64_from_keras_float_type_points_at_the_program_s_set_floatx():
    groups = [b.op_group("MatMul", in_dtypes=("float64",), count=2, locations=("train.py:30",))]
    set_at = {"floatx_set_at": "train.py:4", "floatx_written": "keras.config.set_floatx('float64')"}
    (finding,) = run(Float64, b.placement_facts(groups=groups, keras_floatx="float64", **set_at))
    assert finding.location == "train.py:4"
    assert finding.title.endswith("; Keras' float type is float64 (set at train.py:4)")
    assert finding.evidence["floatx_set_at"] == "train.py:4"
    assert finding.fix.splitlines()[0] == (
        "keras.config.set_floatx('float32')   # at train.py:4, in place of "
        "keras.config.set_floatx('float64')"
    )
    assert "<features>" not in finding.fix
    # float64 by Keras' config file, not a call in the program: said, and the op's line kept
    (unset,) = run(Float64, b.placement_facts(groups=groups, keras_floatx="float64"))
    assert unset.location == "train.py:30"
    assert unset.title.endswith("; Keras' float type is float64")
    assert 'tf.keras.backend.set_floatx("float32")' in unset.fix and "keras.json" in unset.fix
    # Keras' float type float32: the float64 is the program's own, the fix as before
    (own,) = run(Float64, b.placement_facts(groups=groups, keras_floatx="float32"))
    assert own.location == "train.py:30" and "Keras' float type" not in own.title
    assert "set_floatx" not in own.fix  # Keras' float type is not the cause: not offered


def test_float64_matmul_is_high_and_listed_first():
    groups = [
        b.op_group("AddV2", in_dtypes=("float64",), count=9),
        b.op_group("MatMul", in_dtypes=("float64",), count=2, locations=("model.py:8",)),
        b.op_group("Conv2DBackpropFilter", in_dtypes=("float64", "int32"), out_dtypes=("float64",)),
        b.op_group("Cumprod", "no-gpu-kernel-for-dtype", in_dtypes=("float64",)),
    ]
    (finding,) = run(Float64, b.placement_facts(groups=groups))
    assert finding.severity == "high"
    assert finding.title.startswith("13 float64 ops in the step: MatMul (float64) ×2 at model.py:8")
    assert finding.evidence["float64_matmuls_and_convs"] == 3
    assert finding.evidence["float64_ops_on_cpu"] == 1
    assert finding.location == "model.py:8"


def test_float64_min_ops():
    facts = b.placement_facts(groups=[b.op_group("Mul", in_dtypes=("float64",), count=3)])
    assert len(run(Float64, facts)) == 1
    assert len(run(Float64, facts, min_ops=3)) == 1
    assert run(Float64, facts, min_ops=4) == []


def test_float64_title_singular():
    (finding,) = run(
        Float64, b.placement_facts(groups=[b.op_group("Sqrt", in_dtypes=("float64",))])
    )
    assert finding.title == "1 float64 op in the step: Sqrt (float64)"
    assert finding.location is None


def _eager(*sites, sampled=20):
    return Facts(eager=EagerFacts(sampled, 40 * sampled, per_step=40.0, sites=tuple(sites)))


def test_an_eager_step_s_float64_compute_is_read_from_the_eager_ops_as_they_ran():
    """No tf.function: no placement audit. The eager op counter's sampled steps hold the
    ops' output dtypes: float64 matmuls are high, the variables' reads and the
    batch's conversion are data, a scalar's math costs its launch."""
    sites = (
        EagerOpSite("AddV2", "loop.py:20", 40, 64, "CPU:0", "float64"),
        EagerOpSite("MatMul", "loop.py:18", 60, 8192, "CPU:0", "float64"),
        EagerOpSite("MatMul", "loop.py:30", 200, 8192, "CPU:0", "float32"),
        EagerOpSite("ReadVariableOp", "loop.py:18", 80, 8192, "CPU:0", "float64"),
        EagerOpSite("Mul", "loop.py:21", 20, 1, "CPU:0", "float64"),
    )
    (finding,) = run(Float64, _eager(*sites))
    assert finding.severity == "high" and finding.location == "loop.py:18"
    assert finding.title == (
        "~5 float64 ops per step, run eagerly: MatMul ×3 at loop.py:18, AddV2 ×2 at loop.py:20"
    )
    assert finding.evidence["sampled_steps"] == 20
    assert [row["op"] for row in finding.evidence["ops"]] == ["MatMul", "AddV2"]
    assert "astype('float32')" in (finding.fix or "")


def test_eager_float64_without_sampled_steps_or_below_min_ops_is_not_reported():
    site = EagerOpSite("AddV2", "loop.py:20", 10, 64, "CPU:0", "float64")
    assert run(Float64, _eager(site, sampled=0)) == []  # set-up's ops, not the step's
    assert run(Float64, _eager(site), min_ops=1) == []  # half an op per step
    assert run(Float64, _eager(replace(site, dtype="float32"))) == []
    # a traced step's float64 is the audit's to report: read first
    traced = b.placement_facts(groups=(b.op_group("Tanh", in_dtypes=("float64",), count=2),))
    both = replace(traced, eager=_eager(site).eager)
    (finding,) = run(Float64, both)
    assert finding.title.startswith("2 float64 ops in the step")


def test_eager_float64_with_no_step_found_is_read_in_the_loop_s_code_per_second():
    """A loop over NumPy slices (no tf.data, no tf.function): no training step is found,
    but the eager counter read the loop's code (lines 25-28 issue its ops). Its float64
    ops there are the loop's, per second of the run; the set-up's (line 12) are not."""
    sites = (
        EagerOpSite("MatMul", "loop.py:26", 347, 50, "CPU:0", "float64"),
        EagerOpSite("Mul", "loop.py:28", 1040, 50, "CPU:0", "float64"),
        EagerOpSite("RandomStandardNormal", "loop.py:12", 5000, 1000, "CPU:0", "float64"),
    )
    code = StepCode(None, "loop.py:22", "def train_step(xb, yb):", moved=(25, 28), part=True)
    eager = EagerFacts(0, 6387, sites=sites, step_code=code, counted_s=1.0)
    (finding,) = run(Float64, Facts(eager=eager))
    assert finding.severity == "high" and finding.location == "loop.py:26"
    assert finding.title == (
        "~1,387 float64 ops a second in the training code at loop.py:25-28, run eagerly: "
        "MatMul at loop.py:26, Mul at loop.py:28"
    )
    assert finding.evidence["training_code"] == "loop.py:25-28"
    assert run(Float64, Facts(eager=replace(eager, step_code=None))) == []  # no loop read


# -- the placement section through run_rules and the record ----------------------------------
def _audited_facts():
    groups = CLEAN_GROUPS + (
        b.op_group(
            "PyFunc", "no-gpu-kernel", examples=("train_step/PyFunc",), locations=("train.py:30",)
        ),
        b.op_group("Mul", in_dtypes=("float64",), count=2),
    )
    copies = list(INPUT_COPIES) + [
        b.host_copy(cause="train_step/PyFunc", location="train.py:30"),
        b.host_copy("to-device", cause="train_step/PyFunc", location="train.py:30"),
    ]
    tensor_ops = [
        b.tensor_op(location="model.py:20"),
        b.tensor_op(dims={"m": 256, "n": 3001, "k": 1024}, dtype="float16", layer="head"),
    ]
    return b.placement_facts(
        groups=groups,
        copies=copies,
        tensor_ops=tensor_ops,
        tf32_enabled=True,
        mixed_precision_policy="float32",
    )


def test_run_rules_on_placement_only_facts():
    findings, not_checked = run_rules(_audited_facts())
    ids = [f.id for f in findings]
    assert ids == [
        "placement.float64",
        "placement.no-gpu-kernel",
        "tensorcore.misaligned",
        "tensorcore.unused",
    ]
    assert [f.severity for f in findings] == ["medium", "medium", "low", "low"]
    for rule_id in (
        "placement.no-gpu-kernel",
        "placement.forced-cpu",
        "placement.host-transfers",
        "placement.float64",
        "compression.cpu-codec",
        "tensorcore.unused",
        "tensorcore.misaligned",
    ):
        assert rule_id not in not_checked
    assert not_checked["env.no-gpu"] == "needs environment"
    assert not_checked["env.allocator-settings"] == "needs environment"
    assert not_checked["env.gpu-shared"] == "needs devices"
    assert not_checked["env.ptx-jit"] == "needs environment, devices"
    assert not_checked["input.bound"] == "needs steps or capture"
    assert not_checked["input.sequential-map"] == "needs tfdata"


def test_audit_record_validates_and_round_trips():
    facts = _audited_facts()
    record = Record.diagnose("audit", facts)
    data = record.to_dict()
    assert validation_errors(data) == []
    assert data["command"] == "audit"
    assert data["environment"] is None and data["devices"] is None
    assert data["verdict"]["gpu_usable"] is None
    text = data["verdict"]["text"]
    assert text.startswith(
        "Predicted for a GPU machine (none here): 21 of 27 ops compute on the GPU, 3 on the CPU, "
        "3 in host memory by design; worst: "
    )
    assert text.endswith("; worst: " + record.findings[0].title)
    loaded = Record.from_dict(data)
    assert loaded.facts == facts
    assert loaded.findings == record.findings
    assert loaded.not_checked == record.not_checked
    assert loaded.recheck().findings == record.findings


def test_measured_audit_with_every_field_set_validates():
    facts = b.placement_facts(
        groups=[
            b.op_group("MatMul", locations=("m.py:1",), requested="GPU"),
            b.op_group("Identity", "colocated", colocated_with="train_step/PyFunc"),
        ],
        copies=[
            b.host_copy(shape=(None, 3), in_loop=True, location="m.py:2", cause="x", consumers=2)
        ],
        tensor_ops=[
            b.tensor_op(
                dims={"m": None, "n": 8, "k": 8},
                in_loop=True,
                jit_compile=True,
                gradient=True,
                location="m.py:3",
            )
        ],
        predicted=False,
        compute_capability=(8, 0),
        gpu_name="NVIDIA A100-SXM4-40GB",
        tf32_enabled=False,
        seconds=1.5,
    )
    record = Record.diagnose("audit", facts)
    data = record.to_dict()
    assert validation_errors(data) == []
    assert data["verdict"]["text"].startswith("Seen on NVIDIA A100-SXM4-40GB: ")
    loaded = Record.from_dict(data)
    assert loaded.facts == facts
    assert loaded.facts.placement.compute_capability == (8, 0)
    assert loaded.findings == record.findings


def test_empty_placement_has_nothing_to_report():
    record = Record.diagnose("audit", Facts(placement=b.placement()))
    assert record.findings == []
    assert (
        record.verdict
        == "Predicted for a GPU machine (none here): 0 of 0 ops compute on the GPU, 0 on the CPU; no placement problems found."
    )


def test_string_ops_only_in_an_evaluate_function_are_low():
    from gpuwhy.rules.placement.no_gpu_kernel import NoGpuKernel

    train, export = "train_step (train.py:40)", "multi_step_on_iterator (train.py:55)"
    strings = b.op_group(
        "StaticRegexReplace",
        reason="no-gpu-kernel",
        in_dtypes=("string",),
        count=4,
        locations=("train.py:55",),
        functions=(export,),
    )
    ops = [b.tensor_op(function=train, gradient=True)]
    facts = b.placement_facts(groups=[strings], tensor_ops=ops)
    (f,) = NoGpuKernel().check(facts, dict(NoGpuKernel.options))
    assert f.severity == "low"
    assert f.title == (
        "4 ops have no GPU kernel and run on the CPU: StaticRegexReplace (string) ×4 "
        f"at train.py:55; in {export}, not the training step"
    )  # not "in the step", then "not the training step"
    assert f.estimated_gain == (
        f"removes a host round trip from each call of {export}; the training step does not "
        "wait on them"
    )
    # a model taking raw strings, evaluated once (an export model): no template of what
    # the training already does, no placeholders
    assert f.fix.startswith(f"# {export} is not the training step")
    assert "<" not in f.fix and "TextVectorization layer" not in f.fix
    in_training = b.placement_facts(groups=[replace(strings, functions=(train,))], tensor_ops=ops)
    (g,) = NoGpuKernel().check(in_training, dict(NoGpuKernel.options))
    assert g.severity == "medium"
    assert "<your TextVectorization layer>" in g.fix


# -- what makes a copy: its cause, TF's int32 memory types, data entering the step ---------


def _metric_int32_copies(replicas=2):
    """A Keras accuracy metric's int32 compare (BitwiseAnd on the GPU -> Less, whose GPU
    kernel keeps int32 in host memory) and its bool result back, per replica, in a loop."""
    edges = (  # (direction, from, to, dtype, shape)
        ("to-host", "BitwiseAnd", "Less", "int32", (32, 10)),
        ("to-device", "Less", "LogicalAnd", "bool", (32, 40)),
    )
    return [
        b.host_copy(
            direction,
            src=f"step/replica_{r}/{src}",
            src_op=src,
            dst=f"step/replica_{r}/{dst}",
            dst_op=dst,
            dtype=dtype,
            shape=shape,
            in_loop=True,
            cause=f"step/replica_{r}/Less",
            cause_op="Less",
            cause_reason="gpu-host-memory",
        )
        for r in range(replicas)
        for direction, src, dst, dtype, shape in edges
    ]


def test_int32_edges_tf_keeps_in_host_memory_count_by_their_bytes_only():
    copies = _metric_int32_copies(4)  # 8 tensors, 10 KiB, all in a loop
    assert all(c.sizeable() for c in copies)
    assert run(HostTransfers, b.placement_facts(copies=copies)) == []
    # 64 MiB of them is a cost whatever made them, and the fix says how XLA avoids it
    huge = [replace(c, shape=(4096, 4096), bytes=64 * MiB) for c in copies[:2]]
    (finding,) = run(HostTransfers, b.placement_facts(copies=huge))
    assert finding.severity == "high"
    assert finding.evidence["copies_per_step"] == 2
    assert "TF's GPU kernel for Less keeps its int32 tensors in host memory" in finding.fix
    assert finding.fix.endswith("@tf.function(jit_compile=True)\ndef train_step(...):")
    fit = AuditedFunction(name="multi_step_on_iterator", nodes=1, gpu=1, host=0, cpu=0)
    keras_step = b.placement_facts(copies=huge, functions=(fit,))
    (finding,) = run(HostTransfers, keras_step)
    assert finding.fix.endswith("model.compile(<your compile arguments>, jit_compile=True)")


def test_int32_edges_next_to_copies_of_its_own_are_set_apart_in_the_evidence():
    own = [
        b.host_copy(src=f"step/g{i}", shape=(256, 4), in_loop=True, cause=f"step/Write_{i}",
                    cause_op="WriteHistogramSummary", cause_reason="host-by-design",
                    location="train.py:30")
        for i in range(2)
    ]  # fmt: skip
    (finding,) = run(HostTransfers, b.placement_facts(copies=own + _metric_int32_copies(1)))
    assert finding.evidence["copies_per_step"] == 2
    assert finding.evidence["host_memory_by_design_not_counted"]["copies"] == 2
    assert finding.fix.startswith(
        "# step/Write_0 at train.py:30: WriteHistogramSummary runs on the host by design: run it "
        "every N steps"
    )
    assert "input" not in finding.fix and "<dataset>" not in finding.fix


def _ctc_facts(copies=18):
    """A CPU-only CTCLoss: its inputs to the host, its loss and gradient back."""
    group = b.op_group(
        "CTCLoss",
        reason="no-gpu-kernel",
        in_dtypes=("float32", "int64", "int32"),
        out_dtypes=("float32",),
        examples=("train_step/CTCLoss",),
        locations=("asr.py:40",),
    )
    made = [
        b.host_copy(src=f"train_step/t{i}", shape=(50, 16, 28), cause="train_step/CTCLoss",
                    cause_op="CTCLoss", cause_reason="no-gpu-kernel", location="asr.py:40")
        for i in range(copies)
    ]  # fmt: skip
    return b.placement_facts(groups=CLEAN_GROUPS + (group,), copies=made + list(INPUT_COPIES))


def test_copies_an_op_without_gpu_kernel_makes_are_said_with_it_not_apart():
    facts = _ctc_facts()
    assert run(HostTransfers, facts) == []
    (cause,) = run(NoGpuKernel, facts)
    assert cause.evidence["copies_they_cause"] == 18
    assert cause.evidence["bytes_copied_per_step"] == 18 * 50 * 16 * 28 * 4
    findings, _ = run_rules(facts)
    placement = [f.id for f in findings if f.id.startswith("placement.")]
    assert placement == ["placement.no-gpu-kernel"]


def test_host_by_design_ops_are_not_a_missing_gpu_kernel():
    groups = CLEAN_GROUPS + (
        b.op_group("AnonymousMultiDeviceIteratorV3", reason="host-by-design", in_dtypes=(),
                   out_dtypes=("resource",)),
        b.op_group("WriteScalarSummary", reason="host-by-design",
                   in_dtypes=("resource", "int64", "string", "float32"), out_dtypes=()),
        b.op_group("PrintV2", reason="host-by-design", in_dtypes=("string",), out_dtypes=()),
    )  # fmt: skip
    assert run(NoGpuKernel, b.placement_facts(groups=groups)) == []


def test_float64_data_that_only_enters_the_step_is_low_with_the_bytes_it_adds():
    iterator = b.op_group(
        "IteratorGetNext",
        reason="host-by-design",
        in_dtypes=("resource",),
        out_dtypes=("float64",),
        locations=("train.py:12",),
    )
    cast = b.op_group("Cast", in_dtypes=("float64",), out_dtypes=("float32",), count=2)
    entering = [
        replace(c, dtype="float64", bytes=2 * c.bytes) for c in INPUT_COPIES
    ]  # the batch, twice float32's bytes
    facts = b.placement_facts(groups=CLEAN_GROUPS + (iterator, cast), copies=entering)
    (finding,) = run(Float64, facts)
    assert finding.severity == "low"
    added = sum(c.bytes for c in entering) // 2
    assert finding.evidence["bytes_added_per_step"] == added
    assert finding.title == (
        "The step's input arrives as float64 and is cast to float32 at once: "
        f"{size_text(added)} more per step than float32; no float64 compute"
    )
    assert "astype('float32')" in finding.fix
    assert finding.location == "train.py:12"
    # float64 math on the same data stays a finding of its own
    math = b.op_group("Mul", in_dtypes=("float64",), locations=("train.py:20",))
    facts = b.placement_facts(groups=CLEAN_GROUPS + (iterator, cast, math), copies=entering)
    (finding,) = run(Float64, facts)
    assert finding.severity == "medium"
    assert "IteratorGetNext" not in finding.title


def test_float64_arrays_the_caller_gives_are_located_where_the_program_makes_them(tmp_path):
    """train_on_batch(np.random.normal(...)): no iterator makes the input, so no op says
    where it comes from; the finding points at the NumPy call that makes it float64."""
    from gpuwhy.facts import ProgramFacts

    script = tmp_path / "gan.py"
    script.write_text("import numpy as np\n\nz = np.random.normal(size=(20, 32))\n")
    entering = [replace(c, dtype="float64", bytes=2 * c.bytes) for c in INPUT_COPIES]
    placed = b.placement_facts(groups=CLEAN_GROUPS, copies=entering)
    facts = replace(placed, program=ProgramFacts(command=(str(script),)))
    (finding,) = run(Float64, facts)
    assert finding.location == f"{script}:3"
    assert "np.random.normal(size=(20, 32)).astype('float32')" in finding.fix


def test_an_ops_copies_are_matched_by_kind_beyond_its_five_examples():
    group = b.op_group(
        "PyFunc", reason="no-gpu-kernel", count=40, examples=("train_step/PyFunc_0",)
    )
    copies = [
        b.host_copy(src=f"train_step/t{i}", shape=(512, 1024, 32), cause=f"train_step/PyFunc_{i}",
                    cause_op="PyFunc", cause_reason="no-gpu-kernel")
        for i in range(40)
    ]  # fmt: skip
    facts = b.placement_facts(groups=CLEAN_GROUPS + (group,), copies=copies)
    (finding,) = run(NoGpuKernel, facts)
    assert finding.evidence["copies_they_cause"] == 40
    assert finding.severity == "high"  # 2.5 GiB a step
    assert run(HostTransfers, facts) == []


def test_float64_scalars_cost_a_launch_and_are_not_float64_compute():
    # tf.nn.ctc_loss takes the log of a float64 scalar: no float64 work to speak of
    scalar_log = b.op_group("Log", in_dtypes=("float64",), float64_elements=1)
    assert run(Float64, b.placement_facts(groups=CLEAN_GROUPS + (scalar_log,))) == []
    sized = replace(scalar_log, float64_elements=320_000)  # a [32, 10000] batch of logits
    unknown = replace(scalar_log, float64_elements=None)
    for group in (sized, unknown):
        (finding,) = run(Float64, b.placement_facts(groups=CLEAN_GROUPS + (group,)))
        assert finding.severity == "medium"


def test_float64_ops_on_label_sized_tensors_are_low():
    """One-hot labels (keras.utils.to_categorical returns float64) meeting an accuracy
    metric's argmax in fit's step: [None, 10] tensors, a kernel launch's work on any GPU
    in float64 or not. Low, saying how small; a row or a tensor past the bounds stays
    medium, and a matmul stays high whatever its size."""
    labels = [
        b.op_group(op, in_dtypes=("float64",), locations=("train.py:22",),
                   float64_elements=None, float64_row_elements=10)
        for op in ("ArgMax", "Equal")
    ]  # fmt: skip
    (finding,) = run(Float64, b.placement_facts(groups=CLEAN_GROUPS + tuple(labels)))
    assert finding.severity == "low"
    assert finding.title.endswith("; each on at most 10 float64 values a batch row")
    assert finding.evidence["float64_values_at_most"] == 10
    assert finding.evidence["float64_values_per"] == "batch row"
    assert finding.estimated_gain.startswith("little at this size")
    logits = replace(labels[0], float64_elements=320, float64_row_elements=10)  # [32, 10]
    (known,) = run(Float64, b.placement_facts(groups=CLEAN_GROUPS + (logits,)))
    assert known.severity == "low" and known.title.endswith("at most 320 float64 values")
    wide = replace(labels[1], float64_row_elements=4096)  # a [None, 4096] activation
    (mixed,) = run(Float64, b.placement_facts(groups=CLEAN_GROUPS + (labels[0], wide)))
    assert mixed.severity == "medium" and "at most" not in mixed.title
    matmul = replace(labels[0], op="MatMul", float64_elements=64)
    (heavy,) = run(Float64, b.placement_facts(groups=CLEAN_GROUPS + (matmul,)))
    assert heavy.severity == "high"


def test_ops_in_the_step_and_its_evaluation_are_counted_in_each_function_named():
    """One string op in train_step and one in eval_step is two ops, one in each: the
    title names both functions rather than counting both into "the step"."""
    functions = ("train_step (text.py:31)", "eval_step (text.py:38)")
    split = b.op_group("StringSplitV2", "no-gpu-kernel", in_dtypes=("string",), count=2)
    both = b.placement_facts(groups=[replace(split, functions=functions)])
    (f,) = run(NoGpuKernel, both)
    assert f.title.startswith("2 ops in eval_step and train_step have no GPU kernel")
    one = b.placement_facts(groups=[replace(split, functions=functions[:1])])
    (g,) = run(NoGpuKernel, one)
    assert g.title.startswith("2 ops in the step have no GPU kernel")
