"""Reading a transformation call from the user's source, as Python reports its line."""

import ast
import sys

import numpy as np

from gpuwhy import source_calls
from gpuwhy.source_calls import written_call

SOURCE = """\
import tensorflow as tf
ds = tf.data.Dataset.range(10)
ds = ds.map(parse)
ds = (tf.data.TFRecordDataset(
          files, compression_type="GZIP")
      .map(lambda x: x,
           num_parallel_calls=4)
      .batch(32))
self.train_ds = self.train_ds.map(a).map(b)
"""


def test_calls_read_as_written(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(SOURCE)
    read = lambda line, api, fn=None: written_call(str(path), line, api, fn)
    assert read(2, "range") == "tf.data.Dataset.range(10)"
    assert read(3, "map", "parse") == "ds.map(parse)"
    # a multi-line constructor: its line is its name's; keywords normalised
    assert read(4, "TFRecordDataset") == "tf.data.TFRecordDataset(files, compression_type='GZIP')"
    # inside a chain: from the dot, at the line of the method's name
    assert read(6, "map", "<lambda>") == ".map(lambda x: x, num_parallel_calls=4)"
    assert read(8, "batch") == ".batch(32)"
    # two maps on one line: told apart by the function, else not guessed
    assert read(9, "map", "b") == ".map(b)"
    assert read(9, "map", "a") == "self.train_ds.map(a)"
    assert read(9, "map") is None


def test_the_line_python_reports_for_a_chained_call_is_the_method_name_s(tmp_path):
    path = tmp_path / "chain.py"
    path.write_text(
        "import sys\n"
        "class D:\n"
        "    def map(self, f):\n"
        "        self.line = sys._getframe(1).f_lineno\n"
        "        return self\n"
        "d = (D()\n"
        "     .map(\n"
        "        abs))\n"
    )
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    line = namespace["d"].line
    assert line == 7 and sys.version_info >= (3, 11)
    assert written_call(str(path), line, "map", "abs") == ".map(abs)"


def test_no_source_no_call(tmp_path):
    assert written_call(str(tmp_path / "missing.py"), 3, "map") is None
    broken = tmp_path / "broken.py"
    broken.write_text("ds = ds.map(\n")
    assert written_call(str(broken), 1, "map") is None
    path = tmp_path / "ok.py"
    path.write_text("ds = ds.map(f)\n")
    assert written_call(str(path), 1, "batch") is None
    assert written_call(str(path), 0, "map") is None


def test_a_batch_size_computed_from_the_replicas_through_names(tmp_path):
    from gpuwhy.source_calls import scaled_by

    script = tmp_path / "train.py"
    script.write_text(
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "print('devices:', strategy.num_replicas_in_sync)\n"  # a mention that scales nothing
        "BATCH_SIZE = 64\n"
        "PER_REPLICA = 32\n"
        "GLOBAL = PER_REPLICA * strategy.num_replicas_in_sync\n"
        "a = ds.batch(BATCH_SIZE)\n"
        "b = ds.batch(GLOBAL)\n"
        "c = ds.batch(batch_size=64 * strategy.num_replicas_in_sync)\n"
        "d = ds.batch(args.batch_size)\n"
        "e = ds.batch(int(os.environ['BATCH']))\n"
    )
    found = [scaled_by(str(script), line, "batch", "num_replicas_in_sync") for line in range(7, 12)]
    assert found == [False, True, True, None, None]
    assert scaled_by(str(script), 3, "batch", "num_replicas_in_sync") is None  # no call there


WALKTHROUGH = """\
import tensorflow as tf
model = make_model()
optimizer = tf.keras.optimizers.SGD(0.01)


def grad(model, inputs, targets):
    with tf.GradientTape() as tape:
        loss_value = loss(model, inputs, targets)
    return loss_value, tape.gradient(loss_value, model.trainable_variables)


for epoch in range(201):
    epoch_loss_avg = tf.keras.metrics.Mean()
    epoch_accuracy = tf.keras.metrics.SparseCategoricalAccuracy()
    for x, y in train_dataset:
        loss_value, grads = grad(model, x, y)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        epoch_loss_avg.update_state(loss_value)
        epoch_accuracy.update_state(y, model(x, training=True))
    print(epoch_loss_avg.result())
"""


def test_the_step_code_of_a_loop_body_names_the_metrics_the_epoch_loop_re_creates(tmp_path):
    from gpuwhy.source_calls import step_code

    path = tmp_path / "walk.py"
    path.write_text(WALKTHROUGH)
    # most ops at the loop body's lines, fewer in grad()
    code = step_code(str(path), "walk.py", {17: 300, 18: 10, 19: 40, 8: 100})
    assert code is not None
    assert (code.function, code.location, code.signature) == (
        None,
        "walk.py:15",
        "def train_step(x, y):",
    )
    assert [(r.name, r.location, r.loop, r.metric) for r in code.rebound] == [
        ("epoch_loss_avg", "walk.py:13", "walk.py:12", True),
        ("epoch_accuracy", "walk.py:14", "walk.py:12", True),
    ]
    # the body moves as written into a function defined before the epoch loop
    assert code.before == "walk.py:12" and not code.part
    assert code.body == (
        "loss_value, grads = grad(model, x, y)",
        "optimizer.apply_gradients(zip(grads, model.trainable_variables))",
        "epoch_loss_avg.update_state(loss_value)",
        "epoch_accuracy.update_state(y, model(x, training=True))",
    )
    # a value of the body read after the loop: the statements issuing the ops move, and
    # return it (source_step.py); the metrics' updates stay in the loop
    after = tmp_path / "after.py"
    after.write_text(WALKTHROUGH + "print(loss_value)\n")
    code = step_code(str(after), "after.py", {16: 100, 17: 300})
    assert code is not None and code.signature == "def train_step(x, y):"
    assert code.moved == (16, 17) and code.call == "loss_value = train_step(x, y)"
    assert code.part  # the statements issuing the ops, not the whole body
    assert code.body[-1] == "return loss_value"
    # grad() reads only its arguments: nothing re-created to name
    code = step_code(str(path), "walk.py", {8: 500, 17: 10})
    assert code is not None
    assert (code.function, code.location) == ("grad", "walk.py:6")
    assert code.signature == "def grad(model, inputs, targets):"
    assert code.rebound == ()


def test_an_optimizer_re_created_per_run_is_named_but_not_as_a_metric(tmp_path):
    from gpuwhy.source_calls import step_code

    path = tmp_path / "sweep.py"
    path.write_text(
        "@some.decorator\n"
        "def step(x):\n"
        "    optimizer.minimize(lambda: loss(x), var_list)\n"
        "for lr in (0.1, 0.01):\n"
        "    optimizer = tf.keras.optimizers.Adam(lr)\n"
        "    step(x)\n"
    )
    code = step_code(str(path), "sweep.py", {3: 100})
    assert code is not None and code.signature == "def step(x):"
    assert [(r.name, r.metric) for r in code.rebound] == [("optimizer", False)]
    # another function's loop assigns its own local of the same name: not the global
    path.write_text(
        "def step(x):\n"
        "    optimizer.minimize(lambda: loss(x), var_list)\n"
        "def sweep():\n"
        "    for lr in (0.1, 0.01):\n"
        "        optimizer = tf.keras.optimizers.Adam(lr)\n"
    )
    code = step_code(str(path), "sweep.py", {2: 100})
    assert code is not None and code.rebound == ()
    assert step_code(str(tmp_path / "gone.py"), "gone.py", {3: 1}) is None


def test_a_replica_step_is_traced_through_the_function_that_runs_it(tmp_path):
    from gpuwhy.source_calls import step_code

    path = tmp_path / "dist.py"
    path.write_text(
        "def train_step(x):\n"
        "    optimizer.apply_gradients(grads(x))\n"
        "def distributed_train_step(x):\n"
        "    return strategy.run(train_step, args=(x,))\n"
    )
    code = step_code(str(path), "dist.py", {2: 100})
    assert code is not None
    assert (code.function, code.location) == ("distributed_train_step", "dist.py:3")
    assert code.signature == "def distributed_train_step(x):"


def test_the_statements_that_add_to_a_container_it_names(tmp_path):
    from gpuwhy.source_calls import growth_sites

    path = tmp_path / "loop.py"
    path.write_text(
        "history = []\n"
        "def train(ds):\n"
        "    for step, x in enumerate(ds):\n"
        "        history.append(model(x))\n"
        "        history += [x]\n"
        "        seen[step] = x\n"
        "        self.history.extend(x)\n"
        "    history.sort()\n"
    )
    sites = growth_sites(str(path), "history")
    assert sites == [(4, "history.append(model(x))"), (5, "history += [x]")]
    assert growth_sites(str(path), "history", attribute=True) == [(7, "self.history.extend(x)")]
    assert growth_sites(str(path), "seen", lines=(2, 5)) == []
    assert growth_sites(str(path), "seen") == [(6, "seen[step] = x")]
    assert growth_sites(str(tmp_path / "gone.py"), "history") == []


def _body_of_loop_at(tmp_path, source: str, line: int) -> tuple[str, ...]:
    import ast

    from gpuwhy.source_calls import _movable_body

    path = tmp_path / "loop.py"
    path.write_text(source)
    tree = ast.parse(source)
    (loop,) = [n for n in ast.walk(tree) if isinstance(n, ast.For) and n.lineno == line]
    return _movable_body(str(path), tree, loop)


LOOP_AFTER_DEMO = """loss_value, grads = grad(model, features, labels)
print(loss_value)
for epoch in range(3):
    mean = Mean()
    for x, y in ds:
        loss_value, grads = grad(model, x, y)
        apply(grads)
        mean.update_state(loss_value)
    results.append(mean.result())
"""


def test_a_loop_body_whose_names_the_code_before_uses_moves_and_one_read_after_does_not(
    tmp_path,
):
    # the tutorials' one-step demonstration before the loop reads the names it assigns
    body = _body_of_loop_at(tmp_path, LOOP_AFTER_DEMO, 5)
    assert body[0] == "loss_value, grads = grad(model, x, y)" and len(body) == 3
    after = LOOP_AFTER_DEMO + "print(loss_value)\n"
    assert _body_of_loop_at(tmp_path, after, 5) == ()
    # read before the inner loop, inside the epoch loop: the next epoch reads the last pass's
    carried = LOOP_AFTER_DEMO.replace("    mean = Mean()\n", "    mean = Mean(grads)\n")
    assert _body_of_loop_at(tmp_path, carried, 5) == ()


def test_a_loop_body_that_reads_what_its_last_pass_assigned_does_not_move(tmp_path):
    source = "total = 0\nfor x in ds:\n    total = total + step(x)\n"
    assert _body_of_loop_at(tmp_path, source, 2) == ()
    augmented = "total = 0\nfor x in ds:\n    total += step(x)\n"
    assert _body_of_loop_at(tmp_path, augmented, 2) == ()
    fresh = "for x in ds:\n    with tape() as t:\n        loss = f(x)\n    g = t.grad(loss)\n"
    assert len(_body_of_loop_at(tmp_path, fresh, 1)) == 3


MAIN_LOOP = """import tensorflow as tf


def main():
    model = make_model()
    for epoch in range(5):
        epoch_loss = 0.0
        for step, (xb, yb) in enumerate(dataset):
            with tf.GradientTape() as tape:
                loss = loss_fn(yb, model(xb, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            epoch_loss += loss.numpy()
        print(epoch, epoch_loss)


def step_with_layers(x):
    for layer in layers:
        x = layer(x)
    return x
"""


def test_a_training_loop_written_inside_main_is_the_step_not_main(tmp_path):
    """The steps' loop (its next() at line 8) runs inside main(): main in a tf.function
    would be the whole training traced; the loop's op statements are the step. A loop
    over layers inside a step function is the function's own: the function is the step."""
    from gpuwhy.source_calls import step_code

    path = tmp_path / "train.py"
    path.write_text(MAIN_LOOP)
    code = step_code(str(path), "train.py", {10: 30, 11: 20, 12: 9}, loop_lines=[8])
    assert code is not None and code.function is None and code.location == "train.py:8"
    assert code.call == "loss = train_step(xb, yb)" and code.moved == (9, 12)
    assert code.before == "train.py:6"  # defined in main, before the epoch loop
    # without the steps' loop site, main is the innermost function, as before
    code = step_code(str(path), "train.py", {10: 30, 11: 20, 12: 9})
    assert code is not None and code.function == "main"
    # a step function whose own loop is over layers stays the step
    code = step_code(str(path), "train.py", {19: 40}, loop_lines=[30])
    assert code is not None and code.function == "step_with_layers"


PER_CLASS = """\
import tensorflow as tf


@tf.function
def train_step(x, y):
    return x * 2.0, y


class_loss = [0.0] * 10
for epoch in range(2):
    for x, y in dataset:
        per_example, _ = train_step(x, y)
        for label in range(10):
            in_class = tf.cast(tf.equal(y, label), tf.float32)
            count = tf.reduce_sum(in_class)
            total = tf.reduce_sum(per_example * in_class) / tf.maximum(count, 1.0)
            class_loss[label] += total
"""


def test_a_loop_body_fix_takes_the_outer_loops_batch_and_never_reuses_a_programs_name(tmp_path):
    """The per-class loop (slow_training.py's): its function is not called train_step,
    which the program defines and calls three lines before (pasted, it would replace
    it); it takes ``y`` and ``per_example``, new on each pass of the outer loop (closed
    over, a tf.function would keep the first batch's); and its body, which adds to a
    Python list, does not move as written (in a graph that happens once, at the trace)."""
    from gpuwhy.source_calls import step_code

    path = tmp_path / "per_class.py"
    path.write_text(PER_CLASS)
    code = step_code(str(path), "per_class.py", {15: 40, 16: 10, 17: 30, 18: 10})
    assert code is not None and code.function is None
    assert code.signature == "def loop_step(label, y, per_example):"
    assert code.body == () and code.call is None
    fixed = PER_CLASS.replace("            class_loss[label] += total\n", "")
    path.write_text(fixed)
    code = step_code(str(path), "per_class.py", {15: 40, 16: 10, 17: 30})
    assert code is not None and code.body  # nothing changed outside: it moves as written
    assert code.call == "loop_step(label, y, per_example)"


def test_mutating_python_state_and_free_names():
    import ast

    from gpuwhy.source_step import free_name, mutates_outside

    def body(text: str) -> list[ast.stmt]:
        return ast.parse(text).body

    assert mutates_outside(body("losses.append(loss)"))
    assert mutates_outside(body("self.total = self.total + 1"))
    assert mutates_outside(body("stats['loss'] += loss"))
    assert not mutates_outside(body("row = []\nrow.append(loss)\nrow[0] = 1"))  # its own
    assert not mutates_outside(body("loss = tf.reduce_sum(x)\nopt.apply_gradients(g)"))
    tree = ast.parse("def train_step(x):\n    pass\nloop_step = 1\nimport graph_step\n")
    assert free_name(tree) == "ops_step"


def test_keras_is_named_as_the_script_imports_it():
    import ast

    from gpuwhy.source_calls import keras_spelling

    def spelled(source):
        return keras_spelling(ast.parse(source))

    assert spelled("import tensorflow as tf\nimport keras\n") == "keras"
    assert spelled("import keras as K\nimport tensorflow as tf\n") == "K"
    assert spelled("from tensorflow import keras\n") == "keras"
    assert spelled("import tensorflow as tf\nfrom tensorflow.keras import layers\n") == "tf.keras"
    assert spelled("import tensorflow\n") == "tensorflow.keras"
    assert spelled("import numpy as np\n") is None


def test_float64_makers_are_numpy_s_untyped_calls_and_keras_one_hot_labels(tmp_path):
    """keras.utils.to_categorical returns float64 (Keras 3 takes no dtype): its call is
    where a program's float64 labels come from, unless it is cast after."""
    from gpuwhy.source_calls import numpy_float64_calls

    script = tmp_path / "train.py"
    script.write_text(
        "import numpy as np\nimport keras\n"
        "x = np.random.rand(8, 4)\n"
        "y = keras.utils.to_categorical(labels, 10)\n"
        "z = to_categorical(labels).astype('float32')\n"
        "w = np.zeros(3, dtype='float32')\n"
    )
    assert numpy_float64_calls(str(script)) == [
        (3, "np.random.rand(8, 4)"),
        (4, "keras.utils.to_categorical(labels, 10)"),
    ]
    import keras
    import numpy as np

    assert keras.utils.to_categorical(np.arange(3), 3).dtype == np.float64  # still so


def test_a_draw_of_one_number_is_no_float64_array(tmp_path):
    """``rng.random() < 0.5`` (a coin flip in a PyDataset's augmentation) makes a Python
    float: the fix named it and pasted, ``rng.random().astype('float32')`` raised
    AttributeError. A draw with a shape, or an array for its mean, makes an array."""
    from gpuwhy.source_calls import numpy_float64_calls

    script = tmp_path / "data.py"
    script.write_text(
        "import numpy as np\n"
        "rng = np.random.default_rng(0)\n"
        "if rng.random() < 0.5: pass\n"
        "a = rng.normal(0, -0.01)\n"
        "b = np.random.rand()\n"
        "c = rng.random((4, 4))\n"
        "d = rng.normal(0, 0.01, size=shape)\n"
        "e = rng.normal(x, 0.1)\n"
        "f = np.random.rand(3)\n"
        "g = rng.uniform(0.8, 1.2, (8, 1))\n"
    )
    assert [line for line, _ in numpy_float64_calls(str(script))] == [6, 7, 8, 9, 10]
    rng = np.random.default_rng(0)
    assert isinstance(rng.random(), float) and isinstance(rng.normal(0, 0.01), float)


def test_output_layers_are_whole_lines_with_the_dtype_where_the_trial_adds_it(tmp_path):
    """Each line named is the file's, as written; the new one is that line with the
    keyword after the last argument: on the line a split call's last argument ends, just
    inside ``()`` with none, once per line for two outputs written on one."""
    script = tmp_path / "models.py"
    script.write_text(
        "import keras\n"
        "from keras import layers\n"
        "a = keras.Sequential([layers.Flatten(), layers.Dense(10)])  # logits\n"
        "b = keras.Sequential([\n"
        "    layers.Dense(\n"
        '        3, activation="softmax",\n'
        "    ),\n"
        "])\n"
        "c = keras.Sequential([layers.Softmax()])\n"
        "d = keras.Sequential([layers.Dense(1, name='é')]); e = keras.Sequential([layers.Dense(2)])\n"
        "f = keras.Sequential([layers.Dense(4, dtype='float32')])\n"
    )
    found = source_calls.output_layers(str(script), "dtype='float32'")
    assert found == (
        (
            3,
            "a = keras.Sequential([layers.Flatten(), layers.Dense(10)])  # logits",
            "a = keras.Sequential([layers.Flatten(), layers.Dense(10, dtype='float32')])  # logits",
        ),
        (6, '3, activation="softmax",', "3, activation=\"softmax\", dtype='float32',"),
        (
            9,
            "c = keras.Sequential([layers.Softmax()])",
            "c = keras.Sequential([layers.Softmax(dtype='float32')])",
        ),
        (
            10,
            "d = keras.Sequential([layers.Dense(1, name='é')]); "
            "e = keras.Sequential([layers.Dense(2)])",
            "d = keras.Sequential([layers.Dense(1, name='é', dtype='float32')]); "
            "e = keras.Sequential([layers.Dense(2, dtype='float32')])",
        ),
    )
    assert source_calls.output_layers(str(tmp_path / "missing.py"), "dtype='float32'") == ()


NESTED = """\
import tensorflow as tf


def main(epochs):
    for epoch in range(epochs):
        loss = 0.0; count = 0
        for x in ds:
            if x is not None:
                loss += step(x)
                count += 1
        while count:
            count -= 1

    def inner(values):
        return [v for v in values]

    return inner(loss)


class Trainer:
    def fit(self):
        for batch in self.data: self.step(batch)
"""


def test_the_statement_around_a_line_is_the_innermost_of_its_kind_that_starts_last(tmp_path):
    # _innermost keeps each file's statements once instead of walking every node of the
    # file per line looked up; it must still answer as that walk did, for every line
    path = tmp_path / "train.py"
    path.write_text(NESTED)
    tree = source_calls._tree(str(path))
    # a second tree, whose statements at line 3 differ: each tree keeps its own
    second = tmp_path / "eval.py"
    second.write_text("def evaluate(ds):\n    for x in ds:\n        total = x\n")
    other = source_calls._tree(str(second))

    def walked(tree, line, kinds):
        found = None
        for node in ast.walk(tree):
            if isinstance(node, kinds) and isinstance(node, ast.stmt):
                if node.lineno <= line <= (node.end_lineno or node.lineno):
                    if found is None or node.lineno >= found.lineno:
                        found = node
        return found

    kinds_asked = [
        (ast.FunctionDef, ast.AsyncFunctionDef),
        (ast.For, ast.While, ast.AsyncFor),
        (ast.For,),
        (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Return),
    ]
    for kinds in kinds_asked:
        for line in range(1, NESTED.count("\n") + 2):
            assert source_calls._innermost(tree, line, kinds) is walked(tree, line, kinds)
        for line in (1, 2, 3):
            assert source_calls._innermost(other, line, kinds) is walked(other, line, kinds)
    assert source_calls._innermost(other, 3, (ast.For,)).lineno == 2
    assert source_calls._innermost(tree, 3, (ast.For,)) is None
    # two statements on one line: the later one, as the walk gave it
    assert source_calls.statement_at(f"{path}:6") == "count = 0"
    assert source_calls._innermost(tree, 22, (ast.For,)).lineno == 22
