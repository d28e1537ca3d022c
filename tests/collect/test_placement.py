"""The placement audit against real TensorFlow programs (no mocks).

Every function here is only traced (plus one small run for ``verify``), so the whole
module costs one TensorFlow import and a second or two of tracing. Locations are
checked exactly: the line of each op that must be named carries a ``# @marker``
comment and :func:`_site` finds it.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

tf = pytest.importorskip("tensorflow")

from gpuwhy.collect.placement import AuditTarget, audit_functions  # noqa: E402
from gpuwhy.facts import PlacementFacts, from_dict, to_dict  # noqa: E402
from gpuwhy.modes.audit import AuditError, audit, audit_path  # noqa: E402
from gpuwhy.tfapi.kernel_registry import KernelRegistry  # noqa: E402
from tests import markers  # noqa: E402

HAS_GPU = bool(tf.config.list_physical_devices("GPU"))
FLOATS = {"float16", "bfloat16", "float32", "float64"}
BAD_REASONS = {
    "no-gpu-kernel",
    "no-gpu-kernel-for-dtype",
    "forced-cpu",
    "colocated",
    "resource-on-gpu-no-kernel",
}


_site = markers.marker_lines(__file__)


def _run_audit(function, *args, **options):
    """Trace ``function`` with ``args`` and audit it; return (facts, the one AuditedGraph)."""
    concrete = function.get_concrete_function(*args)
    facts, audited = audit_functions(
        [AuditTarget(function.python_function.__name__, concrete, None, args)], **options
    )
    assert len(audited) == 1
    return facts, audited[0]


def _groups(facts: PlacementFacts, op: str) -> list:
    return [g for g in facts.groups if g.op == op]


def _group(facts: PlacementFacts, op: str, **where):
    found = [g for g in _groups(facts, op) if all(getattr(g, k) == v for k, v in where.items())]
    assert len(found) == 1, f"{op} {where}: {[g for g in facts.groups if g.op == op]}"
    return found[0]


def _nodes(audited, op: str) -> list:
    return [n for n in audited.placed.flat.nodes if n.op == op and n.role == "op"]


# ---------------------------------------------------------------------------
# The programs. Built once per module: tracing is the slow part.


@pytest.fixture(scope="module")
def variables():
    return tf.Variable(tf.random.normal([20, 64]), name="w"), tf.Variable(tf.zeros([64]), name="b")


@pytest.fixture(scope="module")
def clean(variables):
    w, b = variables

    @tf.function
    def clean_step(x):
        hidden = tf.nn.relu(tf.matmul(x, w) + b)
        return tf.reduce_mean(hidden)

    return _run_audit(clean_step, tf.random.normal([32, 20]))


@pytest.fixture(scope="module")
def shape_math():
    @tf.function(input_signature=[tf.TensorSpec([None, 20], tf.float32)])
    def shape_step(x):
        n = tf.shape(x)[0]  # @shape
        flat = tf.reshape(x, tf.stack([n * 2, 10]))  # @reshape
        total = tf.constant(0.0)
        for i in tf.range(n):  # @range-loop
            total += tf.reduce_sum(flat[i])
        return total

    return _run_audit(shape_step, tf.random.normal([32, 20]))


@pytest.fixture(scope="module")
def strings():
    @tf.function
    def string_step(x):
        text = tf.strings.as_string(x)  # @as_string
        lengths = tf.strings.length(text)  # @length
        return tf.cast(lengths, tf.float32) * x

    return _run_audit(string_step, tf.random.normal([8]))


@pytest.fixture(scope="module")
def dtype_only():
    @tf.function
    def int_step(a, b):
        rectified = tf.nn.relu(a)  # @int-relu
        return tf.matmul(rectified, b)  # @int-matmul

    return _run_audit(int_step, tf.ones([4, 4], tf.int32), tf.ones([4, 4], tf.int32))


@pytest.fixture(scope="module")
def forced():
    @tf.function
    def forced_step(x):
        with tf.device("/CPU:0"):
            e = tf.exp(x)  # @forced-exp
        return tf.matmul(e, tf.ones([64, 16]))  # @after-forced

    return _run_audit(forced_step, tf.random.normal([32, 64]))


@pytest.fixture(scope="module")
def python_ops():
    @tf.function
    def python_step(x):
        on_gpu = tf.exp(x)
        doubled = tf.numpy_function(lambda a: a * 2, [on_gpu], tf.float32)  # @numpy_function
        doubled.set_shape([32, 20])
        eager = tf.py_function(lambda t: t + 1, [doubled], tf.float32)  # @py_function
        return tf.reduce_sum(tf.nn.relu(doubled)) + tf.reduce_sum(eager)

    return _run_audit(python_step, tf.random.normal([32, 20]))


@tf.function
def _inner_helper(v):
    return tf.nn.sigmoid(v) * 3.0  # @inner-sigmoid


@tf.function
def control_flow_step(x, n):
    acc = tf.zeros_like(x)
    for i in tf.range(n):  # @loop
        acc = acc + tf.math.tanh(x)  # @loop-tanh
    if tf.reduce_sum(x) > 0:
        as_text = tf.strings.as_string(x)  # @cond-as_string
        acc = acc + tf.cast(tf.strings.length(as_text), tf.float32)
    return _inner_helper(acc)


CONTROL_FLOW_ARGS = (tf.ones([4, 3]), tf.constant(3))


@pytest.fixture(scope="module")
def control_flow():
    return _run_audit(control_flow_step, *CONTROL_FLOW_ARGS)


@pytest.fixture(scope="module")
def lookup_table():
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(tf.constant(["a", "b"]), tf.constant([1, 2], tf.int64)),
        -1,
    )

    @tf.function
    def lookup_step(keys, x):
        ids = table.lookup(keys)  # @lookup
        return tf.cast(ids, tf.float32) * x

    return _run_audit(lookup_step, tf.constant(["a", "c", "b"]), tf.ones([3]))


@pytest.fixture(scope="module")
def keras_facts():
    keras = pytest.importorskip("keras")
    inputs = keras.Input((20,))
    hidden = keras.layers.Dense(64, activation="relu", name="hidden")(inputs)
    outputs = keras.layers.Dense(1, name="head")(hidden)
    model = keras.Model(inputs, outputs, name="tiny")
    model.compile(optimizer="adam", loss="mse")
    x = tf.random.normal([32, 20])
    y = tf.random.normal([32, 1])
    return audit(model, x, y).facts.placement


# ---------------------------------------------------------------------------
# A clean float32 step: all on the GPU.


def test_clean_float32_step_is_all_gpu(clean):
    facts, audited = clean
    assert facts.predicted is (not HAS_GPU)  # without a GPU the placement is a prediction
    for group in facts.groups:
        assert group.reason not in BAD_REASONS, group
        assert group.computes_on in ("GPU", "host"), group
        if group.computes_on == "host":
            assert group.reason == "gpu-host-memory" and group.device == "GPU", group
    for op in ("MatMul", "Relu", "Mean", "AddV2", "ReadVariableOp"):
        group = _group(facts, op)
        assert (group.device, group.computes_on, group.reason) == ("GPU", "GPU", "gpu"), group
    assert _group(facts, "ReadVariableOp").count == 2
    assert [c for c in facts.copies if c.kind == "step"] == []
    # The only crossing is the argument itself, copied to the GPU once per call.
    (copy,) = facts.copies
    assert (copy.kind, copy.direction, copy.src, copy.dtype, copy.shape, copy.bytes) == (
        "input",
        "to-device",
        "x",
        "float32",
        (32, 20),
        32 * 20 * 4,
    )
    (function,) = facts.functions
    assert (function.name, function.cpu, function.step_copies, function.input_copies) == (
        "clean_step",
        0,
        0,
        1,
    )
    assert function.gpu + function.host == function.nodes


# ---------------------------------------------------------------------------
# int32 shape arithmetic: on the host by design, never a float copy.


SHAPE_OPS = {
    "Shape",
    "StridedSlice",
    "Pack",
    "Mul",
    "Range",
    "Less",
    "AddV2",
    "Sub",
    "Maximum",
    "FloorDiv",
    "FloorMod",
}


def test_int32_shape_arithmetic_stays_on_host(shape_math):
    facts, audited = shape_math
    int_groups = [
        g
        for g in facts.groups
        if g.op in SHAPE_OPS and set(g.in_dtypes + g.out_dtypes) <= {"int32", "bool"}
    ]
    # (autograph's `for i in tf.range(n)` leaves its Range op unused: pruned, as TF does)
    assert {"StridedSlice", "Pack", "Mul"} <= {g.op for g in int_groups}
    for group in int_groups:
        assert group.computes_on == "host", group
        assert (group.device, group.reason) == ("GPU", "gpu-host-memory"), group
    # tf.shape of an argument: placed with its input (placer heuristic B), never on the GPU.
    shape = _group(facts, "Shape")
    assert shape.computes_on in ("host", "CPU") and shape.reason in (
        "gpu-host-memory",
        "follows-input",
    ), shape
    assert shape.locations == (_site("shape"),)
    assert _group(facts, "StridedSlice", in_dtypes=("int32",)).locations == (_site("shape"),)
    assert _group(facts, "Mul").locations == (_site("reshape"),)
    assert _site("reshape") in _group(facts, "Pack").locations
    assert all(g.op != "Range" for g in facts.groups)  # unused by the loop: pruned, as TF does
    # The reshape itself runs on the GPU and reads its computed shape from host memory.
    reshape = _group(facts, "Reshape")
    assert (reshape.device, reshape.computes_on, reshape.in_dtypes) == (
        "GPU",
        "GPU",
        ("float32", "int32"),
    )
    (reshape_node,) = _nodes(audited, "Reshape")
    assert audited.placed.in_host[reshape_node.id] == [False, True]
    # The while loop was found and its int32 counter ops are marked as looping.
    assert _group(facts, "Less").in_loop is True
    # No float tensor crosses because of the shape arithmetic.
    float_step_copies = [c for c in facts.copies if c.kind == "step" and c.dtype in FLOATS]
    assert float_step_copies == []
    shape_nodes = {c.src for c in facts.copies if c.src_op in SHAPE_OPS} | {
        c.dst for c in facts.copies if c.dst_op in SHAPE_OPS
    }
    assert all(
        c.dtype != "float32" for c in facts.copies if c.src in shape_nodes or c.dst in shape_nodes
    )


# ---------------------------------------------------------------------------
# Ops with no GPU kernel at all, or none for these dtypes.


def test_string_ops_have_no_gpu_kernel_and_point_at_their_line(strings):
    facts, audited = strings
    as_string = _group(facts, "AsString")
    assert (as_string.device, as_string.computes_on, as_string.reason) == (
        "CPU",
        "CPU",
        "no-gpu-kernel",
    )
    assert as_string.locations == (_site("as_string"),)
    assert as_string.locations[0].endswith(
        f"test_placement.py:{markers.line(__file__, 'as_string')}"
    )
    assert (as_string.in_dtypes, as_string.out_dtypes) == (("float32",), ("string",))
    length = _group(facts, "StringLength")
    assert (length.device, length.reason, length.locations) == (
        "CPU",
        "no-gpu-kernel",
        (_site("length"),),
    )
    # The int32 lengths go back to the GPU for the Cast: a step copy caused by the CPU op.
    (copy,) = [c for c in facts.copies if c.kind == "step"]
    assert (copy.direction, copy.src_op, copy.dst_op, copy.dtype, copy.bytes) == (
        "to-device",
        "StringLength",
        "Cast",
        "int32",
        8 * 4,
    )
    assert copy.location == _site("length")
    (function,) = facts.functions
    assert function.cpu == 2


def test_op_with_gpu_kernels_for_other_dtypes_only(dtype_only):
    facts, audited = dtype_only
    relu = _group(facts, "Relu")
    assert (relu.device, relu.reason, relu.in_dtypes, relu.locations) == (
        "CPU",
        "no-gpu-kernel-for-dtype",
        ("int32",),
        (_site("int-relu"),),
    )
    matmul = _group(facts, "MatMul")
    assert (matmul.device, matmul.reason, matmul.locations) == (
        "CPU",
        "no-gpu-kernel-for-dtype",
        (_site("int-matmul"),),
    )
    # Only GPU matmuls are tensor-core candidates.
    assert facts.tensor_ops == ()


# ---------------------------------------------------------------------------
# tf.device('/CPU:0') around an op that has a GPU kernel.


def test_forced_cpu_op_and_its_copy_back_to_the_gpu(forced):
    facts, audited = forced
    exp = _group(facts, "Exp")
    assert (exp.device, exp.computes_on, exp.reason, exp.requested) == (
        "CPU",
        "CPU",
        "forced-cpu",
        "CPU",
    )
    assert exp.locations == (_site("forced-exp"),)
    matmul = _group(facts, "MatMul")
    assert (matmul.device, matmul.reason) == ("GPU", "gpu")
    (copy,) = [c for c in facts.copies if c.kind == "step"]
    assert (copy.direction, copy.src, copy.src_op, copy.dst, copy.dst_op) == (
        "to-device",
        "Exp",
        "Exp",
        "MatMul",
        "MatMul",
    )
    assert (copy.dtype, copy.shape, copy.bytes, copy.consumers, copy.in_loop) == (
        "float32",
        (32, 64),
        8192,
        1,
        False,
    )
    assert (copy.location, copy.cause) == (_site("forced-exp"), "Exp")
    # The argument feeds a CPU op: it is not copied at all.
    assert [c for c in facts.copies if c.kind == "input"] == []
    (exp_node,) = _nodes(audited, "Exp")
    (matmul_node,) = _nodes(audited, "MatMul")
    placed = audited.placed
    assert (placed.device[exp_node.id], placed.out_host[exp_node.id]) == ("CPU", [True])
    assert (placed.device[matmul_node.id], placed.in_host[matmul_node.id]) == (
        "GPU",
        [False, False],
    )
    (function,) = facts.functions
    assert (function.cpu, function.step_copies) == (1, 1)


# ---------------------------------------------------------------------------
# Python inside the step.


def test_numpy_function_runs_on_cpu_with_copies_both_ways(python_ops):
    facts, audited = python_ops
    py_func = _group(facts, "PyFunc")
    assert (py_func.device, py_func.reason, py_func.locations) == (
        "CPU",
        "no-gpu-kernel",
        (_site("numpy_function"),),
    )
    steps = {(c.direction, c.src_op, c.dst_op): c for c in facts.copies if c.kind == "step"}
    to_host = steps[("to-host", "Exp", "PyFunc")]
    assert (to_host.dtype, to_host.bytes, to_host.location) == (
        "float32",
        32 * 20 * 4,
        _site("numpy_function"),
    )
    back = [c for key, c in steps.items() if key[0] == "to-device" and key[1] == "PyFunc"]
    assert back, steps.keys()
    assert all(c.dtype == "float32" and c.location == _site("numpy_function") for c in back)
    assert {c.bytes for c in back} == {32 * 20 * 4}


def test_py_function_has_a_gpu_kernel(python_ops):
    # TensorFlow registers EagerPyFunc for DEVICE_GPU (script_ops.cc): tf.py_function is
    # placed on the GPU and hands the Python code GPU tensors. Only numpy_function (PyFunc)
    # is CPU-only.
    facts, audited = python_ops
    eager = _group(facts, "EagerPyFunc")
    assert (eager.device, eager.reason, eager.locations) == ("GPU", "gpu", (_site("py_function"),))


# ---------------------------------------------------------------------------
# Nested bodies: while, cond and a nested tf.function.


def test_nested_bodies_are_found(control_flow):
    facts, audited = control_flow
    tanh = _group(facts, "Tanh")
    assert tanh.device == "GPU" and tanh.in_loop is True
    (example,) = tanh.examples
    assert example.startswith("while_body") and example.endswith("/Tanh"), example
    assert tanh.locations == (_site("loop-tanh"),)
    # The loop condition is in the loop too.
    assert _group(facts, "Less").in_loop is True
    # A CPU-only op inside the true branch of the cond.
    as_string = _group(facts, "AsString")
    assert (as_string.device, as_string.reason, as_string.in_loop) == (
        "CPU",
        "no-gpu-kernel",
        False,
    )
    (example,) = as_string.examples
    assert example.startswith("cond_true") and example.endswith("/AsString"), example
    assert as_string.locations == (_site("cond-as_string"),)
    # The nested tf.function's body.
    sigmoid = _group(facts, "Sigmoid")
    (example,) = sigmoid.examples
    assert "_inner_helper" in example and example.endswith("/Sigmoid"), example
    assert (sigmoid.device, sigmoid.in_loop, sigmoid.locations) == (
        "GPU",
        False,
        (_site("inner-sigmoid"),),
    )
    # Body nodes know which call sites lead to them.
    (tanh_node,) = _nodes(audited, "Tanh")
    assert tanh_node.loop_depth == 1 and tanh_node.call_chain[0].startswith("while")
    (sigmoid_node,) = _nodes(audited, "Sigmoid")
    assert sigmoid_node.loop_depth == 0 and len(sigmoid_node.call_chain) == 1
    # Call ops are inlined away, never reported.
    assert not {
        "While",
        "StatelessWhile",
        "If",
        "StatelessIf",
        "PartitionedCall",
        "StatefulPartitionedCall",
    } & {g.op for g in facts.groups}
    # The CPU-only branch op's result crosses back to the GPU.
    assert any(c.src_op == "StringLength" and c.direction == "to-device" for c in facts.copies)


# ---------------------------------------------------------------------------
# Keras training step.


def test_keras_train_step(keras_facts):
    facts = keras_facts
    (function,) = facts.functions
    assert function.name.endswith(".train_step") and function.name == "tiny.train_step"
    assert function.cpu == 0
    reads = _groups(facts, "ReadVariableOp")
    assert reads and all(g.device == "GPU" and g.reason == "gpu" for g in reads)
    for op in ("AssignAddVariableOp", "AssignSubVariableOp", "Sqrt", "ReluGrad", "BiasAddGrad"):
        groups = _groups(facts, op)
        assert groups and all(g.device == "GPU" and g.computes_on == "GPU" for g in groups), (
            op,
            groups,
        )
    assert [g for g in facts.groups if g.reason in BAD_REASONS] == []
    forward = [t for t in facts.tensor_ops if t.op == "MatMul" and not t.gradient]
    hidden = [t for t in forward if t.dims == {"m": 32, "n": 64, "k": 20}]
    assert len(hidden) == 1, forward
    assert (
        hidden[0].dtype == "float32" and hidden[0].layer is not None and "hidden" in hidden[0].layer
    )
    head = [t for t in forward if t.dims == {"m": 32, "n": 1, "k": 64}]
    assert len(head) == 1 and "head" in head[0].layer
    # The backward pass has the gradient matmuls, e.g. dW = x^T . dy: 20x32 . 32x64.
    assert any(t.gradient and t.dims == {"m": 20, "n": 64, "k": 32} for t in facts.tensor_ops)
    assert facts.mixed_precision_policy == "float32"
    assert all(c.dtype not in FLOATS for c in facts.copies if c.kind == "step")


def test_a_variable_updated_only_in_a_branch_that_returns_nothing_stays_on_the_gpu():
    """The loss-scale optimizer's shape: the variables are passed to an If whose branches
    return no tensor (only updates). The If is inlined away before placement; it must not
    count as a stateful op "on the host by design" that drags the variable to the CPU."""
    weights = tf.Variable(tf.ones([256, 128]))
    slot = tf.Variable(tf.zeros([256, 128]))

    @tf.function
    def update(grad, finite):
        def apply():
            slot.assign_add(grad)
            weights.assign_sub(0.1 * slot)

        tf.cond(finite, apply, lambda: None)
        return tf.reduce_sum(tf.cast(weights, tf.float16))

    facts, audited = _run_audit(update, tf.ones([256, 128]), tf.constant(True))
    assert [n for n in audited.placed.flat.nodes if n.op == "If"], "no If: the shape changed"
    for op in ("ReadVariableOp", "AssignAddVariableOp", "AssignSubVariableOp"):
        groups = _groups(facts, op)
        assert groups and all(g.device == "GPU" and g.reason == "gpu" for g in groups), groups
    assert [c for c in facts.copies if c.kind == "step" and c.dtype in FLOATS] == []


def test_tf_summary_s_own_move_to_the_host_is_the_library_s_not_a_block_to_remove(tmp_path):
    """tf.summary.write moves its value to the CPU with a tf.device block of its own
    (summary_ops_v2.py): forced to the CPU, but by TF, not by a block of the user's."""
    writer = tf.summary.create_file_writer(str(tmp_path))
    step = tf.Variable(0, dtype=tf.int64)

    @tf.function
    def logged(x):
        loss = tf.reduce_mean(tf.square(x))
        with writer.as_default(step=step):
            tf.summary.write("loss", loss)
        return loss

    facts, _ = _run_audit(logged, tf.ones([8, 8]))
    forced = [g for g in facts.groups if g.reason == "forced-cpu"]
    assert forced and all(g.by_library for g in forced), forced


