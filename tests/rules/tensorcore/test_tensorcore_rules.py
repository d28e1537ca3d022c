"""tensorcore.unused and tensorcore.misaligned from small placement facts."""

from dataclasses import replace

import pytest

from gpuwhy.facts import Facts
from gpuwhy.fixes.op_groups import PREDICTION_NOTE
from gpuwhy.rules.tensorcore.misaligned import TensorCoreMisaligned
from gpuwhy.rules.tensorcore.unused import CPU_ONLY_NOTE, TensorCoreUnused
from tests import builders as b

ENABLE_TF32 = "tf.config.experimental.enable_tensor_float_32_execution(True)"


def run(rule_cls, facts, **options):
    return rule_cls().check(facts, {**rule_cls.options, **options})


def float32_model(**kw):
    """Two float32 dense layers (4096 x 4096 x 4096, and a small head)."""
    ops = [
        b.tensor_op(dims={"m": 4096, "n": 4096, "k": 4096}, layer="dense", location="model.py:10"),
        b.tensor_op(dims={"m": 4096, "n": 10, "k": 4096}, layer="head", location="model.py:11"),
    ]
    return b.placement_facts(tensor_ops=ops, **kw)


# -- tensorcore.unused ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "half", "bfloat16"])
def test_sixteen_bit_model_uses_tensor_cores(dtype):
    ops = [
        b.tensor_op(dtype=dtype),
        b.tensor_op(
            "Conv2D",
            dtype=dtype,
            layer="conv",
            dims={"batch": 32, "in_channels": 64, "out_channels": 64},
            flops=10**9,
        ),
    ]
    facts = b.placement_facts(
        tensor_ops=ops,
        compute_capability=(7, 5),
        gpu_name="Tesla T4",
        mixed_precision_policy=f"mixed_{'bfloat16' if dtype == 'bfloat16' else 'float16'}",
    )
    assert run(TensorCoreUnused, facts) == []


def test_no_tensor_ops_nothing_to_say():
    assert run(TensorCoreUnused, b.placement_facts(compute_capability=(7, 5))) == []


def test_gpu_without_tensor_cores_is_quiet():
    assert (
        run(
            TensorCoreUnused,
            float32_model(compute_capability=(6, 1), gpu_name="Tesla P4", predicted=False),
        )
        == []
    )


def test_turing_float32_is_medium():
    facts = float32_model(
        compute_capability=(7, 5),
        gpu_name="Tesla T4",
        predicted=False,
        mixed_precision_policy="float32",
    )
    (finding,) = run(TensorCoreUnused, facts)
    assert finding.id == "tensorcore.unused"
    assert finding.severity == "medium"
    assert finding.title == (
        "100% of the matmul/conv work runs in plain float32 on Tesla T4 "
        "(compute capability 7.5 has no TF32): tensor cores sit idle"
    )
    ev = finding.evidence
    assert ev["float32_work_share"] == 1.0
    assert ev["float32_ops"] == 2 and ev["tensor_ops"] == 2
    assert ev["compute_capability"] == "7.5" and ev["gpu"] == "Tesla T4"
    assert ev["tf32_enabled"] is None and ev["mixed_precision_policy"] == "float32"
    assert ev["placement"] == "seen on this machine's Tesla T4 (--verify)"
    assert ev["largest"][0] == {
        "op": "MatMul",
        "node": "train_step/dense/MatMul",
        "layer": "dense",
        "dims": {"m": 4096, "n": 4096, "k": 4096},
        "gflops": 137.439,
        "location": "model.py:10",
    }
    assert [row["layer"] for row in ev["largest"]] == ["dense", "head"]
    assert finding.location == "model.py:10"
    assert "keras.mixed_precision.set_global_policy('mixed_float16')" in finding.fix
    assert ENABLE_TF32 not in finding.fix


