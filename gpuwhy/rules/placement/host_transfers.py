"""placement.host-transfers: the step copies many or large tensors between host and GPU."""

from gpuwhy.rules.base import Rule


class HostTransfers(Rule):
    """Each step copies many or large tensors between host and GPU memory.

    ## What it detects
    The host-to-device and device-to-host copies that the step's placement implies:
    every graph edge from an op on one device to an op on the other (CPU-only ops,
    `tf.device` pins, int32 tensors TF keeps in host memory, variables on the CPU). It
    fires when their number per step exceeds `max_copies_per_step` or their total size
    exceeds `max_bytes_per_step`, and lists the largest edges with their ops and shapes.
    The input batch itself is counted apart: it is expected.

    ## Why is this slow?
    A copy crosses PCIe at roughly 25 GB/s (Gen4 x16) against 1-3 TB/s of GPU memory
    bandwidth, and each one costs about 10 µs of fixed latency. A device-to-host copy
    also has to wait until the GPU has computed its input, so the host stalls, then the
    GPU stalls waiting for the host's answer: the stream is serialised instead of
    queued ahead. Sending every gradient to the host and back moves twice the model's
    size over PCIe on every step.

    ## Example
    ```python
    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        grads = [tf.numpy_function(np.clip, [g, -1.0, 1.0], g.dtype)   # to host and back
                 for g in grads]
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    ```

    Use instead:
    ```python
    grads = [tf.clip_by_value(g, -1.0, 1.0) for g in grads]   # stays on the GPU
    ```

    ## Options
    - `max_bytes_per_step`: total bytes those copies move per step above which the
      finding fires (67108864, 64 MiB).
    - `max_copies_per_step`: host<->device copies per step, input batch excluded, above
      which the finding fires (16).
    """

    id = "placement.host-transfers"
    severity = "medium"
    status = "planned"
    needs = ("placement", "steps")
    options = {"max_bytes_per_step": 64 * 1024 * 1024, "max_copies_per_step": 16}
    question = "Why is it slow?"