def test_an_op_of_constants_is_folded_and_copies_nothing():
    """Grappler's constant folding turns Cast(Const int32) into a float constant before
    partitioning: no copy. A Cast of a computed int32 (the batch size from tf.shape, in
    host memory) stays a real, small copy."""

    @tf.function
    def scaled(x):
        folded = tf.cast(tf.constant(3), tf.float32)
        computed = tf.cast(tf.shape(x)[0], tf.float32)
        return x * folded / computed

    facts, _ = _run_audit(scaled, tf.ones([16, 4]))
    sources = [c.src_op for c in facts.copies if c.kind == "step"]
    assert "Const" not in sources, facts.copies
    assert "StridedSlice" in sources, facts.copies


# ---------------------------------------------------------------------------
# Host resources: a lookup table.


def test_lookup_table_runs_on_cpu(lookup_table):
    facts, audited = lookup_table
    find = _group(facts, "LookupTableFindV2")
    assert find.device == "CPU" and find.reason in ("no-gpu-kernel", "colocated")
    assert find.locations == (_site("lookup"),)
    (copy,) = [c for c in facts.copies if c.kind == "step"]
    assert (copy.direction, copy.src_op, copy.dst_op, copy.dtype, copy.bytes) == (
        "to-device",
        "LookupTableFindV2",
        "Cast",
        "int64",
        3 * 8,
    )
    # String keys are never copied: they stay in host memory.
    assert all(c.dtype != "string" for c in facts.copies)