def test_a_step_of_little_matmul_work_is_low_and_says_how_little_there_is_to_gain():
    """A small dense net at batch 32 (keras-io's timeseries classifier, 4k parameters):
    its float32 kernels take microseconds on any GPU, where '2-8x' promised much."""
    ops = [
        b.tensor_op(dims={"m": 32, "n": 64, "k": 128}, layer="dense", location="model.py:10"),
        b.tensor_op(dims={"m": 32, "n": 2, "k": 64}, layer="head", location="model.py:11"),
    ]
    facts = b.placement_facts(
        tensor_ops=ops, compute_capability=(7, 5), gpu_name="Tesla T4", predicted=False
    )
    (finding,) = run(TensorCoreUnused, facts)
    assert finding.severity == "low"
    assert finding.evidence["step_float32_mflop"] == pytest.approx(0.53, abs=0.01)
    assert finding.estimated_gain.startswith(
        "little: the step's float32 matmul/conv work is 0.5 MFLOP, microseconds of a GPU"
    )
    # an op of unknown size: no figure, the usual gain
    unknown = [replace(ops[0], flops=None), *ops[1:]]
    (sized,) = run(
        TensorCoreUnused,
        replace(facts, placement=replace(facts.placement, tensor_ops=tuple(unknown))),
    )
    assert "step_float32_mflop" not in sized.evidence


def test_an_op_of_two_traces_of_the_step_is_listed_and_counted_once():
    """Keras' step traced twice (the text classifier of a new user's trial): every op is
    in both traces, and the largest ops named one Conv2D twice."""
    conv = b.tensor_op(
        "Conv2D",
        dims={"batch": 32, "in_channels": 128, "out_channels": 128},
        flops=4 * 10**8,
        node="one_step_on_data/sequential/conv2d/Conv2D",
        layer="conv2d",
    )
    head = b.tensor_op(dims={"m": 32, "n": 2, "k": 128}, layer="head")
    traces = [conv, replace(conv, function="one_step_on_data (prog.py:106) #2"), head]
    facts = b.placement_facts(tensor_ops=traces, compute_capability=(7, 5), gpu_name="Tesla T4")
    (finding,) = run(TensorCoreUnused, facts)
    assert [row["layer"] for row in finding.evidence["largest"]] == ["conv2d", "head"]
    # 400 MFLOP a step, not 800: the two traces are one call's work
    assert finding.evidence["step_float32_mflop"] == pytest.approx(400.016, abs=0.01)


def test_hopper_with_tf32_is_low():
    (finding,) = run(
        TensorCoreUnused,
        float32_model(
            compute_capability=(9, 0),
            gpu_name="NVIDIA H100 80GB HBM3",
            tf32_enabled=True,
            predicted=False,
        ),
    )
    assert finding.severity == "low"
    assert finding.title == (
        "100% of the matmul/conv work is float32: it uses TF32 tensor cores on "
        "NVIDIA H100 80GB HBM3; mixed precision would use them at 16 bits, about 2x faster"
    )
    assert ENABLE_TF32 not in finding.fix


def _trained_by(source, keras_name="tf.keras", keras_version="3.12.0"):
    """Facts of a model trained by ``source`` (keras-fit or a custom loop), the script
    naming Keras ``keras_name``."""
    from gpuwhy.facts import ProgramFacts, StepFacts, StepLoop

    steps = StepFacts(
        source, "train.py:40", 100, loops=(StepLoop(source, "train.py:40", 100, 0.0),)
    )
    program = ProgramFacts(("train.py",), keras_name=keras_name, keras_version=keras_version)
    return replace(float32_model(), steps=steps, program=program)


def test_a_custom_loop_gets_bfloat16_and_the_loss_scaling_float16_needs_in_its_keras_name():
    (f,) = run(TensorCoreUnused, _trained_by("tf-function"))
    lines = f.fix.removeprefix(CPU_ONLY_NOTE).splitlines()
    assert (
        lines[0]
        == "tf.keras.mixed_precision.set_global_policy('mixed_bfloat16')   # before building the model"
    )
    assert "no loss scaling: the loop stays as written" in lines[1]
    assert "#   optimizer = tf.keras.optimizers.LossScaleOptimizer(optimizer)" in lines
    assert "#   in the step: grads = tape.gradient(optimizer.scale_loss(loss), variables)" in lines
    assert "keras." not in f.fix.replace("tf.keras.", "")  # never a name the script lacks
    # a GPU without bfloat16 tensor cores: float16, the scaling as code
    (t4,) = run(
        TensorCoreUnused,
        replace(
            _trained_by("tf-data", keras_name="keras"),
            placement=float32_model(compute_capability=(7, 5), gpu_name="Tesla T4").placement,
        ),
    )
    lines = t4.fix.splitlines()
    assert lines[0].startswith("keras.mixed_precision.set_global_policy('mixed_float16')")
    assert "optimizer = keras.optimizers.LossScaleOptimizer(optimizer)" in lines
    # tf.keras 2 scales with its own two calls
    (old,) = run(TensorCoreUnused, _trained_by("tf-function", keras_version="2.15.0"))
    assert "optimizer.get_unscaled_gradients(" in old.fix and "scale_loss(" not in old.fix.replace(
        "get_scaled_loss(", ""
    )


