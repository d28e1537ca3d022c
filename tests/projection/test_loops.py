"""While loops in the projection: a body runs once per iteration, and Keras' LSTM/GRU
loops run as cuDNN's kernels on a GPU, where Keras compiles no step with XLA."""

from dataclasses import replace

import pytest
import tensorflow as tf

import gpuwhy
from gpuwhy.collect.placement.loops import with_time_steps
from gpuwhy.facts import Facts, KernelWork, ProgramFacts
from gpuwhy.gpu_specs import find_gpu
from gpuwhy.projection.cost import LAUNCH_S, project_step, rnn_layer
from gpuwhy.projection.step import projection_facts
from gpuwhy.tfapi.keras_hooks import cudnn_rnn_layers, rnn_time_steps
from tests import builders as b
from tests.projection.test_cost import placement, train_function

A100 = find_gpu("A100")
KERAS = "multi_step_on_iterator (train.py:30)"
FORWARD = "sequential/lstm_1/while"
BACKWARD = "gradient_tape/sequential/lstm_1/while/sequential/lstm_1/while_grad"


def _runs(fn, *args):
    placement = gpuwhy.audit(fn, *args).facts.placement
    return [(op.runs, op.loop) for op in placement.tensor_ops]


def test_a_loop_s_matmuls_run_as_many_times_as_its_maximum_iterations():
    w = tf.random.normal([32, 32])

    @tf.function
    def decode(h):  # a fixed number of decoding steps
        def body(i, h):
            return i + 1, tf.tanh(h @ w)

        return tf.while_loop(lambda i, h: i < 100, body, (0, h), maximum_iterations=30)[1]

    @tf.function
    def until_small(h):  # iterations the graph does not fix
        while tf.reduce_sum(h) > 1.0:
            h = tf.tanh(h @ w) * 0.5
        return h

    h = tf.random.normal([4, 32])
    assert _runs(decode, h) == [(30, "while")]
    assert _runs(until_small, h) == [(None, "while")]


def test_keras_lstm_over_t_timesteps_runs_its_cell_t_times_forward_and_back():
    model = tf.keras.Sequential(
        [tf.keras.Input((40, 6)), tf.keras.layers.LSTM(16), tf.keras.layers.Dense(1)]
    )
    model.compile(optimizer="adam", loss="mse")
    x, y = tf.random.normal([8, 40, 6]), tf.random.normal([8, 1])
    placement = gpuwhy.audit(model, x, y).facts.placement
    looped = [op for op in placement.tensor_ops if op.loop]
    assert looped and all(op.runs == 40 for op in looped)
    assert {rnn_layer(op.loop, ("lstm",)) for op in looped} == {"lstm"}  # forward and back
    assert any(op.gradient for op in looped) and any(not op.gradient for op in looped)
    (function,) = placement.functions
    assert all(k.runs == 40 for k in function.kernels if k.loop)


def test_which_keras_rnn_layers_a_gpu_runs_with_cudnn():
    """Keras 3's own conditions (lstm.py, gru.py, backend/tensorflow/rnn.py): tanh and
    sigmoid, no unroll, a bias (GRU: reset_after), use_cudnn left "auto"; a recurrent
    dropout keeps the loop but still turns XLA off."""

    def model(*layers):
        return tf.keras.Sequential([tf.keras.Input((10, 4)), *layers, tf.keras.layers.Dense(1)])

    layers = tf.keras.layers
    assert cudnn_rnn_layers(model(layers.LSTM(8, name="enc"))) == (("enc",), True)
    assert cudnn_rnn_layers(model(layers.GRU(8, name="g"))) == (("g",), True)
    assert cudnn_rnn_layers(model(layers.LSTM(8, activation="relu"))) == ((), False)
    assert cudnn_rnn_layers(model(layers.GRU(8, reset_after=False))) == ((), False)
    assert cudnn_rnn_layers(model(layers.LSTM(8, use_cudnn=False))) == ((), False)
    assert cudnn_rnn_layers(model(layers.LSTM(8, unroll=True))) == ((), False)
    assert cudnn_rnn_layers(model(layers.LSTM(8, recurrent_dropout=0.2))) == ((), True)
    both = model(layers.Bidirectional(layers.LSTM(8, name="fw")))
    assert sorted(cudnn_rnn_layers(both)[0]) == ["backward_fw", "forward_fw"]