def test_flops_the_trace_left_unknown_come_from_the_batch_the_run_delivered():
    """Keras traces fit with a None batch dimension: the step's FLOPs need the batch
    size the pipeline actually gave it, and say so."""
    spec = (tf.TensorSpec([None, 20]), tf.TensorSpec([20, 64]))

    @tf.function(input_signature=spec)
    def dense_step(x, w):
        return tf.matmul(x, w)

    unknown, _ = _run_audit(dense_step)
    (op,) = unknown.tensor_ops
    assert op.flops is None and op.flops_batch is None  # no run-time batch given
    known, _ = _run_audit(dense_step, batch=64)
    (op,) = known.tensor_ops
    assert op.flops == 2 * 64 * 20 * 64 and op.flops_batch == 64
    assert op.dims == {"m": None, "n": 64, "k": 20}  # dims stay as traced
    assert op.function == "dense_step"
    # a trace with every size known keeps its own FLOPs
    fixed, _ = _run_audit(tf.function(tf.matmul), tf.ones([8, 20]), tf.ones([20, 64]), batch=64)
    (op,) = fixed.tensor_ops
    assert op.flops == 2 * 8 * 20 * 64 and op.flops_batch is None


# ---------------------------------------------------------------------------
# Mixed precision.


def test_float16_matmul_dtype_and_dims():
    @tf.function
    def half_step(a, b):
        return tf.matmul(a, b)  # @half-matmul

    facts, _ = _run_audit(half_step, tf.ones([33, 17], tf.float16), tf.ones([17, 65], tf.float16))
    (op,) = facts.tensor_ops
    assert (op.op, op.dtype, op.dims, op.gradient) == (
        "MatMul",
        "float16",
        {"m": 33, "n": 65, "k": 17},
        False,
    )
    assert op.location == _site("half-matmul")
    assert _group(facts, "MatMul").in_dtypes == ("float16",)