def test_fit_gets_float16_in_the_scripts_keras_name_and_no_loop_advice():
    (f,) = run(TensorCoreUnused, _trained_by("keras-fit", keras_name="tf.keras"))
    assert f.fix.startswith(
        CPU_ONLY_NOTE + "tf.keras.mixed_precision.set_global_policy('mixed_float16')"
    )
    assert "LossScaleOptimizer" not in f.fix  # fit scales the loss itself
    # the script is not here to read its layers: what to write, in its Keras name
    assert "(tf.keras.layers.Dense(..., dtype='float32'))" in f.fix


def test_each_model_s_last_layer_is_kept_float32_as_the_script_writes_it(tmp_path):
    """TensorFlow's DCGAN tutorial: two Sequential models built by .add(); the fix
    writes each one's last layer with dtype='float32', not a placeholder."""
    script = tmp_path / "dcgan.py"
    script.write_text(
        "import tensorflow as tf\n"
        "from tensorflow.keras import layers\n\n"
        "def make_generator_model():\n"
        "    model = tf.keras.Sequential()\n"
        "    model.add(layers.Dense(7 * 7 * 256, use_bias=False, input_shape=(100,)))\n"
        "    model.add(layers.Conv2DTranspose(1, (5, 5), strides=(2, 2), padding='same',\n"
        "                                     use_bias=False, activation='tanh'))\n"
        "    return model\n\n"
        "def make_discriminator_model():\n"
        "    model = tf.keras.Sequential()\n"
        "    model.add(layers.Conv2D(64, (5, 5), strides=(2, 2), padding='same'))\n"
        "    model.add(layers.Dense(1))\n"
        "    return model\n\n"
        "augment = tf.keras.Sequential([layers.RandomFlip(), layers.RandomRotation(0.1)])\n"
        "inputs = tf.keras.Input((8,))\n"
        "outputs = layers.Dense(3, activation='softmax')(layers.Dense(16)(inputs))\n"
        "classifier = tf.keras.Model(inputs=inputs, outputs=outputs)\n"
    )
    facts = _trained_by("keras-fit")
    facts = replace(facts, program=replace(facts.program, command=(str(script),)))
    (f,) = run(TensorCoreUnused, facts)
    lines = f.fix.removeprefix(CPU_ONLY_NOTE).splitlines()
    start = lines.index("# keep each model's last layer in float32 (its output feeds the loss):")
    # whole lines as written, the split call changed where its last argument ends
    assert lines[start + 1 : start + 7] == [
        "# dcgan.py:8: in place of: use_bias=False, activation='tanh'))",
        "use_bias=False, activation='tanh', dtype='float32'))",
        "# dcgan.py:14: in place of: model.add(layers.Dense(1))",
        "model.add(layers.Dense(1, dtype='float32'))",
        "# dcgan.py:19: in place of: outputs = layers.Dense(3, activation='softmax')"
        "(layers.Dense(16)(inputs))",
        "outputs = layers.Dense(3, activation='softmax', dtype='float32')"
        "(layers.Dense(16)(inputs))",
    ]


def test_ampere_with_tf32_turned_off_is_medium():
    (finding,) = run(
        TensorCoreUnused,
        float32_model(
            compute_capability=(8, 0),
            gpu_name="NVIDIA A100-SXM4-40GB",
            tf32_enabled=False,
            predicted=False,
        ),
    )
    assert finding.severity == "medium"
    assert "(TF32 is turned off): tensor cores sit idle" in finding.title
    assert finding.fix.startswith(ENABLE_TF32)
    assert finding.evidence["tf32_enabled"] is False