def test_an_rnn_layers_time_steps_come_from_the_models_input_where_it_fixes_them():
    """A dataset can leave the time dimension unknown in the traced step
    (timeseries_dataset_from_array): the model's Input still fixes it."""
    layers = tf.keras.layers
    inputs = tf.keras.Input((120, 7))
    out = layers.Dense(1)(
        layers.GRU(8, name="g")(layers.LSTM(8, return_sequences=True, name="enc")(inputs))
    )
    assert rnn_time_steps(tf.keras.Model(inputs, out)) == {"enc": 120, "g": 120}
    both = tf.keras.Sequential(
        [tf.keras.Input((30, 4)), layers.Bidirectional(layers.LSTM(8, name="fw"))]
    )
    assert rnn_time_steps(both) == {"forward_fw": 30, "backward_fw": 30}
    ragged = tf.keras.Sequential([tf.keras.Input((None, 4)), layers.LSTM(8)])
    assert rnn_time_steps(ragged) == {}  # no static length: nothing to take


def test_loops_the_graph_left_unknown_take_the_models_time_steps():
    unknown = _lstm_placement(1)
    unknown = replace(
        unknown,
        tensor_ops=tuple(replace(op, runs=None) for op in unknown.tensor_ops)
        + (b.tensor_op(function=KERAS, loop="model/other_rnn/while", runs=None),),
    )
    filled = with_time_steps(unknown, {"lstm": 120})
    assert {op.loop: op.runs for op in filled.tensor_ops} == {
        FORWARD: 120,
        BACKWARD: 120,
        "model/other_rnn/while": None,  # no layer of that name
    }
    before = {k.op: k for k in unknown.functions[0].kernels}
    after = {k.op: k for k in filled.functions[0].kernels}
    assert (after["Sigmoid"].count, after["Sigmoid"].bytes, after["Sigmoid"].runs) == (
        120 * before["Sigmoid"].count,
        120 * before["Sigmoid"].bytes,
        120,
    )
    assert after["Relu"] == before["Relu"]  # not in a loop
    lstm_only = with_time_steps(replace(unknown, tensor_ops=unknown.tensor_ops[:-1]), {"lstm": 120})
    assert project_step(lstm_only, A100, cudnn_layers=("lstm",)).tensor.mid == pytest.approx(
        project_step(_lstm_placement(120), A100, cudnn_layers=("lstm",)).tensor.mid
    )
    # loops whose iterations the graph fixes are left as they are
    assert with_time_steps(_lstm_placement(60), {"lstm": 120}) == _lstm_placement(60)


def test_rnn_loops_are_told_by_their_layer_s_name_scope():
    assert rnn_layer(FORWARD, ("lstm",)) == "lstm" == rnn_layer(BACKWARD, ("lstm",))
    assert rnn_layer("model/enc/while", ("enc",)) == "enc"
    assert rnn_layer(FORWARD, ("lstm_2",)) is None
    assert rnn_layer("while", ("lstm",)) is None


