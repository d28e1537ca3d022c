"""input.sequential-map: a map stage stays sequential and is the input bottleneck."""

from gpuwhy.rules.base import Rule


class SequentialMap(Rule):
    """A `map` stage runs on one thread after TF's optimisations and is the bottleneck.

    ## What it detects
    In the pipeline TensorFlow actually runs (after its graph rewrites), a `map` stage
    with parallelism 1 is the slowest stage while the step waits for input at least
    `min_input_wait` of its time. TF's map_parallelization rewrite (on by default)
    only parallelises stateless functions, so a map without `num_parallel_calls` stays
    sequential when its function uses stateful ops such as `tf.random.uniform` or
    `tf.image.random_*`, or when default optimisations are turned off.

    ## Why is this slow?
    A sequential map processes one element at a time on one core, however many cores
    the host has. The batch is ready only after `batch_size` calls in a row, so the
    GPU idles for the difference between that time and its own step time, on every
    step; `prefetch` cannot hide a producer that is slower than the consumer.

    ## Example
    ```python
    def augment(image, label):
        image = tf.image.random_flip_left_right(image)     # stateful random ops:
        image = tf.image.random_brightness(image, 0.2)     # not auto-parallelised
        return image, label

    ds = ds.map(augment).batch(128).prefetch(tf.data.AUTOTUNE)
    ```

    Use instead:
    ```python
    ds = (ds.map(augment, num_parallel_calls=tf.data.AUTOTUNE,
                 deterministic=False)          # order need not be kept for training
            .batch(128)
            .prefetch(tf.data.AUTOTUNE))
    ```

    ## Options
    - `min_input_wait`: input-wait fraction of step time below which a sequential map
      is not reported (0.05, XProf's input-bound threshold).
    """

    id = "input.sequential-map"
    severity = "high"
    status = "planned"
    needs = ("steps", "tfdata")
    options = {"min_input_wait": 0.05}
    question = "Why is the pipeline slow?"