def test_predicted_without_a_gpu_is_low_and_says_both():
    (finding,) = run(TensorCoreUnused, float32_model())
    assert finding.severity == "low"
    assert finding.title == (
        "100% of the matmul/conv work is float32: no tensor cores on V100/T4 (7.x), "
        "TF32 on A100/H100 (8.0+); mixed precision uses them at 16 bits on all"
    )
    assert finding.evidence["compute_capability"] is None and finding.evidence["gpu"] is None
    assert finding.evidence["placement"] == PREDICTION_NOTE
    # pasted into a CPU-only run, mixed precision made a step 5x slower: said first
    assert finding.fix is not None and finding.fix.startswith("# for the GPU machine: no GPU here")


def test_a_fix_for_a_gpu_seen_here_has_no_cpu_note():
    facts = replace(float32_model(), devices=(b.gpu(0, name="Tesla T4", compute_capability="7.5"),))
    (finding,) = run(TensorCoreUnused, facts)
    assert finding.fix is not None and "no GPU here" not in finding.fix


def test_predicted_for_the_target_gpu_names_it():
    """No GPU here, --target H100: the target's tensor cores, not every generation's."""
    facts = replace(float32_model(), projection=b.projection("H100", "train_step (train.py:12)"))
    (finding,) = run(TensorCoreUnused, facts)
    assert finding.severity == "low"
    assert finding.title == (
        "100% of the matmul/conv work is float32: it uses TF32 tensor cores on H100 "
        "(--target); mixed precision would use them at 16 bits, about 2x faster"
    )
    assert finding.evidence["gpu"] == "H100 (--target)"
    assert finding.evidence["compute_capability"] == "9.0"
    t4 = replace(float32_model(), projection=b.projection("T4", "train_step (train.py:12)"))
    (turing,) = run(TensorCoreUnused, t4)
    assert turing.severity == "medium" and "on T4 (--target)" in turing.title


def test_predicted_with_tf32_turned_off_is_medium():
    (finding,) = run(TensorCoreUnused, float32_model(tf32_enabled=False))
    assert finding.severity == "medium"
    assert finding.title == (
        "100% of the matmul/conv work runs in float32 with TF32 turned off: tensor cores sit idle"
    )
    assert ENABLE_TF32 in finding.fix


def test_capability_from_the_device_list():
    placement = float32_model().placement
    facts = Facts(
        placement=placement,
        devices=(b.gpu(0, name="Tesla V100-SXM2-16GB", compute_capability="7.0"),),
    )
    (finding,) = run(TensorCoreUnused, facts)
    assert finding.severity == "medium"
    assert "on Tesla V100-SXM2-16GB (compute capability 7.0 has no TF32)" in finding.title
    assert finding.evidence["compute_capability"] == "7.0"
    # an unreadable capability is skipped for the next device
    facts = Facts(
        placement=placement,
        devices=(
            b.gpu(0, compute_capability="unknown"),
            b.gpu(1, name="Tesla P100", compute_capability="6.0"),
        ),
    )
    assert run(TensorCoreUnused, facts) == []
    # the placement audit's own GPU wins over NVML's list
    facts = Facts(
        placement=float32_model(compute_capability=(9, 0)).placement,
        devices=(b.gpu(0, compute_capability="6.1"),),
    )
    assert run(TensorCoreUnused, facts)[0].severity == "low"


