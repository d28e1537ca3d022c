"""Each kind of fix from small facts and a real source file: pure functions, no run."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gpuwhy.facts import (
    EagerFacts,
    Facts,
    PipelineFacts,
    PipelineStage,
    ProgramFacts,
    ReboundName,
    StepCode,
    StepFacts,
    StepLoop,
    TfDataFacts,
    TracedFunction,
    TraceSignature,
    TracingFacts,
)
from gpuwhy.finding import Finding
from gpuwhy.source_calls import output_layers
from gpuwhy.trial.candidate import SourceFiles
from gpuwhy.trial.kinds import plan
from gpuwhy.trial.source_edits import apply

PROGRAM = """import tensorflow as tf

tf.keras.backend.set_floatx("float64")
ds = tf.data.Dataset.range(10).map(lambda x: x * 2).batch(2)
model = make_model()
model.compile(optimizer="adam", loss="mse")


def train_step(x, rate):
    with tf.GradientTape() as tape:
        with tf.device("/CPU:0"):
            y = x * 2
    return y


@tf.function
def traced(x, rate):
    return x * rate


for x in ds:
    train_step(x, 0.1)
    traced(x, 0.1)
model.fit(ds, epochs=1)
"""


def setup(tmp_path: Path) -> tuple[str, SourceFiles]:
    path = tmp_path / "train.py"
    path.write_text(PROGRAM)
    return str(path), SourceFiles(root=str(tmp_path), script=str(path))


def finding(id_: str, location: str | None = None, title: str = "") -> Finding:
    return Finding(id_, "high", title or id_, location=location)


def edited(path: str, candidate) -> str:
    return apply(Path(path).read_text(), candidate.edits)


def test_eager_ops_decorates_the_step_def_plain_and_with_xla(tmp_path):
    path, files = setup(tmp_path)
    facts = Facts(
        eager=EagerFacts(
            1, 100, step_code=StepCode("train_step", f"{path}:9", "def train_step(x, rate):")
        )
    )
    found, refused = plan([finding("launch.eager-ops")], facts, files)
    assert [c.fix for c in found] == [
        "train_step traced: @tf.function",
        "train_step traced and XLA-compiled",
    ]
    assert "@tf.function\ndef train_step(x, rate):" in edited(path, found[0])
    assert "@tf.function(jit_compile=True)\ndef train_step" in edited(path, found[1])
    assert refused == []


def test_a_loop_body_step_is_refused_with_why(tmp_path):
    path, files = setup(tmp_path)
    facts = Facts(eager=EagerFacts(1, 100, step_code=StepCode(None, f"{path}:20")))
    found, refused = plan([finding("launch.eager-ops")], facts, files)
    assert found == [] and "loop's body" in refused[0].why


def test_a_changing_python_float_is_passed_as_a_float32_tensor_at_each_caller(tmp_path):
    path, files = setup(tmp_path)
    signatures = tuple(
        TraceSignature(
            0.1 * k, (("x", "int64[2]"), ("rate", f"0.{k} (float)")), caller=f"{path}:23"
        )
        for k in range(1, 4)
    )
    fn = TracedFunction(
        "traced", f"{path}:16", traces=3, changed_args=("rate",), signatures=signatures
    )
    facts = Facts(tracing=TracingFacts(functions=(fn,)))
    found, _ = plan([finding("launch.retracing", f"{path}:16")], facts, files)
    assert [c.fix for c in found] == ["rate passed to traced as a float32 tensor"]
    assert "    traced(x, tf.constant(0.1, tf.float32))\n" in edited(path, found[0])


def test_a_changing_python_int_gets_one_candidate_per_dtype(tmp_path):
    path, files = setup(tmp_path)
    signatures = tuple(
        TraceSignature(k, (("x", "int64[2]"), ("rate", f"{k} (int)")), caller=f"{path}:23")
        for k in range(3)
    )
    fn = TracedFunction(
        "traced", f"{path}:16", traces=3, changed_args=("rate",), signatures=signatures
    )
    found, _ = plan(
        [finding("launch.retracing", f"{path}:16")], Facts(tracing=TracingFacts((fn,))), files
    )
    assert [c.fix.split(" as ")[1] for c in found] == [
        "an int64 tensor",
        "an int32 tensor",
        "a float32 tensor",  # an int the function does float math with
    ]


def test_several_changing_python_scalars_are_passed_as_tensors_together(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(
        "import tensorflow as tf\n\n\n"
        "@tf.function\n"
        "def step(x, lr, n):\n"
        "    return x * lr + tf.cast(n, tf.float32)\n\n\n"
        "for n in range(3):\n"
        "    step(1.0, 0.1 * n, n)\n"
    )
    files = SourceFiles(root=str(tmp_path), script=str(path))
    signatures = tuple(
        TraceSignature(
            0.1 * k,
            (("x", "1.0 (float)"), ("lr", f"0.{k} (float)"), ("n", f"{k} (int)")),
            caller=f"{path}:10",
        )
        for k in range(3)
    )
    fn = TracedFunction(
        "step", f"{path}:4", traces=3, changed_args=("lr", "n"), signatures=signatures
    )
    facts = Facts(tracing=TracingFacts(functions=(fn,)))
    found, _ = plan([finding("launch.retracing", f"{path}:4")], facts, files)
    # each alone leaves the other one tracing every call: only both at once are tried
    assert [c.fix for c in found] == [
        "lr (float32) and n (int64) passed to step as tensors",
        "lr (float32) and n (int32) passed to step as tensors",
        "lr (float32) and n (float32) passed to step as tensors",
    ]
    assert "    step(1.0, tf.constant(0.1 * n, tf.float32), tf.constant(n, tf.int64))\n" in edited(
        str(path), found[0]
    )


def test_float64_tries_keras_floatx(tmp_path):
    path, files = setup(tmp_path)
    found, _ = plan([finding("placement.float64")], Facts(), files)
    assert found[0].fix.startswith("Keras' float type float32")
    assert 'set_floatx("float32")' in edited(path, found[0])
    assert found[0].tolerance == 0.1


def test_forced_cpu_removes_the_innermost_cpu_block_holding_the_line(tmp_path):
    path, files = setup(tmp_path)
    found, _ = plan([finding("placement.forced-cpu", f"{path}:12")], Facts(), files)
    (c,) = found
    assert c.device_effect
    text = edited(path, c)
    assert "device" not in text and "        y = x * 2\n    return y" in text


def test_a_sequential_map_goes_parallel_and_the_pipeline_gets_a_prefetch(tmp_path):
    path, files = setup(tmp_path)
    stages = (
        PipelineStage("Range", "source", ("range",), f"{path}:4"),
        PipelineStage("Map", "map", ("map",), f"{path}:4", function="<lambda>"),
        PipelineStage("BatchV2", "batch", ("batch",), f"{path}:4"),
    )
    pipeline = PipelineFacts(1, location=f"{path}:4", stages=stages)
    found, _ = plan(
        [finding("input.bound")], Facts(tfdata=TfDataFacts(pipelines=(pipeline,))), files
    )
    text = edited(path, found[0])
    assert (
        "tf.data.Dataset.range(10).map(lambda x: x * 2, num_parallel_calls=tf.data.AUTOTUNE)"
        ".batch(2).prefetch(tf.data.AUTOTUNE)\n" in text
    )


def test_compile_gets_steps_per_execution_and_xla_for_the_fit_model(tmp_path):
    path, files = setup(tmp_path)
    steps = StepFacts(
        "keras-fit",
        "Model.fit",
        100,
        loops=(StepLoop("keras-fit", f"Model.fit at {path}:24", 100, 0.0),),
    )
    found, _ = plan([finding("launch.host-bound")], Facts(steps=steps), files)
    texts = [edited(path, c) for c in found]
    assert 'model.compile(optimizer="adam", loss="mse", steps_per_execution=32)' in texts[0]
    assert 'model.compile(optimizer="adam", loss="mse", jit_compile=True)' in texts[1]
    # an LSTM cuDNN runs on a GPU: Keras compiles no step of that model with XLA there,
    # so XLA is not tried (measured here it would be a change the GPU never makes)
    program = ProgramFacts(command=("train.py",), keras_cudnn_rnn=("lstm",))
    facts = Facts(steps=steps, program=program)
    found, refused = plan([finding("launch.projected-bound")], facts, files)
    assert [c.fix for c in found] == ["model.compile(steps_per_execution=32)"]
    assert any("cuDNN runs lstm on a GPU" in r.why for r in refused)
    # compile's jit_compile="auto": Keras XLA-compiles the step on a GPU already
    auto = Facts(steps=steps, program=ProgramFacts(command=("train.py",), keras_auto_jit=True))
    found, refused = plan([finding("launch.projected-bound")], auto, files)
    assert [c.fix for c in found] == ["model.compile(steps_per_execution=32)"]
    assert any("Keras compiles this step with XLA on a GPU already" in r.why for r in refused)


def test_a_location_outside_the_program_is_never_edited(tmp_path):
    _, files = setup(tmp_path)
    outside = Path(__file__).resolve()
    facts = Facts(eager=EagerFacts(1, 100, step_code=StepCode("fix", f"{outside}:1", "def fix():")))
    found, refused = plan([finding("launch.eager-ops")], facts, files)
    assert found == [] and "not a file of the program's" in refused[0].why


def test_the_reports_list_of_fixable_findings_is_the_trials():
    from gpuwhy.fixes.tried import TRIED_BY_FIX
    from gpuwhy.trial.kinds import fixable_ids

    assert fixable_ids() == TRIED_BY_FIX


EMBEDDING = """import keras

