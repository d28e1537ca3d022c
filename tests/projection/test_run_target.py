"""`gpuwhy run --target GPU` on a real Keras fit: the projection, said to be one."""

import json
import textwrap

import pytest

from tests.test_run_tensorflow import line_with, run

# 128 batches an epoch: the pipeline's time per batch (11-44 µs on a loaded host) is its
# stage timers' total over the batches, against a projected step of 0.1-0.2 ms; with 16
# batches an epoch, 7 ms of waits for a core inside the pipeline were enough to make it
# input-bound. 4 epochs: in 2 runs of 6 (at 912b0d8 as after it) the timers held a
# one-off of ~0.1 s, 0.38-0.40 ms a batch over 2 epochs' 256 (a full suite's run once
# made it input-bound); a short run's one-off is not spread over its batches yet
SCRIPT = textwrap.dedent("""
    import numpy as np
    import tensorflow as tf

    x = np.random.rand(4096, 16).astype("float32")
    y = np.random.rand(4096, 1).astype("float32")
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
    model = tf.keras.Sequential([
        tf.keras.Input((16,)), tf.keras.layers.Dense(256, activation="relu"),
        tf.keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    model.fit(ds, epochs=4, verbose=0)   # fit-here
    print("done")
""")


def test_a_run_projected_onto_an_a100(tmp_path):
    script = tmp_path / "fit.py"
    script.write_text(SCRIPT)
    out = tmp_path / "r.json"
    result = run("--target", "a100", "--json", out, script, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == "done\n"  # the program's output, unchanged
    projection = json.loads(out.read_text())["projection"]
    assert projection["gpu"] == "A100" and projection["requested"] == "a100"
    assert projection["function"].endswith(f"(fit.py:{line_with(script, 'fit-here')})")
    # compile's default jit_compile="auto": Keras XLA-compiles this step on a GPU machine
    assert json.loads(out.read_text())["program"]["keras_auto_jit"] is True
    assert projection["batch"] == 32 and projection["jit_compile"] is True
    assert "Keras compile(jit_compile='auto') XLA-compiles" in result.stderr
    assert 0 < projection["step_low_s"] < projection["step_s"] < projection["step_high_s"]
    assert projection["tensor_ops"] >= 4 and projection["tensor_ops_unsized"] == 0
    assert "Projected on A100 (a projection from the traced graph" in result.stderr
    (verdict,) = [line for line in result.stderr.splitlines() if line.startswith(("✗", "✓"))]
    assert ", on an A100 (projected): step " in verdict


def test_a_step_compiled_without_xla_is_projected_without_it(tmp_path):
    """compile(jit_compile=False): the step a GPU would run is the one traced here."""
    script = tmp_path / "fit.py"
    script.write_text(SCRIPT.replace('loss="mse")', 'loss="mse", jit_compile=False)'))
    out = tmp_path / "r.json"
    result = run("--target", "A100", "--json", out, script, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(out.read_text())
    assert record["program"]["keras_auto_jit"] is None
    assert record["projection"]["jit_compile"] is False
    assert record["projection"]["calibrated"] is False
    assert "XLA-compiles" not in result.stderr


def test_an_unknown_target_is_one_line_and_nothing_runs(tmp_path):
    script = tmp_path / "fit.py"
    script.write_text("print('ran')\n")
    result = run("--target", "Voodoo 5", script, cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("gpuwhy: error: no GPU named 'Voodoo 5': --target takes one of V100")


STARVED = textwrap.dedent("""
    import time
    import numpy as np
    import tensorflow as tf

    def load(i):
        time.sleep(0.002)          # a file read, a JPEG decode in Python ...
        return np.random.rand(16).astype("float32"), np.float32(1.0)

    ds = tf.data.Dataset.range(512).map(
        lambda i: tf.numpy_function(load, [i], (tf.float32, tf.float32)))
    ds = ds.map(lambda x, y: (tf.ensure_shape(x, [16]), tf.ensure_shape(y, [])))
    ds = ds.batch(32)
    model = tf.keras.Sequential([
        tf.keras.Input((16,)), tf.keras.layers.Dense(256, activation="relu"),
        tf.keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    model.fit(ds, epochs=2, verbose=0)
""")


# The pattern of TF's "Load and preprocess images" tutorial: decoded, batched images,
# normalised, then cache().prefetch(): after the first epoch a batch is a cache read.
# 32 batches an epoch: with 8, 6 ms of waits for a core in the cached epochs' reads were
# enough to make it input-bound (against a projected step of 0.17-0.37 ms). The first
# epoch's map counts as one of the run's passes (57 us a batch here, quiet): 10 epochs, so
# that a loaded host slowing that map tenfold does not make the healthy pipeline wait
# (with 5, a full suite's load beside it once did)
CACHED = textwrap.dedent("""
    import numpy as np
    import tensorflow as tf

    images = np.random.randint(0, 256, (1024, 32, 32, 3)).astype("uint8")
    labels = np.random.randint(0, 10, 1024)
    normalize = tf.keras.layers.Rescaling(1.0 / 255)
    train_ds = tf.data.Dataset.from_tensor_slices((images, labels)).batch(32)
    train_ds = train_ds.map(lambda x, y: (normalize(x), y))
    train_ds = train_ds.cache().prefetch(buffer_size=tf.data.AUTOTUNE)
    model = tf.keras.Sequential([
        tf.keras.Input((32, 32, 3)),
        tf.keras.layers.Conv2D(16, 3, activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Conv2D(32, 3, activation="relu"),
        tf.keras.layers.GlobalAveragePooling2D(),
        tf.keras.layers.Dense(10)])
    model.compile(optimizer="adam",
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    model.fit(train_ds, epochs=10, verbose=0)
""")


def test_a_starving_pipeline_is_projected_input_bound_and_a_healthy_one_is_not(tmp_path):
    from gpuwhy.formatting import duration

    found, records, verdicts = {}, {}, {}
    for name, source in (("starved", STARVED), ("healthy", SCRIPT), ("cached", CACHED)):
        script = tmp_path / f"{name}.py"
        script.write_text(source)
        out = tmp_path / f"{name}.json"
        result = run("--target", "A100", "--json", out, script, cwd=tmp_path)
        assert result.returncode in (0, 1), result.stderr[-3000:]
        records[name] = record = json.loads(out.read_text())
        found[name] = {f["id"]: f for f in record["findings"]}
        (verdicts[name],) = [
            line for line in result.stderr.splitlines() if line.startswith(("✗", "✓"))
        ]
    projected = found["starved"]["input.projected-bound"]
    assert projected["severity"] == "high"
    assert projected["title"].startswith("On A100 (projected), steps would wait for input")
    # the pipeline's own time per batch (TF's stage timers; where they gave more than
    # the steps got, the batches as the steps got them: they waited nearly all the time)
    starved = records["starved"]["projection"]
    own = (
        duration(starved["input_batch_s"])
        if starved["input_batch_s"] is not None
        else f"{duration(starved['input_batch_measured_s'])} (as the steps got their batches)"
    )
    assert f"the pipeline takes {own} per batch here" in projected["title"]
    assert "of it waiting for input" in verdicts["starved"].split("(projected)")[1]
    # Keras' accuracy metric leaves int32 edges in host memory in a step placed op by
    # op; the step a GPU runs is XLA-compiled (jit_compile="auto"), and the audit places
    # it so: no copies between its ops, in the placement as in the projection
    cached = records["cached"]
    (step,) = [
        f
        for f in cached["placement"]["functions"]
        if cached["projection"]["function"].startswith(f["name"] + " (")
    ]
    assert cached["projection"]["jit_compile"] is True and step["step_copies"] == 0
    assert cached["projection"]["copies_s"] < (step["input_copies"] + 1) * 10e-6 + 1e-4
    for healthy in ("healthy", "cached"):
        assert "input.projected-bound" not in found[healthy]
        # no projected share that no finding supports
        assert "waiting for input" not in verdicts[healthy].split("(projected)")[1]


EAGER = textwrap.dedent("""
    import time
    import tensorflow as tf

    model = tf.keras.Sequential([tf.keras.layers.Dense(64, activation="relu"),
                                 tf.keras.layers.Dense(10)])
    opt = tf.keras.optimizers.Adam()
    ds = tf.data.Dataset.from_tensor_slices(
        (tf.random.normal([2048, 32]), tf.random.uniform([2048], maxval=10, dtype=tf.int64))
    ).batch(32)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    started = time.perf_counter()
    while time.perf_counter() - started < 4:
        for x, y in ds:   # the-loop
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
""")


def test_an_eager_training_loop_is_projected_as_python_bound(tmp_path):
    script = tmp_path / "eager.py"
    script.write_text(EAGER)
    out = tmp_path / "r.json"
    result = run("--target", "A100", "--json", out, script, cwd=tmp_path)
    assert result.returncode in (0, 1), result.stderr[-3000:]
    record = json.loads(out.read_text())
    projection, eager = record["projection"], record["eager"]
    assert projection["graph"] is False
    assert projection["function"].startswith("the eager step (")
    assert projection["eager_ops_per_step"] == round(eager["per_step"], 1) > 50
    assert projection["step_s"] == projection["eager_s"] > 0  # nothing else known to cost
    (verdict,) = [line for line in result.stderr.splitlines() if line.startswith(("✗", "✓"))]
    assert "on an A100 (projected): step at least " in verdict
    (finding,) = [f for f in record["findings"] if f["id"] == "launch.eager-ops"]
    assert finding["severity"] == "high" and "projected" in finding["evidence"]


def test_nothing_to_project_is_said_in_one_note(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("import tensorflow as tf\nprint(int(tf.constant(2) + 3))\n")
    result = run("--target", "A100", script, cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == "5\n"
    assert "no projection onto A100: no tf.function was traced" in result.stderr


CPU_OPS = textwrap.dedent("""
    import time
    import tensorflow as tf

    PARSE = True
    x = tf.random.normal([512, 64])
    y = tf.random.normal([512, 1])
    model = tf.keras.Sequential([
        tf.keras.Input((64,)), tf.keras.layers.Dense(128, activation="relu"),
        tf.keras.layers.Dense(1)])
    opt = tf.keras.optimizers.SGD(0.01)
    w = tf.random.normal([64, 64])

    def on_the_cpu(x):
        parsed = tf.strings.to_number(tf.strings.as_string(x))   # no GPU kernel
        with tf.device("/CPU:0"):
            mixed = tf.matmul(tf.matmul(parsed, w), w, transpose_b=True)   # pinned there
        return parsed + 1e-3 * mixed

    @tf.function
    def reference(x):
        return on_the_cpu(x)

    @tf.function
    def train_step(x, y):
        if PARSE:
            x = on_the_cpu(x)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x) - y) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    times = []   # what the CPU ops take alone, called 30 times (before training: warms first)
    for _ in range(30):
        started = time.perf_counter()
        reference(x).numpy()
        times.append(time.perf_counter() - started)
    print(f"{sorted(times)[15]:.6f}")
    started = time.perf_counter()
    while time.perf_counter() - started < 3:
        train_step(x, y)
""")


def test_ops_that_stay_on_the_cpu_are_costed_at_their_measured_time(tmp_path):
    found = {}
    for name, source in (("cpu", CPU_OPS), ("plain", CPU_OPS.replace("PARSE = True", "PARSE = 0"))):
        script = tmp_path / f"{name}.py"
        script.write_text(source)
        out = tmp_path / f"{name}.json"
        result = run("--target", "A100", "--json", out, script, cwd=tmp_path)
        assert result.returncode in (0, 1), result.stderr[-3000:]
        found[name] = (json.loads(out.read_text())["projection"], float(result.stdout), result)
    projection, alone_s, result = found["cpu"]
    # AsString, StringToNumber, two MatMuls under tf.device: all four of train_step's
    assert (projection["cpu_ops"], projection["cpu_ops_measured"]) == (4, 4)
    assert projection["cpu_ops_measured_by"].startswith("TF profiler host trace of ")
    # what they took in the steps, against the same ops called alone (plus a call's cost)
    assert 0.25 * alone_s < projection["cpu_ops_s"] < 2 * alone_s
    assert projection["cpu_ops_low_s"] < projection["cpu_ops_s"] < projection["cpu_ops_high_s"]
    plain = found["plain"][0]
    assert plain["cpu_ops"] == 0 and plain["cpu_ops_s"] == 0.0  # only reference() has them
    assert projection["step_s"] > plain["step_s"] + 0.5 * projection["cpu_ops_s"]
    assert "ops on the CPU " in result.stderr and "4 of them measured here" in result.stderr
    (verdict,) = [line for line in result.stderr.splitlines() if line.startswith(("✗", "✓"))]
    assert "of it ops that stay on the CPU (measured here)" in verdict


GENERATOR = textwrap.dedent("""
    import numpy as np
    import tensorflow as tf

    def batches(batch=48):
        while True:
            yield np.random.rand(batch, 32, 32, 3).astype("float32"), np.random.randint(0, 10, batch)

    model = tf.keras.Sequential([tf.keras.Input((32, 32, 3)), tf.keras.layers.Conv2D(16, 3),
                                 tf.keras.layers.GlobalAveragePooling2D(), tf.keras.layers.Dense(10)])
    model.compile(optimizer="adam",
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(batches(), steps_per_epoch=20, epochs=2, verbose=0)
""")


def test_a_generator_s_batch_size_is_read_from_the_bytes_it_delivered(tmp_path):
    """Keras fit on a Python generator: the spec leaves the batch unknown; the bytes TF
    counted per delivered element over one example's bytes give 48, so every
    convolution is sized (before, all were left out and the step was launches only)."""
    script = tmp_path / "gen.py"
    script.write_text(GENERATOR)
    out = tmp_path / "r.json"
    result = run("--target", "A100", "--json", out, script, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(out.read_text())
    (pipeline,) = [p for p in record["tfdata"]["pipelines"] if p["consumer"] == "keras-fit"]
    assert pipeline["example_bytes"] == 32 * 32 * 3 * 4 + 8
    assert pipeline["delivered_bytes"] == pipeline["elements"] * 48 * pipeline["example_bytes"]
    projection = record["projection"]
    assert projection["batch"] == 48 and projection["tensor_ops_unsized"] == 0


RNN = textwrap.dedent("""
    import numpy as np
    import tensorflow as tf

    TIMESTEPS = 60
    x = np.random.rand(256, TIMESTEPS, 8).astype("float32")
    y = np.random.rand(256, 1).astype("float32")
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(32).prefetch(tf.data.AUTOTUNE)
    model = tf.keras.Sequential([
        tf.keras.Input((TIMESTEPS, 8)),
        tf.keras.layers.LSTM(32, name="encoder"),
        tf.keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    model.fit(ds, epochs=2, verbose=0)
""")


def test_an_lstm_is_projected_over_its_timesteps_as_cudnn_runs_it_without_xla(tmp_path):
    """Keras 3 runs this LSTM with cuDNN on a GPU and then compiles no step with XLA;
    here, without a GPU, it is a while loop of one timestep's matmuls."""
    from dataclasses import replace

    from gpuwhy.facts import TensorOp
    from gpuwhy.gpu_specs import find_gpu
    from gpuwhy.projection.cost import tensor_time

    script = tmp_path / "rnn.py"
    script.write_text(RNN)
    out = tmp_path / "r.json"
    result = run("--target", "A100", "--json", out, script, cwd=tmp_path)
    assert result.returncode in (0, 1), result.stderr[-3000:]
    record = json.loads(out.read_text())
    assert record["program"]["keras_auto_jit"] is False
    assert record["program"]["keras_cudnn_rnn"] == ["encoder"]
    projection = record["projection"]
    assert projection["jit_compile"] is False and projection["cudnn_rnn"] == ["encoder"]
    assert "XLA-compiles" not in result.stderr
    assert any(n.startswith("Keras runs encoder with cuDNN on a GPU") for n in projection["notes"])
    ops = [
        TensorOp(**{**op, "dims": op["dims"] or {}})
        for op in record["placement"]["tensor_ops"]
        if op["function"] == projection["function"]
    ]
    looped = [op for op in ops if op.loop]
    assert looped and all(op.runs == 60 for op in looped)
    a100 = find_gpu("A100")
    cudnn = frozenset(op.loop for op in looped if op.loop)
    # a timestep's matmuls as cuDNN batches them (at least one launch), 60 times
    one_timestep = tensor_time([replace(op, runs=1) for op in looped], a100, True, cudnn)
    assert projection["tensor_s"] >= 60 * one_timestep.mid * 0.999
    assert projection["tensor_s"] == pytest.approx(
        tensor_time(ops, a100, True, cudnn).mid, rel=1e-6
    )