# ---------------------------------------------------------------------------
# What cannot be audited.


def test_untraced_tf_function_without_arguments_is_an_audit_error():
    @tf.function
    def never_called(x):
        return x * 2

    with pytest.raises(AuditError) as caught:
        audit(never_called)
    message = str(caught.value)
    assert "\n" not in message and "never_called" in message and "not been traced" in message


def test_non_callable_is_an_audit_error():
    with pytest.raises(AuditError) as caught:
        audit(42)
    assert "\n" not in str(caught.value) and "int" in str(caught.value)


def test_python_function_without_arguments_is_an_audit_error():
    with pytest.raises(AuditError) as caught:
        audit(lambda x: x)
    assert "\n" not in str(caught.value)


def test_traced_tf_function_audits_without_arguments():
    @tf.function
    def traced_once(x):
        return x * 2

    traced_once(tf.constant([1.0, 2.0]))
    facts = audit(traced_once).facts.placement
    (function,) = facts.functions
    assert function.name == "traced_once"
    assert _group(facts, "Mul").device == "GPU"


# ---------------------------------------------------------------------------
# verify


@pytest.mark.skipif(HAS_GPU, reason="needs a machine without a GPU")
def test_verify_on_a_machine_without_gpu_says_so(clean):
    facts, audited = clean
    target = audited.target
    checked, _ = audit_functions([target], verify=True)
    check = checked.verification
    assert check is not None and check.ran is False and "no GPU" in check.reason
    assert (check.nodes_compared, check.disagreements) == (0, ())
    # The prediction itself is unchanged by asking for a verification.
    assert checked.groups == facts.groups


