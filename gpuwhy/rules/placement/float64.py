"""placement.float64: the step computes in float64."""

from gpuwhy.rules.base import Rule


class Float64(Rule):
    """The step computes in float64, which GPUs run slowly and some ops not at all.

    ## What it detects
    Compute ops in the step (matmul, convolution, element-wise math, reductions) whose
    dtype is float64. The usual sources: `keras.config.set_floatx("float64")`, a layer
    built with `dtype="float64"`, `tf.constant` / `tf.convert_to_tensor` on a NumPy
    array (NumPy defaults to float64), or an explicit `tf.cast(x, tf.float64)`. Keras
    layers cast float inputs to their own dtype, so float64 NumPy data alone only
    doubles the bytes copied; float64 weights or custom math are what trigger this.

    ## Why is this slow?
    Consumer and most inference GPUs (GeForce, T4, L4, L40) run float64 at 1/32 to
    1/64 of their float32 rate; only data-centre parts (A100, H100) reach 1/2. Float64
    never uses the TF32 or 16-bit tensor-core paths, moves twice the bytes of float32
    through memory and PCIe, and a few ops register GPU kernels only for 16/32-bit
    types, so their float64 variants are placed on the CPU with copies around them.

    ## Example
    ```python
    keras.config.set_floatx("float64")        # "for precision"
    model = keras.Sequential([keras.layers.Dense(512, activation="tanh")
                              for _ in range(8)] + [keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    model.fit(x_train, y_train, batch_size=1024)   # x_train: float64 NumPy array
    ```

    Use instead:
    ```python
    keras.config.set_floatx("float32")        # the default; keep float64 only where
    x_train = x_train.astype("float32")       # a measured loss of accuracy needs it
    model = keras.Sequential([keras.layers.Dense(512, activation="tanh")
                              for _ in range(8)] + [keras.layers.Dense(1)])
    ```

    ## Options
    - `min_ops`: float64 compute ops in one step that make the finding (1).
    """

    id = "placement.float64"
    severity = "medium"
    status = "planned"
    needs = ("placement",)
    options = {"min_ops": 1}
    question = "Why are ops slow / on the CPU?"