def _lstm_placement(timesteps: int = 120):
    """A Keras LSTM step: one timestep's matmuls (batch 256, 512 units) in its forward
    and backward loops, and each loop's gate arithmetic."""
    cell = dict(function=KERAS, runs=timesteps)
    ops = [
        b.tensor_op(dims={"m": 256, "n": 2048, "k": 512}, loop=FORWARD, **cell),
        b.tensor_op(dims={"m": 256, "n": 2048, "k": 512}, loop=BACKWARD, gradient=True, **cell),
        b.tensor_op(dims={"m": 512, "n": 2048, "k": 256}, loop=BACKWARD, gradient=True, **cell),
    ]
    gates = 64 * 1024 * 4 * timesteps
    kernels = (
        KernelWork("Sigmoid", count=3 * timesteps, bytes=gates, sized=3 * timesteps,
                   loop=FORWARD, runs=timesteps),
        KernelWork("Mul", count=9 * timesteps, bytes=3 * gates, sized=9 * timesteps,
                   loop=BACKWARD, runs=timesteps),
        KernelWork("Relu", count=1, bytes=4_000_000, sized=1),
    )  # fmt: skip
    step = train_function(name="multi_step_on_iterator", location="train.py:30", kernels=kernels)
    return placement(tensor_ops=ops, functions=(step,))


def test_an_lstm_is_costed_over_its_timesteps_as_cudnn_runs_it():
    once = project_step(_lstm_placement(1), A100)
    many = project_step(_lstm_placement(120), A100)
    # 120 timesteps: 120 times one timestep's matmuls (each above its launch here)
    assert many.tensor.mid == pytest.approx(120 * once.tensor.mid)
    cudnn = project_step(_lstm_placement(120), A100, cudnn_layers=("lstm",))
    assert cudnn.tensor.mid == pytest.approx(many.tensor.mid)
    assert set(cudnn.cudnn_loops) == {FORWARD, BACKWARD}
    # the gate arithmetic: one fused kernel a timestep in each loop, not one an op
    assert cudnn.kernels.mid < many.kernels.mid
    assert cudnn.kernels.mid >= 2 * 120 * LAUNCH_S[1]
    # a timestep's matmul smaller than a launch still costs one each iteration
    tiny = replace(_lstm_placement(120).tensor_ops[0], flops=1000)
    alone = project_step(
        replace(_lstm_placement(120), tensor_ops=(tiny,)), A100, cudnn_layers=("lstm",)
    )
    assert alone.tensor.mid == pytest.approx(120 * LAUNCH_S[1])
    # cuDNN batches the input projection and weight gradients over the sequence: two
    # tiny matmuls of a timestep are one launch a timestep, as a loop of ops two
    two = replace(_lstm_placement(120), tensor_ops=(tiny, replace(tiny, node="x/MatMul_1")))
    fused = project_step(two, A100, cudnn_layers=("lstm",))
    assert fused.tensor.mid == pytest.approx(120 * LAUNCH_S[1])
    assert project_step(two, A100).tensor.mid == pytest.approx(240 * LAUNCH_S[1])


def test_keras_compiles_no_step_with_a_cudnn_rnn_with_xla_on_a_gpu():
    program = ProgramFacts(command=("train.py",), keras_auto_jit=False, keras_cudnn_rnn=("lstm",))
    found = projection_facts(Facts(placement=_lstm_placement(), program=program), "A100")
    assert found.jit_compile is False
    (note,) = [n for n in found.notes if "cuDNN" in n]
    assert note.startswith("Keras runs lstm with cuDNN on a GPU")
    assert "no step of such a model with XLA" in note
    assert any("run in while loops of 120 iterations" in n for n in found.notes)
    assert "one timestep is costed" not in note
    # a dataset whose time dimension was traced unknown: the loop's iterations are not
    # in the graph, and the cuDNN note says one timestep is costed, not each
    unknown = _lstm_placement()
    unknown = replace(
        unknown, tensor_ops=tuple(replace(op, runs=None) for op in unknown.tensor_ops)
    )
    found = projection_facts(Facts(placement=unknown, program=program), "A100")
    (note,) = [n for n in found.notes if "cuDNN" in n]
    assert "here it does not" in note and "one timestep is costed" in note
    # compile(jit_compile=True) traced with XLA here: Keras turns it off on a GPU
    traced = _lstm_placement()
    jitted = replace(traced, functions=(replace(traced.functions[0], jit_compile=True),))
    program = replace(program, keras_auto_jit=None)
    assert projection_facts(Facts(placement=jitted, program=program), "A100").jit_compile is False