def test_verify_without_example_arguments():
    @tf.function
    def no_args_given(x):
        return x + 1

    concrete = no_args_given.get_concrete_function(tf.constant(1.0))
    facts, _ = audit_functions([AuditTarget("no_args_given", concrete)], verify=True)
    assert facts.verification.ran is False and "example arguments" in facts.verification.reason


def test_verify_placement_runs_when_the_device_is_present(forced):
    from gpuwhy.collect.placement.verify import verify_placement

    _, audited = forced
    check = verify_placement(audited, "CPU")
    assert check.ran is True and check.device == "CPU" and check.nodes_compared >= 3


def test_cpu_registry_predicts_cpu_devices():
    concrete = control_flow_step.get_concrete_function(*CONTROL_FLOW_ARGS)
    _, (audited,) = audit_functions(
        [AuditTarget("control_flow_step", concrete)], registry=KernelRegistry("/device:CPU:0")
    )
    placed = audited.placed
    devices = {placed.device[n.id] for n in placed.flat.nodes if n.role == "op"}
    assert devices == {"CPU"}


def test_verify_cpu_prediction_agrees_with_real_cpu_placement():
    @tf.function
    def helper(v):
        return tf.nn.sigmoid(v) * 3.0

    @tf.function
    def verified_step(x, n):
        acc = tf.zeros_like(x)
        for i in tf.range(n):
            acc = acc + tf.math.tanh(x)
        if tf.reduce_sum(x) > 0:
            acc = acc + tf.cast(tf.strings.length(tf.strings.as_string(x)), tf.float32)
        return helper(acc)

    # A fresh function: TF records the partition graphs only when it instantiates one.
    facts, _ = _run_audit(
        verified_step, *CONTROL_FLOW_ARGS, verify=True, registry=KernelRegistry("/device:CPU:0")
    )
    check = facts.verification
    assert check.ran is True and check.device == "CPU"
    assert check.disagreements == ()
    # 7 top-level nodes survive grappler; the rest are matched inside the renamed bodies
    # (PartitionedCall/Sigmoid, while/body/_1/while/Tanh, cond/then/_40/cond/AsString ...).
    assert check.nodes_compared >= 15


