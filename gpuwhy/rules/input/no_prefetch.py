"""input.no-prefetch: input preparation and GPU compute do not overlap."""

from gpuwhy.rules.base import Rule


class NoPrefetch(Rule):
    """Input preparation and GPU compute take turns instead of overlapping.

    ## What it detects
    The next batch is produced only when the step asks for it: the step's input wait is
    at least `min_input_wait` and about equal to the time to produce one batch, and the
    pipeline TF runs has no buffer ahead of the step. Causes: batches produced by a
    plain Python loop or generator that feeds the step directly, or a tf.data pipeline
    without a final `prefetch` where TF injects none (`inject_prefetch` needs autotune,
    so `options.autotune.enabled = False` or
    `experimental_optimization.inject_prefetch = False` leave the pipeline unbuffered).

    ## Why is this slow?
    Without a buffer the host starts on batch N+1 only when the loop asks for it, after
    step N has been dispatched. At best the GPU work already queued for step N hides
    part of that time; anything that waits for a result (reading the loss, a metric, a
    callback) removes even that. Step time tends to input time plus compute time
    instead of the larger of the two. `prefetch` runs the producer on a background
    thread, so the next batch is already in host memory when the step starts.

    ## Example
    ```python
    def batches():
        while True:
            yield load_batch_from_disk()        # NumPy, 30 ms per batch

    for x, y in batches():                      # load, then train, then load ...
        train_step(x, y)
    ```

    Use instead:
    ```python
    ds = tf.data.Dataset.from_generator(batches, output_signature=(
        tf.TensorSpec((None, 224, 224, 3), tf.float32),
        tf.TensorSpec((None,), tf.int64)))
    for x, y in ds.prefetch(tf.data.AUTOTUNE):  # produced while the GPU computes
        train_step(x, y)
    ```

    ## Options
    - `min_input_wait`: input-wait fraction of step time below which the finding does
      not fire (0.05, XProf's input-bound threshold).
    """

    id = "input.no-prefetch"
    severity = "medium"
    status = "planned"
    needs = ("steps", "tfdata")
    options = {"min_input_wait": 0.05}
    question = "Why is the GPU idle between steps?"