def test_the_largest_ops_come_from_the_training_step_not_a_later_predict():
    train = "multi_step_on_iterator (train.py:40)"
    predict = "one_step_on_data_distributed (train.py:41)"
    ops = [
        b.tensor_op(
            dims={"m": None, "n": 512, "k": 1024},
            flops=2 * 64 * 512 * 1024,
            function=train,
            flops_batch=64,
            layer="dense",
            location="train.py:40",
        ),
        b.tensor_op(
            dims={"m": 1024, "n": 512, "k": None},
            flops=2 * 64 * 512 * 1024,
            function=train,
            flops_batch=64,
            gradient=True,
            layer="gradient_tape/dense",
            location="train.py:40",
        ),
        # predict() on a batch of 4096 images after training: bigger, but not the step
        b.tensor_op(
            dims={"m": 4096, "n": 512, "k": 1024}, function=predict, location="train.py:41"
        ),
    ]
    (f,) = run(TensorCoreUnused, b.placement_facts(tensor_ops=ops))
    assert f.location == "train.py:40"
    assert f.evidence["largest_from"] == f"{train} (the training step)"
    assert f.evidence["flops_batch"].startswith("64: the batch size the run delivered")
    assert [row["layer"] for row in f.evidence["largest"]] == ["dense", "gradient_tape/dense"]


def test_min_fraction_is_by_flops():
    tiny = b.tensor_op(dims={"m": 8, "n": 16, "k": 16}, layer="gate")  # float32, 4 KFLOP
    big = [
        b.tensor_op(dtype="float16", dims={"m": 4096, "n": 4096, "k": 4096}, layer=f"l{i}")
        for i in range(3)
    ]
    facts = b.placement_facts(tensor_ops=[tiny] + big, compute_capability=(7, 5))
    assert run(TensorCoreUnused, facts) == []
    (finding,) = run(TensorCoreUnused, facts, min_fraction=0.0)
    assert finding.evidence["float32_work_share"] == 0.0
    assert finding.title.startswith("0% of the matmul/conv work")
    # a float32 third of the work passes the default 10%
    facts = b.placement_facts(
        tensor_ops=[big[0], b.tensor_op(dims={"m": 4096, "n": 4096, "k": 2048})],
        compute_capability=(7, 5),
    )
    (finding,) = run(TensorCoreUnused, facts)
    assert finding.evidence["float32_work_share"] == 0.333
    assert finding.title.startswith("33% of the matmul/conv work")
    assert run(TensorCoreUnused, facts, min_fraction=0.34) == []


def test_ops_of_unknown_size_are_left_out_when_most_sizes_are_known():
    ops = [
        b.tensor_op(dims={"m": None, "n": 16, "k": 16}, layer="gate"),
        b.tensor_op(dtype="float16", dims={"m": 4096, "n": 4096, "k": 4096}),
    ]
    assert ops[0].flops is None
    assert run(TensorCoreUnused, b.placement_facts(tensor_ops=ops, compute_capability=(7, 5))) == []


def test_share_is_by_count_when_most_sizes_are_unknown():
    ops = [
        b.tensor_op(dims={"m": None, "n": 16, "k": 16}, layer="gate"),
        b.tensor_op(dims={"m": None, "n": 32, "k": 16}, layer="gate2"),
        b.tensor_op(dtype="float16", dims={"m": 4096, "n": 4096, "k": 4096}),
    ]
    (finding,) = run(TensorCoreUnused, b.placement_facts(tensor_ops=ops, compute_capability=(7, 5)))
    assert finding.evidence["float32_work_share"] == 0.667
    assert finding.evidence["largest"][0]["gflops"] is None


# -- tensorcore.misaligned -----------------------------------------------------------------
def test_float16_matmul_with_odd_units():
    op = b.tensor_op(
        dtype="float16",
        dims={"m": 2048, "n": 3001, "k": 1024},
        layer="model/dense_1",
        location="model.py:9",
    )
    (finding,) = run(TensorCoreMisaligned, b.placement_facts(tensor_ops=[op]))
    assert finding.id == "tensorcore.misaligned"
    assert finding.severity == "low"
    assert finding.title == (
        "100% of the 16-bit matmul/conv work has sizes that are not multiples of 8: "
        "model/dense_1 (n 3001 -> 3008)"
    )
    assert finding.evidence == {
        "misaligned_work_share": 1.0,
        "sixteen_bit_ops": 1,
        "misaligned_ops": 1,
        "layers": [
            {
                "layer": "model/dense_1",
                "ops": 1,
                "dtype": "float16",
                "dims": {"n": "3001 -> 3008"},
                "location": "model.py:9",
            }
        ],
    }
    assert finding.location == "model.py:9"
    assert "# pad to multiples of 8" in finding.fix
    assert "#   model/dense_1: n 3001 -> 3008" in finding.fix


