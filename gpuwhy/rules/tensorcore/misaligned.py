"""tensorcore.misaligned: fp16/bf16 matmul/conv dimensions are not multiples of 8."""

from gpuwhy.rules.base import Rule


class TensorCoreMisaligned(Rule):
    """16-bit matmuls or convolutions have dimensions that are not multiples of 8.

    ## What it detects
    Float16 or bfloat16 matmuls and convolutions that carry at least `min_fraction` of
    the step's 16-bit FLOPs and have a dimension that is not a multiple of `multiple`:
    a matmul's M, N or K (batch x sequence, units, input features, vocabulary size) or
    a convolution's input or output channels. The finding lists each op with its shape,
    the layer that created it and the nearest aligned size.

    ## Why is this slow?
    Tensor cores work on fixed tiles, and cuBLAS and cuDNN pick their fastest tensor-
    core kernels only when 16-bit dimensions are multiples of 8 (16 bytes). Other sizes
    get padded or less efficient kernels, and older libraries fall back to the
    ordinary CUDA cores entirely. NVIDIA recommends multiples of 8, and of 64 on A100
    and newer for the best tile efficiency. A first convolution with 3 input channels
    is normal and cheap; a 50257-word output layer is not.

    ## Example
    ```python
    tf.keras.mixed_precision.set_global_policy("mixed_float16")
    x = keras.layers.Embedding(50257, 1000)(tokens)
    x = keras.layers.Dense(3001, activation="gelu")(x)
    logits = keras.layers.Dense(50257, dtype="float32")(x)
    ```

    Use instead:
    ```python
    tf.keras.mixed_precision.set_global_policy("mixed_float16")
    x = keras.layers.Embedding(50304, 1024)(tokens)      # vocabulary padded to 64
    x = keras.layers.Dense(3072, activation="gelu")(x)
    logits = keras.layers.Dense(50304, dtype="float32")(x)  # ignore the padded ids
    ```

    ## Options
    - `min_fraction`: share of the step's 16-bit matmul/convolution FLOPs in
      misaligned ops needed for the finding (0.05).
    - `multiple`: the dimension multiple that 16-bit matmuls and convolutions should
      have (8).
    """

    id = "tensorcore.misaligned"
    severity = "low"
    status = "planned"
    needs = ("devices", "placement")
    options = {"min_fraction": 0.05, "multiple": 8}
    question = "Are tensor cores used?"
