"""gpu.underutilized: measured GPU activity during steps is low."""

from gpuwhy.rules.base import Rule


class GpuUnderutilized(Rule):
    """The GPU is measured idle for much of each training step.

    ## What it detects
    NVML samples taken during steps (not during start-up, compilation or evaluation)
    show GPU utilisation below `max_utilization`, or, on Hopper and newer where GPM
    metrics exist, SM activity below `max_sm_activity`. The finding gives the measured
    values and points to the other findings that explain them (input, launch overhead,
    placement, batch size).

    ## Why is this slow?
    NVML's "GPU utilisation" is the share of time in which at least one kernel was
    running, so a low value means the GPU had nothing queued: it was waiting for input,
    for the host to launch the next kernel, or for a copy. A high value is not proof of
    a busy GPU either: one tiny kernel at a time reads 100% while most SMs are idle,
    which is why SM activity (GPM) is the better measure where available.

    ## Example
    ```python
    ds = tf.data.Dataset.from_tensor_slices((x, y)).map(augment).batch(32)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.fit(ds, epochs=10)                   # nvidia-smi: 20-30%
    ```

    Use instead:
    ```python
    ds = (tf.data.Dataset.from_tensor_slices((x, y))
          .map(augment, num_parallel_calls=tf.data.AUTOTUNE)
          .batch(256)
          .prefetch(tf.data.AUTOTUNE))
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                  steps_per_execution=32)
    model.fit(ds, epochs=10)
    ```

    ## Options
    - `max_sm_activity`: GPM SM activity during steps (0-1) below which the finding
      fires, where GPM is available (0.30).
    - `max_utilization`: NVML GPU utilisation during steps (0-1) below which the
      finding fires (0.50).
    """

    id = "gpu.underutilized"
    severity = "medium"
    status = "planned"
    needs = ("steps", "gpu_samples")
    options = {"max_sm_activity": 0.30, "max_utilization": 0.50}
    question = "Is the GPU busy?"
