"""input.no-cache: the same expensive preprocessing is repeated every epoch."""

from gpuwhy.rules.base import Rule


class NoCache(Rule):
    """Deterministic, expensive preprocessing is recomputed every epoch though it fits memory.

    ## What it detects
    The pipeline repeats work whose result is the same every epoch (reading, decoding,
    resizing, tokenising: the stages before the first random or stateful one) and that
    work takes at least `min_stage_fraction` of the pipeline's time, while its output,
    estimated from the element size and count, fits in `max_memory_fraction` of host
    memory. No `cache()` sits after those stages.

    ## Why is this slow?
    Every epoch pays the full decode cost again on the host cores, so the first epoch's
    input bottleneck repeats in all of them and the GPU idles for the same reason each
    time. `ds.cache()` keeps the result of the deterministic stages in memory (or in a
    file) after the first epoch; later epochs read it at memory speed and only the
    cheap random augmentation runs again.

    ## Example
    ```python
    ds = (tf.data.Dataset.from_tensor_slices(paths)
          .map(load_and_resize, num_parallel_calls=tf.data.AUTOTUNE)  # same every epoch
          .shuffle(10_000)
          .map(augment, num_parallel_calls=tf.data.AUTOTUNE)
          .batch(64)
          .prefetch(tf.data.AUTOTUNE))
    model.fit(ds, epochs=50)
    ```

    Use instead:
    ```python
    ds = (tf.data.Dataset.from_tensor_slices(paths)
          .map(load_and_resize, num_parallel_calls=tf.data.AUTOTUNE)
          .cache()                     # or .cache("/local_ssd/train") if RAM is short
          .shuffle(10_000)             # after cache: a new order every epoch
          .map(augment, num_parallel_calls=tf.data.AUTOTUNE)
          .batch(64)
          .prefetch(tf.data.AUTOTUNE))
    ```

    ## Options
    - `max_memory_fraction`: largest share of host memory the cached data may take
      (0.50).
    - `min_stage_fraction`: share of the pipeline's time in cacheable stages needed
      for the finding (0.20).
    """

    id = "input.no-cache"
    severity = "medium"
    status = "planned"
    needs = ("environment", "tfdata")
    options = {"max_memory_fraction": 0.50, "min_stage_fraction": 0.20}
    question = "Why is every epoch slow?"
