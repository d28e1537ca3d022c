"""launch.retracing: a tf.function is traced again and again."""

from gpuwhy.rules.base import Rule


class Retracing(Rule):
    """A `tf.function` is traced again and again instead of reusing its graph.

    ## What it detects
    A `tf.function` traced more than `max_traces` times during the run (TF itself warns
    "... calls to <function> triggered tf.function retracing"). The finding
    names the function, its file:line, how many traces it had, their total time, and
    which argument changed between traces: a Python scalar or object, a new tensor
    shape or dtype, or a `tf.function` created anew inside a loop.

    ## Why is this slow?
    A trace runs the Python function to build a new graph, then TF optimises it (and
    with `jit_compile=True` XLA compiles it again): milliseconds to seconds during
    which the GPU has no work. A function that retraces on every call pays this on
    every step, and each new concrete function also keeps its graph in memory. Tensor
    arguments with a stable signature are traced once and reused.

    ## Example
    ```python
    @tf.function
    def train_step(x, y, lr):
        ...

    for step, (x, y) in enumerate(ds):           # variable-length sequences
        train_step(x, y, lr=schedule(step))      # new Python float: new trace
    ```

    Use instead:
    ```python
    @tf.function(input_signature=[
        tf.TensorSpec([None, None], tf.int32),   # any batch and sequence length
        tf.TensorSpec([None], tf.int32),
        tf.TensorSpec([], tf.float32)])          # lr as a tensor, not a constant
    def train_step(x, y, lr):
        ...
    # or @tf.function(reduce_retracing=True) to generalise shapes automatically
    ```

    ## Options
    - `max_traces`: traces of one function above which it is reported (5).
    """

    id = "launch.retracing"
    severity = "high"
    status = "planned"
    needs = ("steps", "tracing")
    options = {"max_traces": 5}
    question = "Why is tf.function slow?"