def test_verifying_twice_is_not_a_silent_pass():
    @tf.function
    def verified_twice(x):
        return tf.nn.relu(tf.matmul(x, x))

    args = (tf.ones([4, 4]),)
    concrete = verified_twice.get_concrete_function(*args)
    target = AuditTarget("verified_twice", concrete, None, args)
    checks = [
        audit_functions([target], verify=True, registry=KernelRegistry("/device:CPU:0"))[
            0
        ].verification
        for _ in range(2)
    ]
    assert checks[0].ran is True and checks[0].nodes_compared == 2, checks[0]  # MatMul, Relu
    assert checks[1].ran is False or checks[1].nodes_compared == 2, checks[1]


# ---------------------------------------------------------------------------
# Facts round trip.


def test_placement_facts_round_trip(control_flow, keras_facts, forced):
    facts, _ = control_flow
    forced_facts, _ = forced
    combined = dataclasses.replace(
        facts,
        groups=facts.groups + forced_facts.groups,
        copies=facts.copies + forced_facts.copies,
        tensor_ops=keras_facts.tensor_ops,
        compute_capability=(8, 0),
        gpu_name="NVIDIA A100",
    )
    assert combined.copies and combined.tensor_ops and any(c.shape for c in combined.copies)
    data = json.loads(json.dumps(to_dict(combined)))
    rebuilt = from_dict(PlacementFacts, data)
    assert rebuilt == combined
    assert isinstance(rebuilt.groups[0].examples, tuple)
    assert isinstance(rebuilt.compute_capability, tuple)
    shaped = next(c for c in rebuilt.copies if c.shape)
    assert isinstance(shaped.shape, tuple)


