"""launch.eager-ops: many small ops dispatched one by one from Python each step."""

from gpuwhy.rules.base import Rule


class EagerOps(Rule):
    """Each step dispatches many small ops eagerly from Python; overhead, not math, dominates.

    ## What it detects
    At least `min_ops_per_step` ops per step run eagerly (outside any `tf.function`) on
    tensors smaller than `small_elements` elements: a custom training loop without
    `@tf.function`, Python `for` loops over layers or time steps, `model.compile(
    run_eagerly=True)`, or per-step metric and logging code. The finding names the op
    types and the file:line that issues most of them.

    ## Why is this slow?
    An eager op pays tens of microseconds of Python and runtime dispatch plus 5-10 µs to
    launch its kernel, while a kernel on a small tensor finishes in a few microseconds.
    The GPU runs each kernel, then waits for the host to issue the next one, so it is
    idle most of the step and a faster GPU changes nothing. A `tf.function` runs the
    whole step as one graph in C++ (no per-op Python), and `jit_compile=True` lets XLA
    fuse the element-wise ops into far fewer kernels.

    ## Example
    ```python
    def train_step(x, y):                   # no tf.function: every op from Python
        with tf.GradientTape() as tape:
            h = x
            for w in weights:               # 50 small layers
                h = tf.nn.relu(h @ w)
            loss = tf.reduce_mean(tf.square(h - y))
        grads = tape.gradient(loss, weights)
        optimizer.apply_gradients(zip(grads, weights))
        return loss
    ```

    Use instead:
    ```python
    @tf.function(jit_compile=True)          # one graph per step, fused by XLA
    def train_step(x, y):
        ...                                 # same body
    # Keras: keep model.compile(run_eagerly=False) (the default)
    ```

    ## Options
    - `min_ops_per_step`: small eager ops per step that make the finding (100).
    - `small_elements`: an op whose largest output has fewer elements than this counts
      as small (65536).
    """

    id = "launch.eager-ops"
    severity = "high"
    status = "planned"
    needs = ("steps", "eager")
    options = {"min_ops_per_step": 100, "small_elements": 65536}
    question = "Why is it slow with small ops?"
