"""The placement audit on the patterns real training code uses, through the public API.

Each case is a way users write steps that an op-by-op replay could get wrong: the
iterator read inside the step, XLA-compiled functions, unused ops TF prunes, loops over
a dataset inside a tf.function, multi-input Keras models, einsum attention.
"""

from __future__ import annotations

import pytest

tf = pytest.importorskip("tensorflow")

import gpuwhy  # noqa: E402
from gpuwhy.facts import PLACEMENT_REASONS  # noqa: E402

keras = pytest.importorskip("keras")


def _ids(record):
    return {f.id for f in record.findings}


def test_public_audit_can_be_called_twice_and_takes_concrete_functions():
    @tf.function
    def step(x):
        return tf.nn.relu(x) * 2.0

    x = tf.ones([8, 8])
    first = gpuwhy.audit(step, x)
    second = gpuwhy.audit(step, x)  # `gpuwhy.audit` is still the function
    third = gpuwhy.audit(step.get_concrete_function(x))
    assert first.facts.placement.functions[0].name == "step"
    assert second.facts.placement.functions[0].nodes == first.facts.placement.functions[0].nodes
    assert third.facts.placement.functions[0].name == "step"  # bytes name decoded, suffix dropped


def test_unused_ops_are_pruned_like_tf_does():
    @tf.function
    def step(x):
        tf.strings.as_string(x)  # result unused: TF never places it
        return x * 2.0

    record = gpuwhy.audit(step, tf.ones([4]))
    assert "placement.no-gpu-kernel" not in _ids(record)
    assert all(g.op != "AsString" for g in record.facts.placement.groups)


def test_iterator_read_inside_the_step_is_the_input_copy_not_a_step_copy():
    ds = tf.data.Dataset.from_tensors((tf.zeros([128, 224, 224, 3]), tf.zeros([128]))).repeat()
    iterator = iter(ds)
    w = tf.Variable(tf.ones([3, 8]))

    @tf.function
    def train_step(it):
        x, y = next(it)
        return tf.reduce_mean(tf.matmul(tf.reshape(x, [-1, 3]), w)) + tf.reduce_mean(y)

    record = gpuwhy.audit(train_step, iterator)
    placement = record.facts.placement
    assert {
        "placement.host-transfers",
        "placement.forced-cpu",
        "placement.no-gpu-kernel",
    }.isdisjoint(_ids(record))
    inputs = [c for c in placement.copies if c.kind == "input" and c.src_op == "IteratorGetNext"]
    assert inputs and inputs[0].bytes == 128 * 224 * 224 * 3 * 4
    assert placement.functions[0].input_copies >= 1


def test_xla_compiled_functions_are_one_cluster():
    @tf.function(jit_compile=True)
    def step(x, idx):
        flags = tf.tensor_scatter_nd_update(tf.zeros([64], tf.bool), idx, tf.ones([2], tf.bool))
        return tf.where(flags, x, 0.0)

    record = gpuwhy.audit(step, tf.ones([64]), tf.constant([[1], [2]]))
    placement = record.facts.placement
    assert placement.functions[0].jit_compile is True
    assert {g.reason for g in placement.groups} == {"xla"}
    assert not [c for c in placement.copies if c.kind == "step"]
    assert "xla" in PLACEMENT_REASONS


def test_dataset_loop_inside_a_function_is_listed_as_not_audited():
    ds = tf.data.Dataset.range(4).map(lambda i: tf.cast(i, tf.float32))

    @tf.function
    def epoch():
        total = tf.constant(0.0)
        for value in ds:
            total += tf.strings.to_number(tf.strings.as_string(value))
        return total

    record = gpuwhy.audit(epoch.get_concrete_function())
    (function,) = record.facts.placement.functions
    assert any("inside tf.data" in body for body in function.unaudited), function


def test_multi_input_keras_model_with_dict_inputs():
    image = keras.Input((8,), name="image")
    meta = keras.Input((3,), name="meta")
    out = keras.layers.Dense(1)(keras.layers.Concatenate()([keras.layers.Dense(16)(image), meta]))
    model = keras.Model({"image": image, "meta": meta}, out)
    model.compile(optimizer="adam", loss="mse")
    x = {"image": tf.zeros([4, 8]), "meta": tf.zeros([4, 3])}
    record = gpuwhy.audit(model, x, tf.zeros([4, 1]))
    (function,) = record.facts.placement.functions
    assert function.name.endswith(".train_step") and function.cpu == 0
    # Without a GPU Keras' XLA default cannot be resolved: the report says how it audited.
    if not tf.config.list_physical_devices("GPU"):
        assert function.note and "XLA" in function.note


def test_einsum_work_is_counted_for_tensor_cores():
    @tf.function
    def attention(q, k):
        return tf.einsum("bqd,bkd->bqk", q, k)

    record = gpuwhy.audit(attention, tf.ones([2, 16, 64]), tf.ones([2, 32, 64]))
    (op,) = record.facts.placement.tensor_ops
    assert op.op == "Einsum" and op.flops == 2 * 2 * 16 * 32 * 64


def test_kernel_bytes_say_how_much_of_them_is_float32():
    """A mixed-precision normalisation: float16 in, float32 between casts, float16 out.
    The projection moves the float32 part at half width under XLA."""

    @tf.function
    def step(x):
        wide = tf.cast(x, tf.float32)
        return tf.cast(tf.nn.relu(wide - tf.reduce_mean(wide)), tf.float16)

    x = tf.ones([64, 1024], tf.float16)
    (function,) = gpuwhy.audit(step, x).facts.placement.functions
    kernels = {k.op: k for k in function.kernels}
    elements = 64 * 1024
    assert kernels["Relu"].bytes == kernels["Relu"].float32_bytes == 4 * elements
    # one cast up (float32 out), one cast down (float16 out)
    assert kernels["Cast"].bytes == 6 * elements and kernels["Cast"].float32_bytes == 4 * elements


def test_a_fused_batch_norm_is_sized_by_its_output_not_left_unknown():
    """tf.compat.v1 and tf_keras models normalise with FusedBatchNormV3, whose reserve
    space outputs have no declared shape: the kernel is sized by its normalised output
    (and the statistics), not counted as a launch of unknown bytes."""
    scale, offset = tf.ones([32]), tf.zeros([32])

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y, _, _ = tf.compat.v1.nn.fused_batch_norm(x, scale, offset, is_training=True)
            loss = tf.reduce_sum(tf.nn.relu(y))
        return tape.gradient(loss, x)

    x = tf.ones([8, 16, 16, 32])
    (function,) = gpuwhy.audit(step, x).facts.placement.functions
    kernels = {k.op: k for k in function.kernels}
    elements = 8 * 16 * 16 * 32
    for op in ("FusedBatchNormV3", "FusedBatchNormGradV3"):
        assert kernels[op].sized == kernels[op].count == 1
        assert 4 * elements <= kernels[op].bytes < 4 * elements + 4096  # + per-channel
