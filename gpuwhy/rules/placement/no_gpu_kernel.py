"""placement.no-gpu-kernel: an op in the step has no GPU kernel, so it runs on the CPU."""

from gpuwhy.rules.base import Rule


class NoGpuKernel(Rule):
    """An op in the training step has no GPU kernel for its dtypes, so TF runs it on the CPU.

    ## What it detects
    An op inside the step (the `tf.function` that `fit` or a custom loop runs, nested
    functions included) for which TensorFlow registers no GPU kernel for its input and
    output dtypes: string ops (`tf.strings.*`, `StringLookup`, `TextVectorization`),
    `tf.py_function` / `tf.numpy_function`, image decoders, and some integer ops. The
    finding names each op, its dtypes and the file:line that created it.

    ## Why is this slow?
    Soft placement (on by default) silently puts such an op on the CPU. Its inputs are
    copied device-to-host over PCIe, which waits until the GPU has produced them; the op
    runs on the host while the GPU has nothing queued; its result is copied back. Each
    round trip adds a synchronisation point and GPU idle time to every step, and with
    `jit_compile=True` the same op makes XLA compilation fail.

    ## Example
    ```python
    @tf.function
    def train_step(words, y):                  # words: a tf.string tensor
        ids = tf.strings.to_hash_bucket_fast(words, 100_000)   # CPU only
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(ids, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    ```

    Use instead:
    ```python
    ds = ds.map(lambda w, y: (tf.strings.to_hash_bucket_fast(w, 100_000), y),
                num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)

    @tf.function
    def train_step(ids, y):                    # numeric inputs only: all on the GPU
        ...
    ```

    ## Options
    - `ignore_ops`: op types never reported, e.g. ops you keep on the CPU on purpose
      (`[]`).
    """

    id = "placement.no-gpu-kernel"
    severity = "medium"
    status = "planned"
    needs = ("environment", "placement")
    options = {"ignore_ops": []}
    question = "Why are ops on the CPU?"