# ---------------------------------------------------------------------------
# SavedModel directories.


class _Scaler(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable(tf.ones([8, 4]))

    @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32)])
    def __call__(self, x):
        return tf.nn.relu(tf.matmul(x, self.w))


def test_audit_saved_model(tmp_path):
    path = tmp_path / "model"
    tf.saved_model.save(_Scaler(), str(path))
    facts = audit_path(path).facts.placement
    assert facts.functions
    assert [f.name for f in facts.functions] == ["signature serving_default"]
    matmul = _group(facts, "MatMul")
    assert (matmul.device, matmul.reason) == ("GPU", "gpu")
    assert _group(facts, "ReadVariableOp").device == "GPU"


def test_audit_path_rejects_a_plain_directory(tmp_path):
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(AuditError) as caught:
        audit_path(tmp_path)
    assert "not a SavedModel" in str(caught.value) and "\n" not in str(caught.value)


def test_audit_path_rejects_a_missing_path(tmp_path):
    with pytest.raises(AuditError) as caught:
        audit_path(tmp_path / "missing")
    assert "no such file" in str(caught.value)


def test_audit_path_rejects_an_unknown_file(tmp_path):
    other = tmp_path / "weights.bin"
    other.write_bytes(b"\0")
    with pytest.raises(AuditError):
        audit_path(other)