tokens = keras.Input((64,))
x = keras.layers.Embedding(20000, 32)(tokens)
model = keras.Model(tokens, keras.layers.Dense(2)(x))
"""


def test_mixed_precision_goes_after_the_imports_and_keeps_token_ids_integers(tmp_path):
    path = tmp_path / "text.py"
    path.write_text(EMBEDDING)
    files = SourceFiles(root=str(tmp_path), script=str(path))
    found, _ = plan([finding("tensorcore.unused")], Facts(), files)
    policy, typed = found
    assert policy.device_effect and policy.by_mean and policy.tolerance == 0.1
    text = edited(str(path), policy)
    assert text.startswith(
        'import keras\nkeras.mixed_precision.set_global_policy("mixed_bfloat16")\n'
    )
    assert policy.location == f"{path}:1"  # the import it goes after, not a line below
    assert 'keras.Input((64,), dtype="int32")' in edited(str(path), typed)
    # the model's output layer kept float32: the very line the finding's fix prints
    ((line, written, typed),) = output_layers(str(path), "dtype='float32'")
    assert written == "model = keras.Model(tokens, keras.layers.Dense(2)(x))"
    assert text.splitlines()[line] == typed  # one line down: the policy's line above it


WALKTHROUGH = """import tensorflow as tf

for epoch in range(3):
    loss_avg = tf.keras.metrics.Mean()

    for x, y in dataset:
        loss_value, grads = grad(model, x, y)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        loss_avg.update_state(loss_value)

    print(epoch, float(loss_avg.result()))
"""


def test_a_loop_body_becomes_a_traced_function_and_its_metrics_are_made_once(tmp_path):
    path = tmp_path / "walk.py"
    path.write_text(WALKTHROUGH)
    files = SourceFiles(root=str(tmp_path), script=str(path))
    body = (
        "loss_value, grads = grad(model, x, y)",
        "optimizer.apply_gradients(zip(grads, model.trainable_variables))",
        "loss_avg.update_state(loss_value)",
    )
    rebound = (ReboundName("loss_avg", f"{path}:4", f"{path}:3", metric=True),)
    code = StepCode(None, f"{path}:6", "def train_step(x, y):", rebound, body, f"{path}:3")
    found, _ = plan(
        [finding("launch.eager-ops")], Facts(eager=EagerFacts(1, 100, step_code=code)), files
    )
    text = edited(str(path), found[0])
    assert text == (
        "import tensorflow as tf\n\n"
        "loss_avg = tf.keras.metrics.Mean()\n\n\n"  # two blank lines around a top-level def
        "@tf.function\n"
        "def train_step(x, y):\n"
        "    loss_value, grads = grad(model, x, y)\n"
        "    optimizer.apply_gradients(zip(grads, model.trainable_variables))\n"
        "    loss_avg.update_state(loss_value)\n\n\n"
        "for epoch in range(3):\n"
        "    loss_avg.reset_state()\n\n"
        "    for x, y in dataset:\n"
        "        train_step(x, y)\n\n"
        "    print(epoch, float(loss_avg.result()))\n"
    )
    compile(text, "walk.py", "exec")


def test_a_loop_body_that_cannot_move_is_refused_with_why(tmp_path):
    path = tmp_path / "walk.py"
    path.write_text(WALKTHROUGH)
    files = SourceFiles(root=str(tmp_path), script=str(path))
    code = StepCode(None, f"{path}:6", "def train_step(x, y):", (), (), f"{path}:3")
    found, refused = plan(
        [finding("launch.eager-ops")], Facts(eager=EagerFacts(1, 100, step_code=code)), files
    )
    assert found == [] and "cannot move into a function as written" in refused[0].why


def cacheable_pipeline(path: str) -> TfDataFacts:
    """range -> parallel map -> batch at line 4, read three times, the same each pass."""
    stages = tuple(
        PipelineStage(name, kind, (kind,), f"{path}:4", repeats=True)
        for name, kind in (("Range", "range"), ("ParallelMapV2", "map"), ("BatchV2", "batch"))
    )
    stages = tuple(replace(s, parallelism=2) if s.kind == "map" else s for s in stages)
    pipeline = PipelineFacts(
        1, location=f"{path}:4", stages=stages, iterators=3, cardinality=5, element_bytes=16
    )
    return TfDataFacts(pipelines=(pipeline,), host_memory_available_bytes=1 << 30)


def test_a_cache_and_a_prefetch_at_the_same_place_are_one_edit(tmp_path):
    path, files = setup(tmp_path)
    tfdata = cacheable_pipeline(path)
    found, _ = plan([finding("input.no-cache")], Facts(tfdata=tfdata), files)
    assert ".batch(2).cache().prefetch(tf.data.AUTOTUNE)\n" in edited(path, found[0])


FLOAT64_LOOP = """import numpy as np
import tensorflow as tf

ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(64)
w = tf.Variable(tf.random.normal((4, 2), stddev=0.05, dtype=tf.float64))
b = tf.Variable(tf.zeros((2,), dtype=tf.float64))
"""


def test_float64_dtypes_become_float32_and_random_draws_are_cast_after_them(tmp_path):
    path = tmp_path / "loop.py"
    path.write_text(FLOAT64_LOOP)
    files = SourceFiles(root=str(tmp_path), script=str(path))
    source = PipelineStage("TensorSlice", "source", ("from_tensor_slices",), f"{path}:4")
    tfdata = TfDataFacts(pipelines=(PipelineFacts(1, location=f"{path}:4", stages=(source,)),))
    (c,) = plan([finding("placement.float64")], Facts(tfdata=tfdata), files)[0]
    assert c.fix.startswith("float32 for the 2 float64 dtype(s) the program names, and its tf.data")
    text = edited(str(path), c)
    assert "tf.cast(tf.random.normal((4, 2), stddev=0.05, dtype=tf.float64), tf.float32)" in text
    assert "tf.zeros((2,), dtype=tf.float32)" in text
    assert "from_tensor_slices((x, y)).map(lambda *e: tf.nest.map_structure(" in text
    compile(text, "loop.py", "exec")


EAGER_NUMPY = """import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
X = rng.normal(size=(256, 8))
labels = rng.integers(0, 2, size=256)
W = tf.Variable(rng.normal(size=(8, 1)) * 0.05)
B = tf.Variable(np.zeros(1))
mask = np.ones(3, dtype=np.int32)
kept = rng.uniform(size=4).astype("float16")
"""


def test_an_eager_program_s_numpy_float_arrays_become_float32_where_they_are_made(tmp_path):
    """No float64 named and no pipeline: the float arrays NumPy makes (data and initial
    weights) are cast where they are made; integer arrays, arrays given a dtype and
    arrays already cast are left alone."""
    path = tmp_path / "loop.py"
    path.write_text(EAGER_NUMPY)
    files = SourceFiles(root=str(tmp_path), script=str(path))
    (c,), refused = plan([finding("placement.float64")], Facts(), files)
    assert refused == [] and c.fix == "float32 for the 3 NumPy float array(s) the program makes"
    assert "arrays are rounded to float32" in (c.tolerance_why or "")  # no dtype changed
    text = edited(str(path), c)
    assert "X = rng.normal(size=(256, 8)).astype('float32')\n" in text
    assert "W = tf.Variable(rng.normal(size=(8, 1)).astype('float32') * 0.05)\n" in text
    assert "B = tf.Variable(np.zeros(1).astype('float32'))\n" in text
    for kept in (
        "rng.integers(0, 2, size=256)\n",
        "np.ones(3, dtype=np.int32)\n",
        'astype("float16")\n',
    ):
        assert kept in text
    compile(text, "loop.py", "exec")


SEQUENCE_FIT = """import math

