"""tensorcore.unused: float32 matmul/conv without TF32 or mixed precision on a tensor-core GPU."""

from gpuwhy.rules.base import Rule


class TensorCoreUnused(Rule):
    """Matmuls and convolutions run in plain float32 on a GPU whose tensor cores sit idle.

    ## What it detects
    On a GPU with tensor cores (compute capability 7.0 or newer), at least
    `min_fraction` of the step's matmul/convolution FLOPs are float32 with neither
    mixed precision nor TF32: on Volta and Turing (7.x), which have no TF32, any
    float32 policy; on Ampere and newer (8.0+), where TF32 is on by default since
    TF 2.5, only when it was turned off with
    `tf.config.experimental.enable_tensor_float_32_execution(False)` or
    `NVIDIA_TF32_OVERRIDE=0`.

    ## Why is this slow?
    Without a tensor-core data type, cuBLAS and cuDNN run matmuls and convolutions on
    the ordinary FP32 units, which deliver a fraction of the tensor cores' throughput
    (an A100: 19.5 TFLOPS FP32, 156 TF32, 312 FP16/BF16). Mixed precision also halves
    the bytes of activations read and written, which speeds up memory-bound layers and
    frees memory for larger batches.

    ## Example
    ```python
    tf.config.experimental.enable_tensor_float_32_execution(False)  # or a T4 / V100
    model = keras.Sequential([keras.layers.Dense(4096, activation="relu"),
                              keras.layers.Dense(4096, activation="relu"),
                              keras.layers.Dense(10, activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    ```

    Use instead:
    ```python
    tf.keras.mixed_precision.set_global_policy("mixed_float16")  # "mixed_bfloat16" on 8.0+
    model = keras.Sequential([keras.layers.Dense(4096, activation="relu"),
                              keras.layers.Dense(4096, activation="relu"),
                              keras.layers.Dense(10, activation="softmax",
                                                 dtype="float32")])  # keep outputs float32
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    # compile() wraps the optimizer in a LossScaleOptimizer for mixed_float16
    ```

    ## Options
    - `min_fraction`: share of the step's matmul/convolution FLOPs in float32 without
      tensor cores needed for the finding (0.10).
    """

    id = "tensorcore.unused"
    severity = "medium"
    status = "planned"
    needs = ("environment", "devices", "placement")
    options = {"min_fraction": 0.10}
    question = "Are tensor cores used?"