def test_a_dense_layer_over_a_sequence_is_sized_through_its_reshape():
    """A Dense layer on [batch, time, features] flattens to [batch x time, features] for
    one MatMul (tf.tensordot); the trace leaves both sizes unknown. Every matmul of the
    training step, the weight gradients included, is sized from the batch the run
    delivered, and the flattened size is batch x time, never the batch alone."""
    import keras

    model = keras.Sequential([keras.Input((16, 8)), keras.layers.Dense(32), keras.layers.Dense(4)])
    optimizer = keras.optimizers.SGD()

    @tf.function(input_signature=(tf.TensorSpec([None, 16, 8]),))
    def train_step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    facts, _ = _run_audit(train_step, batch=10)
    matmuls = [op for op in facts.tensor_ops if "MatMul" in op.op]
    assert matmuls and all(op.flops for op in matmuls)
    # per layer: forward x.W, input gradient dy.W^T, weight gradient x^T.dy, each
    # 2 x (10 x 16) x in x out (the first layer's input gradient is not needed)
    first, second = 2 * 160 * 8 * 32, 2 * 160 * 32 * 4
    assert sorted(op.flops for op in matmuls) == sorted([first, first, second, second, second])
    forward = [op for op in matmuls if not op.gradient]
    assert {op.output_bytes for op in forward} == {160 * 32 * 4, 160 * 4 * 4}