import tensorflow as tf


class Batches(tf.keras.utils.Sequence):
    def __init__(self, x, y, batch_size):
        \"\"\"Batches of the arrays.\"\"\"
        self.x, self.y, self.batch_size = x, y, batch_size

    def __len__(self):
        return math.ceil(len(self.x) / self.batch_size)


class Shards(keras.utils.PyDataset):
    def __init__(self, files, **kwargs):
        super().__init__(max_queue_size=4)
        self.files = files


class Given(keras.utils.PyDataset):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)


class Passed(keras.utils.PyDataset):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)


given, passed = Given(), Passed(workers=2)
"""


def test_a_fit_fed_by_a_pydataset_gets_worker_threads_in_its_init(tmp_path):
    """The Python source Keras wraps for fit: each PyDataset (Sequence) class of the
    program's with an __init__ gets workers=4: added to its super().__init__ call (beside
    **kwargs, unless a call of the class passes workers through them), or that call added
    after its docstring."""
    path = tmp_path / "seq.py"
    path.write_text(SEQUENCE_FIT)
    files = SourceFiles(root=str(tmp_path), script=str(path))
    adapter = PipelineStage(
        "Generator", "generator", ("from_generator",), f"{path}:30", by_library=True, python=True
    )
    pipeline = PipelineFacts(1, location=f"{path}:30", stages=(adapter,), consumer="keras-fit")
    facts = Facts(tfdata=TfDataFacts(pipelines=(pipeline,)))
    found, _ = plan([finding("input.python-function")], facts, files)
    assert [c.fix for c in found] == [
        "Batches's batches made by 4 worker threads (PyDataset workers=4)",
        "Shards's batches made by 4 worker threads (PyDataset workers=4)",
        "Given's batches made by 4 worker threads (PyDataset workers=4)",
        "Passed's batches made by 4 worker threads (PyDataset workers=4)",
    ]
    batches = edited(str(path), found[0])
    assert '        """Batches of the arrays."""\n        super().__init__(workers=4)\n' in batches
    assert "super().__init__(max_queue_size=4, workers=4)" in edited(str(path), found[1])
    assert "super().__init__(**kwargs, workers=4)" in edited(str(path), found[2])
    # Passed is made with workers=2, which its **kwargs pass on: raised where it is given
    passed = edited(str(path), found[3])
    assert "given, passed = Given(), Passed(workers=4)" in passed
    assert passed.count("workers=") == 1
    compile(batches, "seq.py", "exec")
    # a tf.data pipeline of the program's own: not this fix's
    own = replace(pipeline, stages=(replace(adapter, by_library=False),))
    found, _ = plan(
        [finding("input.python-function")], Facts(tfdata=TfDataFacts(pipelines=(own,))), files
    )
    assert not [c for c in found if "worker threads" in c.fix]


def test_workers_given_where_the_class_is_made_in_another_file_are_raised_there(tmp_path):
    """The class in my_classes.py passes **kwargs to PyDataset; the script makes it with
    workers=1 (and once with a ** mapping of its own): workers=4 in its super().__init__
    would be given twice (a TypeError), so the script's workers=1 is raised."""
    classes = tmp_path / "my_classes.py"
    classes.write_text(
        "import keras\n\n\nclass DataGenerator(keras.utils.PyDataset):\n"
        "    def __init__(self, ids, batch_size=32, **kwargs):\n"
        "        super().__init__(**kwargs)\n        self.ids = ids\n"
    )
    script = tmp_path / "train.py"
    script.write_text(
        "from my_classes import DataGenerator\n\nparams = {'batch_size': 64}\n"
        "train = DataGenerator(list(range(100)), workers=1, use_multiprocessing=False, **params)\n"
        "val = DataGenerator(list(range(10)), workers=6)\n"
    )
    files = SourceFiles(root=str(tmp_path), script=str(script))
    adapter = PipelineStage(
        "Generator", "generator", ("from_generator",), f"{script}:4", by_library=True,
        python=True, function="DataGenerator.__getitem__", function_location=f"{classes}:8",
    )  # fmt: skip
    pipeline = PipelineFacts(1, location=f"{script}:4", stages=(adapter,), consumer="keras-fit")
    facts = Facts(tfdata=TfDataFacts(pipelines=(pipeline,)))
    (found,), _ = plan([finding("input.python-function")], facts, files)
    assert found.fix == "DataGenerator's batches made by 4 worker threads (PyDataset workers=4)"
    text = edited(str(script), found)
    assert (
        "train = DataGenerator(list(range(100)), workers=4, use_multiprocessing=False, **params)"
        in text
    )
    assert "val = DataGenerator(list(range(10)), workers=6)" in text  # already more
    assert classes.read_text().count("workers") == 0  # the class is left as it is
    compile(text, "train.py", "exec")


def test_a_fit_fed_by_the_program_s_generator_says_why_no_worker_fix(tmp_path):
    path = tmp_path / "gen.py"
    path.write_text("def batches():\n    while True:\n        yield 1, 2\n")
    files = SourceFiles(root=str(tmp_path), script=str(path))
    source = PipelineStage(
        "Generator",
        "generator",
        ("from_generator",),
        f"{path}:9",
        function="batches",
        function_location="gen.py:1",
        by_library=True,
        python=True,
    )
    pipeline = PipelineFacts(1, location=f"{path}:9", stages=(source,), consumer="keras-fit")
    facts = Facts(tfdata=TfDataFacts(pipelines=(pipeline,)))
    found, not_tried = plan([finding("input.python-function")], facts, files)
    assert not [c for c in found if "worker threads" in c.fix]
    (why,) = [n.why for n in not_tried if "generator" in n.why]
    assert why.startswith("fit reads the generator batches (gen.py:1), which makes one batch")


BUILT = """import tensorflow as tf


def build_model(width):
    net = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(width)])
    net.compile(optimizer="adam", loss="mse")
    return net


model = build_model(16)
model.fit(x, y, epochs=2)
"""


def test_a_model_compiled_in_the_helper_that_builds_it_gets_the_compile_options_there(tmp_path):
    """``model = build_model(...)`` then ``model.fit``: the helper's one compile call is
    the fit model's."""
    path = tmp_path / "train.py"
    path.write_text(BUILT)
    files = SourceFiles(root=str(tmp_path), script=str(path))
    loops = (StepLoop("keras-fit", f"Model.fit at {path}:11", 100, 0.0),)
    steps = StepFacts("keras-fit", "Model.fit", 100, loops=loops)
    found, _ = plan([finding("launch.host-bound")], Facts(steps=steps), files)
    assert [c.fix for c in found] == [
        "net.compile(steps_per_execution=32) in build_model()",
        "net.compile(jit_compile=True) in build_model()",
    ]
    assert 'net.compile(optimizer="adam", loss="mse", steps_per_execution=32)' in edited(
        str(path), found[0]
    )
    path.write_text(
        BUILT.replace("    return net", "    net.compile('sgd', 'mse')\n    return net")
    )
    files = SourceFiles(root=str(tmp_path), script=str(path))  # read anew
    loops = (StepLoop("keras-fit", f"Model.fit at {path}:12", 100, 0.0),)
    steps = StepFacts("keras-fit", "Model.fit", 100, loops=loops)
    found, refused = plan([finding("launch.host-bound")], Facts(steps=steps), files)
    assert found == [] and "nor one compile(...) in build_model()" in refused[0].why


SWITCHES = """import tensorflow as tf

tf.config.run_functions_eagerly(True)
model.compile(optimizer="adam", loss="mse", run_eagerly=True)
other.compile(optimizer="adam", loss="mse", run_eagerly=False)
"""