def test_a_step_xla_compiles_is_padded_by_xla_not_by_the_user():
    op = b.tensor_op(dtype="float16", dims={"m": 2048, "n": 3001, "k": 1024}, jit_compile=True)
    assert run(TensorCoreMisaligned, b.placement_facts(tensor_ops=[op])) == []


def test_forward_and_gradient_ops_of_one_layer_are_one_row():
    dims = {"m": 512, "n": 50257, "k": 1000}
    ops = [
        b.tensor_op(dtype="bfloat16", dims=dims, layer="logits", location="lm.py:4"),
        b.tensor_op(
            dtype="bfloat16",
            dims={"m": 512, "n": 1000, "k": 50257},
            layer="logits",
            gradient=True,
            node="train_step/gradients/logits/MatMul_1",
        ),
        b.tensor_op(dtype="bfloat16", dims={"m": 512, "n": 1024, "k": 1024}, layer="ffn"),
    ]
    (finding,) = run(TensorCoreMisaligned, b.placement_facts(tensor_ops=ops))
    (row,) = finding.evidence["layers"]
    assert row["ops"] == 2 and row["dtype"] == "bfloat16"
    assert row["dims"] == {"n": "50257 -> 50264", "k": "50257 -> 50264"}
    assert finding.evidence["misaligned_ops"] == 2 and finding.evidence["sixteen_bit_ops"] == 3


def test_first_convolution_with_image_channels_is_fine():
    ops = [
        b.tensor_op(
            "Conv2D",
            dtype="float16",
            layer="conv1",
            flops=10**9,
            dims={"batch": 32, "in_channels": 3, "out_channels": 64},
        ),
        b.tensor_op(
            "Conv2DBackpropFilter",
            dtype="float16",
            layer="conv1",
            flops=10**9,
            dims={"batch": 32, "in_channels": 4, "out_channels": 64},
        ),
    ]
    assert run(TensorCoreMisaligned, b.placement_facts(tensor_ops=ops)) == []


def test_convolution_channels_off_the_multiple():
    op = b.tensor_op(
        "Conv2D",
        dtype="float16",
        layer="conv2",
        flops=10**9,
        location="net.py:3",
        dims={"batch": 32, "in_channels": 5, "out_channels": 100},
    )
    (finding,) = run(TensorCoreMisaligned, b.placement_facts(tensor_ops=[op]))
    assert finding.evidence["layers"][0]["dims"] == {
        "in_channels": "5 -> 8",
        "out_channels": "100 -> 104",
    }


def test_matrix_vector_products_and_batch_dims_are_ignored():
    ops = [
        b.tensor_op(dtype="float16", dims={"m": 4096, "n": 1, "k": 1024}, layer="score"),
        b.tensor_op(dtype="float16", dims={"m": 7, "n": 1024, "k": 1024}, layer="pool"),
        b.tensor_op(
            "Conv2D",
            dtype="float16",
            layer="conv",
            flops=10**9,
            dims={"batch": 33, "in_channels": 64, "out_channels": 128},
        ),
        b.tensor_op(dtype="float16", dims={"m": None, "n": 1024, "k": None}, layer="unknown"),
    ]
    assert run(TensorCoreMisaligned, b.placement_facts(tensor_ops=ops)) == []


def test_float32_ops_are_not_judged():
    ops = [
        b.tensor_op(dtype="float32", dims={"m": 2048, "n": 3001, "k": 1001}),
        b.tensor_op(dtype="float64", dims={"m": 2048, "n": 3001, "k": 1001}),
    ]
    assert run(TensorCoreMisaligned, b.placement_facts(tensor_ops=ops)) == []


def test_multiple_option():
    op = b.tensor_op(dtype="float16", dims={"m": 2048, "n": 1000, "k": 1024}, layer="dense")
    facts = b.placement_facts(tensor_ops=[op])
    assert run(TensorCoreMisaligned, facts) == []  # 1000 = 125 x 8
    (finding,) = run(TensorCoreMisaligned, facts, multiple=64)
    assert finding.evidence["layers"][0]["dims"] == {"n": "1000 -> 1024"}
    assert "not multiples of 64" in finding.title
    assert "# pad to multiples of 64" in finding.fix


