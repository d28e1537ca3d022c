"""input.python-function: the input pipeline calls back into Python."""

from gpuwhy.rules.base import Rule


class PythonFunction(Rule):
    """The input pipeline runs Python code (py_function, numpy_function, from_generator).

    ## What it detects
    A stage of the tf.data pipeline that calls back into the Python interpreter:
    `tf.py_function` or `tf.numpy_function` inside a `map`/`filter`/`interleave`
    function, or a `tf.data.Dataset.from_generator` source. The finding names the stage
    and the file:line of the Python function, with its time per element where measured.

    ## Why is this slow?
    Python code holds the GIL, so `num_parallel_calls` threads take turns on one core
    instead of using all of them, and they compete with the training loop's own Python
    thread. The stage is stateful, so TF's map_parallelization leaves it sequential;
    tensors are converted to NumPy and back on every call; and the pipeline cannot run
    on tf.data service workers, since the Python function exists only in this process.
    When it is the slowest stage, the GPU idles until Python has produced the batch.

    ## Example
    ```python
    def load(path):
        img = PIL.Image.open(path.numpy().decode()).convert("RGB").resize((224, 224))
        return np.asarray(img, np.float32) / 255.0

    ds = paths.map(lambda p: tf.py_function(load, [p], tf.float32),
                   num_parallel_calls=tf.data.AUTOTUNE)      # still one core: the GIL
    ```

    Use instead:
    ```python
    def load(path):
        img = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        return tf.image.resize(img, (224, 224)) / 255.0   # TF ops: no GIL, all cores

    ds = paths.map(load, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
    ```

    ## Options
    None.
    """

    id = "input.python-function"
    severity = "medium"
    status = "planned"
    needs = ("tfdata",)
    options = {}
    question = "Why is the pipeline slow?"
