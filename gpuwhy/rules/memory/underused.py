"""memory.underused: low peak memory and low GPU activity: a larger batch would help."""

from gpuwhy.rules.base import Rule


class MemoryUnderused(Rule):
    """The GPU is mostly idle and mostly empty: a larger batch would keep it busy.

    ## What it detects
    TensorFlow's peak allocation on the GPU stays below `max_peak_fraction` of the
    device memory while measured activity during steps stays below `max_activity`, and
    the step is not input-bound (the input pipeline keeps up). The finding gives the
    batch size, the peak memory and an estimate of the largest batch that fits.

    ## Why is this slow?
    Every step carries fixed costs that do not grow with the batch: Python and runtime
    dispatch, one kernel launch (5-10 µs) per op, the optimizer update over all
    weights, gradient all-reduce. A small batch also makes kernels too small to fill
    the GPU's SMs (132 on an H100), so each one runs at a fraction of peak. A larger
    batch spreads the fixed costs over more samples and fills the SMs. Note that it
    changes the optimisation: scale the learning rate (linearly, with warm-up) and check
    accuracy.

    ## Example
    ```python
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss="sparse_categorical_crossentropy")
    model.fit(x_train, y_train, batch_size=32, epochs=20)  # 3 of 80 GiB, 15% busy
    ```

    Use instead:
    ```python
    model.compile(optimizer=keras.optimizers.Adam(8e-3),   # learning rate x 8
                  loss="sparse_categorical_crossentropy",
                  steps_per_execution=16)                  # fewer host round trips
    model.fit(x_train, y_train, batch_size=256, epochs=20)
    ```

    ## Options
    - `max_activity`: GPU activity during steps below which the GPU counts as
      underused (0.50).
    - `max_peak_fraction`: peak allocation as a share of device memory below which
      memory counts as underused (0.30).
    """

    id = "memory.underused"
    severity = "low"
    status = "planned"
    needs = ("devices", "memory", "gpu_samples", "steps")
    options = {"max_activity": 0.50, "max_peak_fraction": 0.30}
    question = "How do I maximise utilisation?"