def test_larger_multiple_reports_a_superset():
    op = b.tensor_op(dtype="float16", dims={"m": 2048, "n": 60, "k": 1000}, layer="dense")
    facts = b.placement_facts(tensor_ops=[op])
    (finding,) = run(TensorCoreMisaligned, facts)  # multiple 8: n 60 -> 64
    assert finding.evidence["layers"][0]["dims"] == {"n": "60 -> 64"}
    (finding,) = run(TensorCoreMisaligned, facts, multiple=64)
    assert finding.evidence["layers"][0]["dims"] == {"n": "60 -> 64", "k": "1000 -> 1024"}


def test_min_fraction_of_sixteen_bit_flops():
    small = b.tensor_op(
        dtype="float16", dims={"m": 8, "n": 12, "k": 16}, layer="gate"
    )  # misaligned, tiny
    big = b.tensor_op(dtype="float16", dims={"m": 4096, "n": 4096, "k": 4096}, layer="ffn")
    facts = b.placement_facts(tensor_ops=[small, big])
    assert run(TensorCoreMisaligned, facts) == []
    (finding,) = run(TensorCoreMisaligned, facts, min_fraction=0.0)
    assert finding.evidence["misaligned_work_share"] == 0.0
    # a misaligned third of the work
    odd = b.tensor_op(dtype="float16", dims={"m": 4096, "n": 4096, "k": 2052}, layer="odd")
    facts = b.placement_facts(tensor_ops=[odd, big])
    (finding,) = run(TensorCoreMisaligned, facts)
    assert finding.evidence["misaligned_work_share"] == 0.334
    assert finding.evidence["layers"][0]["dims"] == {"k": "2052 -> 2056"}
    assert run(TensorCoreMisaligned, facts, min_fraction=0.5) == []


def test_unused_says_the_training_step_is_compiled_with_xla():
    train = "train_step (train.py:12)"
    ops = [
        b.tensor_op(function=train, jit_compile=True, location="train.py:15"),
        b.tensor_op(function=train, jit_compile=True, gradient=True, location="train.py:16"),
    ]
    (f,) = run(TensorCoreUnused, b.placement_facts(tensor_ops=ops))
    assert f.evidence["largest_from"] == f"{train} (the training step, XLA-compiled)"


def test_token_ids_through_a_float_input_are_made_int32_before_mixed_precision():
    from gpuwhy.facts import FloatIndex

    index = FloatIndex(
        op="GatherV2",
        node="functional/token_and_position_embedding/embedding/GatherV2",
        layer="token_and_position_embedding/embedding",
        dtype="float32",
        location="train.py:20",
        input_name="inputs",
        input_location="train.py:24",
        input_written="layers.Input(shape=(maxlen,))",
    )
    (f,) = run(TensorCoreUnused, float32_model(float_indices=(index,)))
    lines = f.fix.removeprefix(CPU_ONLY_NOTE).splitlines()
    at = lines.index("# train.py:24: in place of: inputs = layers.Input(shape=(maxlen,))")
    assert lines[at + 1] == 'inputs = layers.Input(shape=(maxlen,), dtype="int32")'
    assert lines[at + 2].startswith("keras.mixed_precision.set_global_policy('mixed_float16')")
    assert "GatherV2 (train.py:20) as float32" in f.fix
    # the Input nested in a list (Sequential): the call itself is replaced
    nested = replace(index, input_name=None, input_written="keras.Input((16,))")
    (f,) = run(TensorCoreUnused, float32_model(float_indices=(nested,)))
    assert '# train.py:24: in place of: keras.Input((16,))\nkeras.Input((16,), dtype="int32")' in (
        f.fix
    )
    # which Input carries the ids is not known: no mixed precision to paste without it
    unnamed = replace(index, input_name=None, input_location=None, input_written=None)
    (f,) = run(TensorCoreUnused, float32_model(float_indices=(unnamed,)))
    assert "set_global_policy" not in f.fix and 'dtype="int32"' in f.fix
    assert not [line for line in f.fix.splitlines() if not line.startswith("#")]