def test_the_switches_that_turn_graphs_off_are_set_back(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(SWITCHES)
    files = SourceFiles(root=str(tmp_path), script=str(path))
    found, _ = plan([finding("launch.eager-ops")], Facts(), files)
    (switches,) = found
    assert switches.fix == (
        "run_functions_eagerly(False) at train.py:3 and compile(run_eagerly=False) at train.py:4"
    )
    text = edited(str(path), switches)
    assert "tf.config.run_functions_eagerly(False)\n" in text
    assert 'model.compile(optimizer="adam", loss="mse", run_eagerly=False)\n' in text


def test_steps_per_execution_divides_a_generator_fit_s_steps_per_epoch(tmp_path):
    """fit(gen(), steps_per_epoch=60): 32 steps a call would draw batches of the next
    epoch from the generator (the losses change); 30 divides it."""
    source = BUILT.replace("model.fit(x, y, epochs=2)", "model.fit(gen(), steps_per_epoch=STEPS)")
    path = tmp_path / "train.py"
    path.write_text("STEPS = 60\n" + source)
    files = SourceFiles(root=str(tmp_path), script=str(path))
    loops = (StepLoop("keras-fit", f"Model.fit at {path}:12", 100, 0.0),)
    steps = StepFacts("keras-fit", "Model.fit", 100, loops=loops)
    found, _ = plan([finding("launch.host-bound")], Facts(steps=steps), files)
    assert found[0].fix == "net.compile(steps_per_execution=30) in build_model()"
    path.write_text("STEPS = 60\n" + source.replace("=STEPS", "=len(x) // 8"))
    files = SourceFiles(root=str(tmp_path), script=str(path))
    found, _ = plan([finding("launch.host-bound")], Facts(steps=steps), files)
    assert [c.fix for c in found] == ["net.compile(jit_compile=True) in build_model()"]


def test_a_cache_goes_where_input_no_cache_found_it_before_a_shuffle(tmp_path):
    """The pipeline as a whole changes every pass (its shuffle): no cache at its end;
    input.no-cache names the stage to cache after, and there it goes."""
    from gpuwhy.fixes.pipeline_evidence import pipeline_name
    from gpuwhy.formatting import stage_label

    path = tmp_path / "train.py"
    path.write_text(
        "import tensorflow as tf\n\n"
        "ds = tf.data.TFRecordDataset(files).map(parse).shuffle(2000).batch(64)\n"
    )
    files = SourceFiles(root=str(tmp_path), script=str(path))
    where = f"{path}:3"
    stages = (
        PipelineStage("TFRecord", "source", ("TFRecordDataset",), where),
        PipelineStage("ParallelMapV2", "map", ("map",), where, function="parse", parallelism=2),
        PipelineStage("Shuffle", "shuffle", ("shuffle",), where, repeats=False),
        PipelineStage("BatchV2", "batch", ("batch",), where),
    )
    pipeline = PipelineFacts(
        1, location=where, stages=stages, consumer="keras-fit", prefetch_run=True
    )
    evidence = {"pipeline": pipeline_name(pipeline), "cache_after": stage_label(stages[1])}
    no_cache = replace(finding("input.no-cache"), evidence=evidence)
    found, _ = plan([no_cache], Facts(tfdata=TfDataFacts(pipelines=(pipeline,))), files)
    (cache,) = found
    assert cache.fix == "cache after map at line 3 (before the stages that change every pass)"
    text = edited(str(path), cache)
    assert ".map(parse).cache().shuffle(2000).batch(64)\n" in text


def test_a_decode_s_cache_is_tried_where_compression_cpu_codec_prints_it(tmp_path):
    """A review's image pipeline: list_files, a decoding map, a shuffle after it.
    compression.cpu-codec printed `.cache()` after the map and gpuwhy fix said it had "no
    automatic fix"; a decode with a random draw before it (a cache would replay it) is
    left to the finding's words."""
    from gpuwhy.fixes.pipeline_evidence import pipeline_name
    from gpuwhy.formatting import stage_label

    path = tmp_path / "train.py"
    path.write_text(
        "import tensorflow as tf\n\n"
        "train_ds = tf.data.Dataset.list_files(pattern, shuffle=False)\n"
        "train_ds = train_ds.map(load)\n"
        "train_ds = train_ds.shuffle(1000).batch(32)\n"
    )
    files = SourceFiles(root=str(tmp_path), script=str(path))
    decode = PipelineStage(
        "ParallelMapV2", "map", ("map",), f"{path}:4", function="load", parallelism=2,
        codec_ops=("DecodePng",), repeats=True,
    )  # fmt: skip
    stages = (
        PipelineStage("TensorSlice", "source", ("list_files",), f"{path}:3", repeats=True),
        decode,
        PipelineStage("Shuffle", "shuffle", ("shuffle",), f"{path}:5", repeats=False),
        PipelineStage("BatchV2", "batch", ("batch",), f"{path}:5"),
    )
    pipeline = PipelineFacts(
        1, location=f"{path}:5", stages=stages, consumer="keras-fit", prefetch_run=True
    )
    evidence = {"pipeline": pipeline_name(pipeline), "stage": stage_label(decode)}
    codec = replace(finding("compression.cpu-codec"), evidence=evidence)
    found, _ = plan([codec], Facts(tfdata=TfDataFacts(pipelines=(pipeline,))), files)
    (cache,) = found
    assert "train_ds = train_ds.map(load).cache()\n" in edited(str(path), cache)
    drawn = replace(stages[0], repeats=False)  # file names drawn anew each pass
    varied = replace(pipeline, stages=(drawn, *stages[1:]))
    found, _ = plan([codec], Facts(tfdata=TfDataFacts(pipelines=(varied,))), files)
    assert not found


def test_a_dataset_a_keras_helper_built_is_cached_where_the_program_calls_it(tmp_path):
    """keras' timeseries helper builds every stage (by the library); the program's call
    into it, laid out over several lines, ends the pipeline fit reads: the cache goes
    after that call. The element size is the bytes TF counted (the spec has a dimension
    of unknown size), the one measure input.no-cache sized it by; a preview's take(1) at
    another line, read once, is not the finding's pipeline and is not said twice."""
    from gpuwhy.fixes.pipeline_evidence import pipeline_name
    from gpuwhy.trial.kinds import input_pipeline

    path = tmp_path / "train.py"
    path.write_text(
        "import keras\n\n"
        "dataset_train = keras.preprocessing.timeseries_dataset_from_array(\n"
        "    x_train,\n    y_train,\n    sequence_length=120,\n    batch_size=256,\n)\n"
        "for batch in dataset_train.take(1):\n    pass\n"
    )
    files = SourceFiles(root=str(tmp_path), script=str(path))
    where = f"{path}:3"
    stages = tuple(
        PipelineStage(name, kind, (api,), where, by_library=True, repeats=True)
        for name, kind, api in (
            ("FromTensor", "source", "from_tensors"),
            ("ParallelMapV2", "map", "map"),
            ("BatchV2", "batch", "batch"),
        )
    ) + (PipelineStage("Prefetch", "prefetch", (), None),)  # TF's own: not judged
    call = (
        "keras.preprocessing.timeseries_dataset_from_array(x_train, y_train, "
        "sequence_length=120, batch_size=256)"
    )
    fit = PipelineFacts(
        2, location=where, stages=stages, consumer="keras-fit", prefetch_run=True,
        iterators=2, cardinality=165, elements=330, delivered_bytes=567_654_816,
        helper_call=call,
    )  # fmt: skip
    preview = replace(fit, id=1, location=f"{path}:9", iterators=1, elements=1)
    facts = Facts(
        tfdata=TfDataFacts(pipelines=(preview, fit), host_memory_available_bytes=22 * 2**30)
    )
    no_cache = replace(finding("input.no-cache"), evidence={"pipeline": pipeline_name(fit)})
    (cache,), refused = input_pipeline.candidates(no_cache, facts, files)
    assert refused == []
    assert cache.fix == "cache the dataset built at lines 3–8 (its elements repeat every pass)"
    assert "    batch_size=256,\n).cache()\nfor batch" in edited(str(path), cache)
    # the validation pipeline's finding: not tried, and said why
    val = replace(fit, id=3, location=f"{path}:3", consumer="keras-evaluate")
    on_val = replace(finding("input.no-cache"), evidence={"pipeline": pipeline_name(val)})
    with_val = replace(facts, tfdata=replace(facts.tfdata, pipelines=(preview, fit, val)))
    assert input_pipeline.candidates(on_val, with_val, files)[1][0].why == (
        f"the pipeline at {path}:3 is read by Model.evaluate, beside the training steps: "
        "gpuwhy fix measures the steps, which it does not feed"
    )
    # with too little memory free the reason is the size, measured the same way
    tight = replace(facts, tfdata=replace(facts.tfdata, host_memory_available_bytes=2**30))
    _, (why,) = input_pipeline.candidates(no_cache, tight, files)
    assert "its output (~270.7 MiB) would take more than a quarter" in why.why


PARSED = """import tensorflow as tf

FEATURES = {"x": tf.io.FixedLenFeature([4], tf.float32)}


def parse(record):
    return tf.io.parse_single_example(record, FEATURES)["x"]


ds = tf.data.TFRecordDataset(files).map(parse, num_parallel_calls=1).batch(64)
other = tf.data.TFRecordDataset(files)
other = other.map(parse)
other = other.batch(64, drop_remainder=True)
mixed = tf.data.TFRecordDataset(files).map(parse).shuffle(100).batch(64)
inline = tf.data.TFRecordDataset(files).map(
    lambda r: tf.io.parse_single_example(r, FEATURES)
).batch(32)
"""


def cheap_map_pipeline(path: str, line: int, function: str = "parse") -> Facts:
    """A pipeline whose slowest stage is a map fused with its batch, 8 µs a call."""
    where = f"{path}:{line}"
    stages = (
        PipelineStage("TFRecord", "source", ("TFRecordDataset",), where),
        PipelineStage(
            "MapAndBatch", "map", ("map", "batch"), where, function=function,
            function_location=f"{path}:6", elements=200, ratio=64.0, self_time_s=0.1,
        ),
    )  # fmt: skip
    pipeline = PipelineFacts(1, location=where, stages=stages, bottleneck=1, prefetch_run=True)
    return Facts(tfdata=TfDataFacts(pipelines=(pipeline,)))


def test_a_cheap_map_is_run_once_per_batch_in_a_chain_or_in_two_statements(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(PARSED)
    files = SourceFiles(root=str(tmp_path), script=str(path))
    found, _ = plan([finding("input.sequential-map")], cheap_map_pipeline(str(path), 10), files)
    (first,) = [c for c in found if c.fix.startswith("batch before map(parse)")]
    text = edited(str(path), first)
    assert "TFRecordDataset(files).batch(64).map(parse, num_parallel_calls=1)\n" in text
    assert "return tf.io.parse_example(record, FEATURES)" in text
    found, _ = plan([finding("input.sequential-map")], cheap_map_pipeline(str(path), 12), files)
    (second,) = [c for c in found if c.fix.startswith("batch before map(parse)")]
    text = edited(str(path), second)
    assert "other = other.batch(64, drop_remainder=True)\nother = other.map(parse)\n" in text
    # a lambda is changed where it is written, the function above left alone
    inline = cheap_map_pipeline(str(path), 15, "<lambda>")
    found, _ = plan([finding("input.sequential-map")], inline, files)
    (third,) = [c for c in found if c.fix.startswith("batch before map")]
    text = edited(str(path), third)
    assert ".batch(32).map(\n    lambda r: tf.io.parse_example(r, FEATURES)\n)\n" in text
    assert "return tf.io.parse_single_example(record, FEATURES)" in text


def test_a_shuffle_between_the_map_and_its_batch_is_not_moved(tmp_path):
    from gpuwhy.trial.kinds import batch_first

    path = tmp_path / "train.py"
    path.write_text(PARSED)
    files = SourceFiles(root=str(tmp_path), script=str(path))
    found, refused = batch_first.candidates(
        finding("input.sequential-map"), cheap_map_pipeline(str(path), 14), files
    )
    assert found == []
    (why,) = refused
    assert why.why == (
        "batch before map(parse): the program does not batch right after it (a shuffle or "
        "another stage between)"
    )
    # an expensive map is not one to batch first: nothing tried, nothing said
    facts = cheap_map_pipeline(str(path), 10)
    assert facts.tfdata is not None
    (pipeline,) = facts.tfdata.pipelines
    costly = replace(pipeline.stages[1], self_time_s=10.0)
    slow = replace(pipeline, stages=(pipeline.stages[0], costly))
    found, refused = batch_first.candidates(
        finding("input.sequential-map"),
        Facts(tfdata=TfDataFacts(pipelines=(slow,))),
        files,
    )
    assert found == [] and refused == []


def test_a_pipeline_not_cached_says_why_in_its_own_terms(tmp_path):
    path, files = setup(tmp_path)
    where = f"{path}:4"
    generator = PipelineStage(
        "Generator", "generator", ("from_generator",), where, function="gen", python=True,
        repeats=None, parallelism=1,
    )  # fmt: skip
    pipeline = PipelineFacts(
        1, location=where, stages=(generator,), consumer="keras-fit", prefetch_run=True,
        iterators=3, cardinality=10, element_bytes=100,
    )  # fmt: skip
    facts = Facts(tfdata=TfDataFacts(pipelines=(pipeline,), host_memory_available_bytes=2**30))
    from gpuwhy.trial.kinds import input_pipeline

    found, refused = input_pipeline.candidates(finding("input.python-function"), facts, files)
    assert found == []
    (why,) = refused
    assert "no map of it runs one element at a time; it prefetches; and Generator(gen) runs " in (
        why.why
    )
    assert "Python, which may give other elements each pass" in why.why
    assert "gpuwhy fix --input --assume-pure" in why.why
    read_once = replace(pipeline, stages=(replace(generator, python=False),), iterators=1)
    _, refused = input_pipeline.candidates(
        finding("input.bound"), Facts(tfdata=TfDataFacts(pipelines=(read_once,))), files
    )
    assert refused[0].why.endswith("it is read once: a cache would not be read again")
    # one iterator over a repeat (ds.repeat().take(n)) reads every pass: not "read once"
    repeat = PipelineStage("ForeverRepeat", "repeat", ("repeat",), "train.py:28", repeats=False)
    repeated = replace(read_once, stages=(*read_once.stages, repeat))
    _, refused = input_pipeline.candidates(
        finding("input.bound"), Facts(tfdata=TfDataFacts(pipelines=(repeated,))), files
    )
    assert refused[0].why.endswith(
        "a cache at its end would follow ForeverRepeat at train.py:28: input.no-cache's fix, "
        "where found, places one before it"
    )
    # which pipeline: read by fit, or by the loop at its line (a preview's next(iter(ds)))
    assert refused[0].why.startswith(f"the pipeline at {where}, read by Model.fit: ")
    preview = replace(read_once, consumer="python-loop", read_at="train.py:12")
    _, refused = input_pipeline.candidates(
        finding("input.bound"), Facts(tfdata=TfDataFacts(pipelines=(preview,))), files
    )
    assert refused[0].why.startswith(f"the pipeline at {where}, read by the loop at train.py:12: ")


def test_a_map_kept_sequential_by_its_random_draws_is_said_so(tmp_path):
    from gpuwhy.trial.kinds import input_pipeline

    path, files = setup(tmp_path)
    where = f"{path}:4"
    augment = PipelineStage(
        "MapAndBatch", "map", ("map", "batch"), where, function="augment", stateful=True,
        random=True, repeats=False, parallelism=1,
    )  # fmt: skip
    pipeline = PipelineFacts(
        1, location=where, stages=(augment,), consumer="keras-fit", prefetch_run=True,
        iterators=3, cardinality=10, element_bytes=100,
    )  # fmt: skip
    facts = Facts(tfdata=TfDataFacts(pipelines=(pipeline,), host_memory_available_bytes=2**30))
    _, (why,) = input_pipeline.candidates(finding("input.sequential-map"), facts, files)
    assert "MapAndBatch(augment) runs one element at a time for its stateful ops" in why.why
    assert "its elements change between passes (MapAndBatch(augment))" in why.why


def test_a_map_that_only_reads_a_lookup_table_is_made_parallel(tmp_path):
    """TextVectorization's vocabulary lookup (LookupTableFindV2) is stateful to TF, which
    keeps the map sequential, but it only reads: the trial refused the parallel map its
    finding prints "for its stateful ops (random draws)" (a review's RNN classifier)."""
    path, files = setup(tmp_path)
    vectorize = PipelineStage(
        "Map", "map", ("map",), f"{path}:4", function="<lambda>", stateful=True,
        order_dependent=False, parallelism=1,
    )  # fmt: skip
    stages = (
        PipelineStage("Range", "source", ("range",), f"{path}:4"),
        vectorize,
        PipelineStage("BatchV2", "batch", ("batch",), f"{path}:4"),
    )
    pipeline = PipelineFacts(1, location=f"{path}:4", stages=stages)
    facts = Facts(tfdata=TfDataFacts(pipelines=(pipeline,)))
    found, _ = plan([finding("input.sequential-map")], facts, files)
    assert "map(lambda x: x * 2, num_parallel_calls=tf.data.AUTOTUNE)" in edited(path, found[0])
    writes = replace(vectorize, order_dependent=True)  # a write of state: left as it is
    pipeline = replace(pipeline, stages=(stages[0], writes, stages[2]), prefetch_run=True)
    facts = Facts(tfdata=TfDataFacts(pipelines=(pipeline,)))
    found, refused = plan([finding("input.sequential-map")], facts, files)
    assert not found and "(state it writes)" in refused[0].why


def test_a_kind_that_found_nothing_says_why_beside_another_kind_s_fix(tmp_path, monkeypatch):
    """input.bound on a fit whose map TF already runs in parallel: the pipeline kind
    writes nothing and says why, steps_per_execution is tried; the why is kept, not
    dropped because another kind found a fix."""
    from gpuwhy.trial import kinds
    from gpuwhy.trial.candidate import FixCandidate, NotTried
    from gpuwhy.trial.source_edits import Edit

    path, files = setup(tmp_path)

    def pipeline_kind(f, facts, files):
        return [], [NotTried(f.id, "the map already runs in parallel (TF's map_parallelization)")]

    def compile_kind(f, facts, files):
        edit = Edit(path, 1, 0, 1, 0, "# steps_per_execution\n")
        return [FixCandidate(f.id, "compile(steps_per_execution=32)", (edit,))], []

    monkeypatch.setitem(kinds.PLANNERS, "input.bound", (pipeline_kind, compile_kind))
    found, refused = plan([finding("input.bound")], Facts(), files)
    assert [c.fix for c in found] == ["compile(steps_per_execution=32)"]
    (why,) = refused
    assert why.why == (
        "besides the fixes tried: the map already runs in parallel (TF's map_parallelization)"
    )


def test_steps_per_execution_is_not_tried_for_a_wait_the_pipeline_s_work_makes(tmp_path):
    """An input wait of 46 ms a step beside a pipeline whose stages work 107 ms a batch:
    the wait is the pipeline's, and fewer calls a step do not shorten it. Beside one
    that works 1 ms a batch, the wait is the call per step: steps_per_execution is tried."""
    from gpuwhy.trial.kinds import keras_compile
    from tests import builders_tfdata as t

    path, files = setup(tmp_path)
    loops = (StepLoop("keras-fit", f"Model.fit at {path}:24", 141, 0.0),)
    steps = replace(t.fit_steps(0.80), loops=loops, count=141, warmup=1, total_s=8.1)
    slow = t.pipeline(t.tfrecord(self_time_s=0.1), t.parse(self_time_s=15.0), bottleneck=1)
    slow = replace(slow, elements=141, location=f"{path}:20")
    found, refused = keras_compile.steps_per_execution(
        finding("input.bound"), t.facts(slow, steps=steps), files
    )
    assert found == []
    assert refused[0].why.startswith("steps_per_execution: the steps wait 46.3 ms a step for ")
    assert "the wait is the pipeline's" in refused[0].why
    fast = replace(slow, stages=(t.tfrecord(self_time_s=0.05), t.parse(self_time_s=0.1)))
    found, _ = keras_compile.steps_per_execution(
        finding("input.bound"), t.facts(fast, steps=steps), files
    )
    assert [c.fix for c in found] == ["model.compile(steps_per_execution=32)"]


def test_a_low_finding_with_a_fix_is_said_tried_only_when_asked(tmp_path):
    """tensorcore.unused is low on a GPU with TF32: gpuwhy fix tries high and medium
    findings, and says how to ask for this one rather than "nothing was tried"."""
    from gpuwhy.facts import FixTrialFacts
    from gpuwhy.verdict import _trial_verdict

    _, files = setup(tmp_path)
    low = Finding("tensorcore.unused", "low", "float32 on TF32", fix="set_global_policy")
    found, refused = plan([low], Facts(), files)
    assert found == []
    assert [(n.finding, n.why) for n in refused] == [
        (
            "tensorcore.unused",
            "low severity: tried only when asked (gpuwhy fix --finding tensorcore.unused)",
        )
    ]
    trial = FixTrialFacts(
        30.0, 2, "step time", not_tried=tuple((n.finding, n.why) for n in refused)
    )
    assert _trial_verdict((), trial, Facts()) == (
        "No high or medium finding has a fix gpuwhy can apply: nothing was tried (low, tried "
        "when asked: gpuwhy fix --finding tensorcore.unused)."
    )
    # asked for by name, it is planned
    found, _ = plan([low], Facts(), files, any_severity=True)
    assert [c.fix for c in found] == ["mixed precision (mixed_bfloat16)"]


def test_an_eager_validation_loop_s_body_becomes_a_traced_function(tmp_path):
    from gpuwhy.facts import LoopStalls, StallBeat, StallCause, StallFacts
    from gpuwhy.source_calls import loop_code

    source = (
        "import tensorflow as tf\n\n"
        "for epoch in range(3):\n"
        "    for x, y in train:\n"
        "        train_step(x, y)\n"
        "    for x, y in val:\n"
        "        logits = model(x, training=False)\n"
        "        accuracy.update_state(y, logits)\n"
        "    print(accuracy.result())\n"
    )
    path = tmp_path / "train.py"
    path.write_text(source)
    files = SourceFiles(root=str(tmp_path), script=str(path))
    cause = StallCause(
        "loop", 10.0, 0.9, location=f"{path}:6", code="for x, y in val:",
        step_code=loop_code(str(path), str(path), 6),
    )  # fmt: skip
    beat = StallBeat(kind="loop", count=3, stall_s=11.0, lost_s=11.0, lost_share=0.5)
    loop = LoopStalls(
        source="tf-data", name=f"{path}:4", between_steps=True, count=3, loop_steps=300,
        loop_s=20.0, typical_step_s=0.01, stall_s=11.0, lost_s=11.0, lost_share=0.5,
        beats=(beat,), causes=(cause,),
    )  # fmt: skip
    facts = Facts(stalls=StallFacts(loops=(loop,)))
    (found,), refused = plan([finding("steps.periodic-stall", f"{path}:6")], facts, files)
    assert refused == [] and found.fix.endswith("as eval_step() traced: @tf.function")
    assert edited(str(path), found) == (
        "import tensorflow as tf\n\n\n"
        "@tf.function\n"
        "def eval_step(x, y):\n"
        "    logits = model(x, training=False)\n"
        "    accuracy.update_state(y, logits)\n\n\n"
        "for epoch in range(3):\n"
        "    for x, y in train:\n"
        "        train_step(x, y)\n"
        "    for x, y in val:\n"
        "        eval_step(x, y)\n"
        "    print(accuracy.result())\n"
    )
    checkpoint = replace(cause, kind="checkpoint", step_code=None)
    other = Facts(stalls=StallFacts(loops=(replace(loop, causes=(checkpoint,)),)))
    found, (why,) = plan([finding("steps.periodic-stall", f"{path}:6")], other, files)
    assert found == [] and "no automatic fix" in why.why


def test_a_custom_loop_s_traced_step_is_xla_compiled_for_the_host_bound_findings(tmp_path):
    path, files = setup(tmp_path)
    steps = StepFacts(source="tf-function", marker="tf-function", count=100)
    tracing = TracingFacts(
        functions=(TracedFunction("traced", f"{path}:17", calls=100, call_s=2.0),)
    )
    facts = Facts(steps=steps, tracing=tracing)
    for finding_id in ("launch.projected-bound", "launch.host-bound", "gpu.underutilized"):
        found, refused = plan([finding(finding_id)], facts, files)
        (xla,) = found
        assert xla.fix == "traced XLA-compiled: @tf.function(jit_compile=True)"
        assert xla.by_mean and xla.tolerance == 0.05
        assert "@tf.function(jit_compile=True)\ndef traced(x, rate):" in edited(path, xla)
        # the Keras kinds' one reason, said once
        (besides,) = refused
        assert besides.why.count("not Keras fit") <= 1, besides.why
    called = (
        Path(path).read_text().replace("@tf.function\n", "@tf.function(reduce_retracing=True)\n")
    )
    Path(path).write_text(called)
    (xla,), _ = plan([finding("launch.host-bound")], facts, SourceFiles(str(tmp_path), path))
    assert "@tf.function(reduce_retracing=True, jit_compile=True)" in edited(path, xla)
    strategy = replace(facts, distribute=b_distribute(replicas=2))
    found, (why,) = plan([finding("launch.host-bound")], strategy, files)
    assert found == [] and "several replicas" in why.why


def b_distribute(replicas: int):
    from gpuwhy.facts import DistributeFacts

    return DistributeFacts(strategy="MirroredStrategy", replicas=replicas)


HELPER_PROGRAM = """import keras

train_ds, val_ds = keras.utils.image_dataset_from_directory(
    "PetImages", validation_split=0.2, subset="both", seed=1337, image_size=(180, 180),
    batch_size=128,
)
model.fit(train_ds, epochs=25, validation_data=val_ds)
"""


def _helper_windows(path, call: str):
    """A pipeline a Keras helper built at ``path``:3 and shuffles inside (input.no-cache's
    own builders, every stage the library's, at the helper's call)."""
    from tests import builders_tfdata as t

    at = dict(by_library=True, location=f"{path}:3", written_calls=("",))
    stages = [
        t.stage("TensorSlice", "source", written_as=("from_tensor_slices",), self_time_s=0.001),
        t.stage("ParallelMapV2", "map", written_as=("map",), function="load_image", self_time_s=2),
        t.shuffle(repeats=False),
        t.batch(ratio=128.0, self_time_s=0.03),
    ]
    return t.pipeline(
        *[replace(s, **at) for s in stages],
        t.prefetch(),
        bottleneck=1,
        helper_call=call,
        element_bytes=None,
        delivered_bytes=300 * 128 * 180 * 180 * 3 * 4,
    )


def test_a_helper_that_shuffles_is_tried_with_the_fix_input_no_cache_prints(tmp_path):
    """image_dataset_from_directory shuffles inside: no cache at the pipeline's end (its
    elements change every pass). The finding's fix rebuilds the call and caches each
    subset after the statement that names them; the trial makes exactly those edits, and
    the program they give is the fix as printed, pasted."""
    from gpuwhy.rules.input.no_cache import NoCache
    from tests import builders_tfdata as t

    path = tmp_path / "train.py"
    path.write_text(HELPER_PROGRAM)
    call = (
        'keras.utils.image_dataset_from_directory("PetImages", validation_split=0.2, '
        'subset="both", seed=1337, image_size=(180, 180), batch_size=128)'
    )
    facts = t.facts(_helper_windows(path, call), steps=t.fit_steps(0.70))
    (no_cache,) = NoCache().check(facts, dict(NoCache.options))
    files = SourceFiles(root=str(tmp_path), script=str(path))
    found, refused = plan([no_cache], facts, files)
    assert refused == []
    (cache,) = found
    assert cache.fix == (
        ".cache() after image_dataset_from_directory at line 3 (input.no-cache's fix)"
    )
    # shuffled anew after the cache: other examples in each batch, the curves compared
    assert (cache.by_mean, cache.tolerance) == (True, 0.1)
    text = edited(str(path), cache)
    assert text.splitlines()[2:5] == [
        # the call as the fix prints it (rewritten by Python's own unparser)
        "train_ds, val_ds = keras.utils.image_dataset_from_directory('PetImages', "
        "validation_split=0.2, subset='both', seed=1337, image_size=(180, 180), "
        "batch_size=None)",
        "train_ds = train_ds.cache().shuffle(12800, seed=1337).batch(128)",
        "val_ds = val_ds.cache().batch(128)",
    ]
    assert text.splitlines()[-1] == "model.fit(train_ds, epochs=25, validation_data=val_ds)"
    # the validation subset (not shuffled) has the same cause: one finding of the two
    # pipelines, which names both; the same edits are tried for it
    from gpuwhy.fixes.pipeline_evidence import pipeline_name
    from gpuwhy.rules.grouping import group_by_cause

    training = _helper_windows(path, call)
    validation = replace(
        training,
        id=9,
        consumer="keras-evaluate",
        stages=tuple(s for s in training.stages if s.kind != "shuffle"),
    )
    both = t.facts(training, validation, steps=t.fit_steps(0.70))
    (merged,) = group_by_cause(NoCache().check(both, dict(NoCache.options)))
    assert "pipeline" not in merged.evidence
    assert [r["pipeline"] for r in merged.evidence["pipelines"]] == [
        pipeline_name(training),
        pipeline_name(validation),
    ]
    (again,), refused = plan([merged], both, files)
    assert again.edits == cache.edits
    assert [n.why for n in refused] == [
        f"besides the fixes tried: the pipeline at {validation.location} is read by Model.evaluate, "
        "beside the training steps: gpuwhy fix measures the steps, which it does not feed"
    ]
    # one dataset: the call itself is replaced by the cached one, shuffled after it
    path.write_text(
        HELPER_PROGRAM.replace(', subset="both"', ', subset="training"').replace(
            "train_ds, val_ds =", "train_ds ="
        )
    )
    one = call.replace('"both"', '"training"')
    facts = t.facts(_helper_windows(path, one), steps=t.fit_steps(0.70))
    (no_cache,) = NoCache().check(facts, dict(NoCache.options))
    (cache,), _ = plan([no_cache], facts, SourceFiles(root=str(tmp_path), script=str(path)))
    assert edited(str(path), cache).splitlines()[2] == (
        "train_ds = keras.utils.image_dataset_from_directory('PetImages', "
        "validation_split=0.2, subset='training', seed=1337, image_size=(180, 180), "
        "batch_size=None).cache().shuffle(12800, seed=1337).batch(128)"
    )


def test_a_helper_whose_fix_is_of_another_shape_is_not_tried_and_says_why(tmp_path):
    from gpuwhy.fixes.pipeline_evidence import pipeline_name
    from gpuwhy.trial.kinds import helper_cache
    from tests import builders_tfdata as t

    path = tmp_path / "train.py"
    path.write_text(HELPER_PROGRAM)
    pipeline = _helper_windows(path, "keras.utils.image_dataset_from_directory('PetImages')")
    facts = t.facts(pipeline, steps=t.fit_steps(0.70))
    odd = replace(
        finding("input.no-cache"),
        evidence={"pipeline": pipeline_name(pipeline)},
        fix="# cache it somewhere\nds = ds.cache()",
    )
    files = SourceFiles(root=str(tmp_path), script=str(path))
    assert helper_cache.candidates(odd, facts, files) == (
        [],
        [
            helper_cache.NotTried(
                "input.no-cache", "its fix is not one call written in place of another"
            )
        ],
    )


def test_a_model_built_right_after_the_imports_gets_the_policy_line_and_its_float32_output(
    tmp_path,
):
    """The policy goes in at the start of the line the model is built on: the output
    layer's edit is the keyword alone, not the whole line, so the two do not meet."""
    path = tmp_path / "tiny.py"
    path.write_text("import keras\nmodel = keras.Sequential([keras.layers.Dense(2)])\n")
    files = SourceFiles(root=str(tmp_path), script=str(path))
    (policy,), _ = plan([finding("tensorcore.unused")], Facts(), files)
    assert edited(str(path), policy) == (
        "import keras\n"
        'keras.mixed_precision.set_global_policy("mixed_bfloat16")\n'
        "model = keras.Sequential([keras.layers.Dense(2, dtype='float32')])\n"
    )


VAE_LIKE = """import numpy as np
import tensorflow as tf
from tensorflow import keras

import matplotlib
matplotlib.use("Agg")


class Sampling(keras.layers.Layer):
    def call(self, inputs):
        return inputs


encoder = keras.Sequential([keras.layers.Dense(2)])
encoder.fit(np.zeros((8, 2)), np.zeros((8, 2)))

import matplotlib.pyplot as plt
"""


def test_the_policy_goes_above_the_first_code_that_runs_not_after_the_last_import(tmp_path):
    """keras-io's VAE imports matplotlib.pyplot after its fit: the policy after the file's
    last import would be set once the model had trained (a trial of a line that changed
    nothing, called fair). It goes after the imports above the first call."""
    path = tmp_path / "vae.py"
    path.write_text(VAE_LIKE)
    files = SourceFiles(root=str(tmp_path), script=str(path))
    (policy,), _ = plan([finding("tensorcore.unused")], Facts(), files)
    lines = edited(str(path), policy).splitlines()
    at = lines.index('keras.mixed_precision.set_global_policy("mixed_bfloat16")')
    assert lines[at - 1] == "import matplotlib" and lines[at + 1] == 'matplotlib.use("Agg")'
    assert policy.location == f"{path}:5"
    # Keras imported below a first call: the policy still follows the import it needs
    late = tmp_path / "late.py"
    late.write_text(
        "import tensorflow as tf\ntf.random.set_seed(1)\nimport keras\nm = keras.Sequential()\n"
    )
    files = SourceFiles(root=str(tmp_path), script=str(late))
    (policy,), _ = plan([finding("tensorcore.unused")], Facts(), files)
    assert edited(str(late), policy).splitlines()[3].startswith("keras.mixed_precision")


def test_fixes_of_the_same_words_are_told_apart_by_the_place_they_change():
    from gpuwhy.trial.candidate import FixCandidate
    from gpuwhy.trial.kinds import _told_apart

    words = "the generator's arrays sliced by from_tensor_slices"
    both = [
        FixCandidate("input.python-function", words, (), location="prog.py:52"),
        FixCandidate("input.python-function", words, (), location="prog.py:54"),
        FixCandidate("input.no-prefetch", "a prefetch after batch", (), location="prog.py:60"),
    ]
    assert [c.fix for c in _told_apart(both)] == [
        f"{words} at prog.py:52",
        f"{words} at prog.py:54",
        "a prefetch after batch",  # its words alone say which
    ]


DQN_REPLAY = """import numpy as np

for state, target in memory:
    target_f = model.predict(state, verbose=0)
    model.fit(state, target_f, epochs=1, verbose=0)
"""


def test_a_keras_call_each_step_is_made_its_one_batch_form_at_the_finding_s_line(tmp_path):
    path = tmp_path / "dqn.py"
    path.write_text(DQN_REPLAY)
    files = SourceFiles(root=str(tmp_path), script=str(path))
    for line, expected, name in (
        (
            4,
            "    target_f = model.predict_on_batch(state)\n",
            "model.predict_on_batch() for model.predict()",
        ),
        (
            5,
            "    model.train_on_batch(state, target_f)\n",
            "model.train_on_batch() for model.fit()",
        ),
    ):
        (c,), _ = plan([finding("steps.keras-call-per-step", f"{path}:{line}")], Facts(), files)
        assert c.fix == name and c.location == f"{path}:{line}"
        assert c.by_loop_time and c.printed_only  # the loop's time; what it prints
        assert expected in edited(str(path), c)
    # five epochs of one batch are five updates: no one-batch call stands for it
    path.write_text(DQN_REPLAY.replace("epochs=1", "epochs=5"))
    files = SourceFiles(root=str(tmp_path), script=str(path))
    found, refused = plan([finding("steps.keras-call-per-step", f"{path}:5")], Facts(), files)
    assert found == [] and "a fit of several epochs" in refused[0].why


def test_one_batch_calls_outside_the_loop_are_judged_by_the_program_s_run_time(tmp_path):
    """A VAE's decoder.predict(z) per grid point after fit: the training loop is the
    same with or without the fix; the run is what the calls cost."""
    path = tmp_path / "vae.py"
    path.write_text("for z in grid:\n    x = vae.decoder.predict(z)\n")
    files = SourceFiles(root=str(tmp_path), script=str(path))
    apart = Finding(
        "steps.keras-call-per-step", "high", "t", location=f"{path}:2",
        evidence={"one_batch_each": True},
    )  # fmt: skip
    (c,), _ = plan([apart], Facts(), files)
    assert c.by_program_time and "x = vae.decoder.predict_on_batch(z)" in edited(str(path), c)
    (in_loop,), _ = plan([finding("steps.keras-call-per-step", f"{path}:2")], Facts(), files)
    assert not in_loop.by_program_time


CUSTOM_STEP = """import keras


class VAE(keras.Model):
    def train_step(self, data):
        with tf.GradientTape() as tape:
            loss = self.compute_loss(data)
        grads = tape.gradient(loss, self.trainable_weights)
        self.optimizer.apply_gradients(zip(grads, self.trainable_weights))
        return {"loss": loss}


vae = VAE()
vae.fit(x, epochs=2)
"""


def test_float16_is_not_tried_on_a_train_step_of_the_program_s_own_that_scales_no_loss(
    tmp_path,
):
    """On a T4 fit gets mixed_float16, whose loss scaling is in the train_step a VAE
    replaces: its float16 gradients would underflow. With scale_loss it is tried."""
    from tests import builders as b

    path = tmp_path / "vae.py"
    path.write_text(CUSTOM_STEP)
    files = SourceFiles(root=str(tmp_path), script=str(path))
    fit = StepFacts(
        source="keras-fit", marker="Model.fit", count=100,
        loops=(StepLoop("keras-fit", "Model.fit at vae.py:14", 100, 0.0),),
    )  # fmt: skip
    facts = Facts(steps=fit, devices=(b.gpu(0, name="Tesla T4", compute_capability="7.5"),))
    found, refused = plan([finding("tensorcore.unused")], facts, files)
    assert found == [] and "scale_loss" in refused[0].why
    scaled = tmp_path / "scaled.py"
    scaled.write_text(
        CUSTOM_STEP.replace(
            "self.compute_loss(data)", "self.optimizer.scale_loss(self.compute_loss(data))"
        )
    )
    files = SourceFiles(root=str(tmp_path), script=str(scaled))
    (policy,), _ = plan([finding("tensorcore.unused")], facts, files)
    assert policy.fix == "mixed precision (mixed_float16)"
    # bfloat16 (an A100's, or no GPU named) scales no loss: tried as before
    files = SourceFiles(root=str(tmp_path), script=str(path))
    (policy,), _ = plan([finding("tensorcore.unused")], Facts(steps=fit), files)
    assert policy.fix == "mixed precision (mixed_bfloat16)"


SEVERAL_FITS = """import keras

model = keras.Sequential([keras.layers.Dense(1)])
model.compile(optimizer="adam", loss="mse")
model.fit(x, y, epochs=1)
other = keras.Sequential([keras.layers.Dense(1)])
other.compile(optimizer="adam", loss="mse")
other.fit(x, y, epochs=1)
"""


def test_a_loop_of_several_fits_is_fixed_at_the_fit_the_finding_is_about(tmp_path):
    """keras-io's callbacks guide fits at three lines, one loop named "Model.fit at
    a:99, a:133, a:184": that name was read as one path ("... is not a file of the
    program's"). The fit at the finding's place is the one, else the first."""
    path = tmp_path / "callbacks.py"
    path.write_text(SEVERAL_FITS)
    files = SourceFiles(root=str(tmp_path), script=str(path))
    name = f"Model.fit at {path}:5, {path}:8"
    steps = StepFacts("keras-fit", "Model.fit", 100, loops=(StepLoop("keras-fit", name, 100, 0.0),))
    found, _ = plan([finding("launch.host-bound", f"{path}:8")], Facts(steps=steps), files)
    assert found[0].fix == "other.compile(steps_per_execution=32)"
    found, _ = plan([finding("launch.host-bound")], Facts(steps=steps), files)
    assert found[0].fix == "model.compile(steps_per_execution=32)"


def test_a_mapping_written_without_workers_leaves_the_super_call_free_to_take_them(tmp_path):
    """afshinea's keras-data-generator: DataGenerator(ids, labels, **params), params a
    dict written above without workers: workers=4 in its super().__init__ cannot be
    given twice. A params that holds workers, comes from elsewhere, or is changed in
    place after it is written, may."""
    script = tmp_path / "datagen.py"

    def plan_with(params: str):
        script.write_text(
            "import keras\n\n\nclass DataGenerator(keras.utils.PyDataset):\n"
            "    def __init__(self, ids, batch_size=32, **kwargs):\n"
            "        super().__init__(**kwargs)\n        self.ids = ids\n\n\n"
            f"params = {params}\ntrain = DataGenerator(list(range(100)), **params)\n"
        )
        files = SourceFiles(root=str(tmp_path), script=str(script))
        adapter = PipelineStage(
            "Generator", "generator", ("from_generator",), f"{script}:11", by_library=True,
            python=True, function="DataGenerator.__getitem__", function_location=f"{script}:8",
        )  # fmt: skip
        pipeline = PipelineFacts(
            1, location=f"{script}:11", stages=(adapter,), consumer="keras-fit"
        )
        return plan(
            [finding("input.python-function")],
            Facts(tfdata=TfDataFacts(pipelines=(pipeline,))),
            files,
        )

    (found,), _ = plan_with("{'batch_size': 64, 'shuffle': True}")
    assert "super().__init__(**kwargs, workers=4)" in edited(str(script), found)
    may_hold = (
        "{'batch_size': 64, 'workers': 2}",
        "load_params()",
        "{'batch_size': 64}\nparams['workers'] = 2",  # changed in place after
        "{'batch_size': 64}\nparams.update(workers=2)",
    )
    for may in may_hold:
        found, refused = plan_with(may)
        assert not [c for c in found if "worker threads" in c.fix]
        assert any("may already hold workers" in r.why for r in refused)


def test_an_input_a_gpu_would_wait_for_is_tried_with_the_pipeline_s_fixes(tmp_path):
    """input.projected-bound (HIGH, with --target) names the cache, parallel maps and
    prefetch in its fix; gpuwhy fix said it had "no automatic fix" for it and skipped
    the LOW input.no-cache whose cache ran helper-57's weather forecast 1.8x faster.
    The pipeline's fixes are tried for it, and the cache is not tried twice."""
    path, files = setup(tmp_path)
    tfdata = cacheable_pipeline(path)
    low_cache = replace(finding("input.no-cache"), severity="low")
    found, refused = plan(
        [finding("input.projected-bound"), low_cache], Facts(tfdata=tfdata), files
    )
    assert [c.finding for c in found] == ["input.projected-bound"]
    assert ".batch(2).cache().prefetch(tf.data.AUTOTUNE)\n" in edited(path, found[0])
    assert not any("no automatic fix" in n.why for n in refused)
