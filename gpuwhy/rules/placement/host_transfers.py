"""placement.host-transfers: the step copies many or large tensors between host and GPU."""

from __future__ import annotations

from typing import Any

from gpuwhy.facts import Facts, HostDeviceCopy
from gpuwhy.rules.base import Finding, Rule
from gpuwhy.rules.placement.common import prediction_note, size_text


def _row(copy: HostDeviceCopy) -> dict[str, Any]:
    row: dict[str, Any] = {
        "direction": copy.direction,
        "tensor": f"{copy.src} ({copy.src_op}) -> {copy.dst} ({copy.dst_op})",
        "dtype": copy.dtype,
        "shape": list(copy.shape) if copy.shape is not None else None,
        "bytes": copy.bytes,
    }
    if copy.in_loop:
        row["in_loop"] = True
    if copy.location:
        row["location"] = copy.location
    return row


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

    Copies smaller than `min_copy_bytes` (scalars, loop counters, shape vectors) are
    counted in the evidence but do not make the finding: TensorFlow keeps int32 shape
    arithmetic in host memory on purpose. A sizeable copy inside a `tf.while_loop` body
    makes it too, as it is paid on every iteration. Without a GPU the copies are
    predicted from the placement and the report says so.

    ## Options
    - `max_bytes_per_step`: total bytes those copies move per step above which the
      finding fires (67108864, 64 MiB).
    - `max_copies_per_step`: host<->device copies per step, input batch excluded, above
      which the finding fires (16).
    - `min_copy_bytes`: copies with a known size below this are not counted (1024).
    """

    id = "placement.host-transfers"
    severity = "medium"
    status = "stable"
    needs = ("placement",)
    options = {
        "max_bytes_per_step": 64 * 1024 * 1024,
        "max_copies_per_step": 16,
        "min_copy_bytes": 1024,
    }
    question = "Why is it slow?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        placement = facts.placement
        if placement is None:  # in `needs`: the registry never runs it without
            return []
        step = [c for c in placement.copies if c.kind == "step"]
        big = [c for c in step if c.sizeable(options["min_copy_bytes"])]
        total_bytes = sum(c.bytes for c in big if c.bytes is not None)
        looped = [c for c in big if c.in_loop]
        many = len(big) > options["max_copies_per_step"]
        heavy = total_bytes > options["max_bytes_per_step"]
        if not (many or heavy or looped):
            return []
        big.sort(key=lambda c: (not c.in_loop, -(c.bytes or 0)))
        inputs = [c for c in placement.copies if c.kind == "input"]
        evidence: dict[str, Any] = {
            "copies_per_step": len(big),
            "bytes_per_step_known": total_bytes,
            "copies_of_unknown_size": sum(1 for c in big if c.bytes is None),
            "copies_inside_loops": len(looped),
            "small_copies_not_counted": len(step) - len(big),
            "input_batch_copies": len(inputs),
            "largest": [_row(c) for c in big[:10]],
            **prediction_note(placement),
        }
        causes = list(
            dict.fromkeys(
                f"{c.cause} at {c.location}" if c.location else str(c.cause) for c in big[:5]
            )
        )
        fix = "\n".join(
            [
                "# the ops that make these copies (see placement.no-gpu-kernel / placement.forced-cpu):"
            ]
            + [f"#   {cause}" for cause in causes]
            + [
                "# keep the step's tensors on the GPU: replace host-only ops with TF ops that have",
                "# GPU kernels, drop tf.device('/CPU:0') blocks, and move host work into tf.data:",
                "<dataset>.map(<your preprocessing>, num_parallel_calls=tf.data.AUTOTUNE)"
                ".prefetch(tf.data.AUTOTUNE)",
            ]
        )
        size = f" ({size_text(total_bytes)} of known size)" if total_bytes else ""
        loop_note = f", {len(looped)} inside a loop (paid every iteration)" if looped else ""
        return [
            self.finding(
                f"Each call copies {len(big)} tensor{'s' if len(big) != 1 else ''} between host and GPU{size}{loop_note}",
                severity="high" if heavy or (looped and many) else self.severity,
                evidence=evidence,
                fix=fix,
                estimated_gain="each copy removed saves its PCIe transfer and a host<->GPU synchronisation",
                location=big[0].location if big else None,
            )
        ]
