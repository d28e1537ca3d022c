"""memory.near-limit: peak GPU memory is close to the device's capacity."""

from gpuwhy.rules.base import Rule


class MemoryNearLimit(Rule):
    """Peak GPU memory in use is close to the device's limit.

    ## What it detects
    TensorFlow's own peak allocation on a GPU (`tf.config.experimental.get_memory_info`
    "peak", not the pool that nvidia-smi shows: TF reserves most of the memory up front
    unless memory growth is on) reaches `min_peak_fraction` of what TF can use on that
    device, or TF logged that its allocator ran out of memory. The finding gives the
    peak, the limit, the batch size and the largest tensors where known.

    ## Why is this slow?
    TensorFlow never moves an op to the CPU because GPU memory is short: a real
    shortage is a `ResourceExhaustedError`. Before that, it slows down: cuDNN's
    autotuner skips convolution algorithms whose workspace does not fit and picks
    slower ones, TF warns "ran out of memory trying to allocate ... there could be
    performance gains if more memory were available", and a fragmented pool makes the
    next larger batch or sequence fail mid-epoch.

    ## Example
    ```python
    model = keras.applications.ResNet152(weights=None, classes=1000)
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    model.fit(ds.batch(256), epochs=90)   # peak 78.1 of 79.1 GiB
    ```

    Use instead:
    ```python
    tf.keras.mixed_precision.set_global_policy("mixed_bfloat16")  # ~half the activations
    model = keras.applications.ResNet152(weights=None, classes=1000)
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    model.fit(ds.batch(192), epochs=90)   # or recompute activations (tf.recompute_grad)
    ```

    ## Options
    - `min_peak_fraction`: peak allocation as a share of the usable device memory that
      makes the finding (0.90).
    """

    id = "memory.near-limit"
    severity = "medium"
    status = "planned"
    needs = ("devices", "memory")
    options = {"min_peak_fraction": 0.90}
    question = "Why did it fall back / OOM?"
