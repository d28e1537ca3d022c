"""placement.host-transfers: the step copies many or large tensors between host and GPU."""

from __future__ import annotations

from typing import Any

from gpuwhy.derived import capture as capture_facts
from gpuwhy.derived.op_classes import is_codec, is_keras_step
from gpuwhy.facts import CaptureFacts, Facts, HostDeviceCopy, PlacementFacts
from gpuwhy.finding import Finding
from gpuwhy.fixes.op_groups import prediction_note, size_text
from gpuwhy.rules.base import Rule
from gpuwhy.rules.placement.common import jit_compile_fix, known_bytes
from gpuwhy.rules.placement.forced_cpu import pinned_groups
from gpuwhy.rules.placement.no_gpu_kernel import reported_groups

# Why the op that makes a copy is on the host: a GPU op whose kernel keeps the argument
# in host memory (TF registers int32 kernels with HostMemory args, memory_types.cc).
MEMORY_TYPE_REASONS = frozenset({"gpu", "gpu-host-memory"})
HOST_MEMORY_NOTE = (
    "GPU ops whose TensorFlow kernels keep these (int32) tensors in host memory: a small "
    "copy each, by TF's design; an XLA-compiled step (jit_compile) has none"
)


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
    every graph edge from an op on one device to an op on the other. It fires when
    their number per step exceeds `max_copies_per_step`, their total size exceeds
    `max_bytes_per_step`, or a sizeable one sits inside a loop, and lists the largest
    edges with their ops and shapes. The input batch itself is counted apart: it is
    expected. Copies made by an op that another finding names (`placement.no-gpu-kernel`,
    `placement.forced-cpu`, `compression.cpu-codec`) are a consequence of that op: that
    finding counts them, with its fix. Edges that cross only because TensorFlow's GPU
    kernel keeps an int32 argument in host memory (a metric's int32 compare, shape
    math) count by their bytes alone: each is a small copy TF makes by design, and a
    step compiled by XLA has none. What remains: ops TF runs on the host by design
    called on every step (summaries, prints), variables or captured values in host
    memory, ops placed with them.

    With a profiler capture of a GPU (`gpuwhy report CAPTURE`, `gpuwhy run --capture N`)
    the copies the GPU actually ran decide: their time not overlapped with a kernel is
    at least `max_copy_share` of the captured steps' time (XProf's threshold), with the
    copies from pageable host memory counted (the driver stages those through a pinned
    buffer: slower, and never overlapped). Where the graph predicted otherwise, the
    finding says both and trusts the capture.

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
        with writer.as_default():
            for var, grad in zip(model.trainable_variables, grads):   # every gradient
                tf.summary.histogram(var.name, grad, step=step)       # to the host
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    ```

    Use instead:
    ```python
        with writer.as_default(), tf.summary.record_if(step % 100 == 0):
            for var, grad in zip(model.trainable_variables, grads):
                tf.summary.histogram(var.name, grad, step=step)
    ```

    Copies smaller than `min_copy_bytes` (scalars, loop counters, shape vectors) are
    counted in the evidence but do not make the finding. Without a GPU the copies are
    predicted from the placement and the report says so.

    ## Options
    - `max_bytes_per_step`: total bytes those copies move per step above which the
      finding fires (67108864, 64 MiB).
    - `max_copies_per_step`: host<->device copies per step, input batch excluded, above
      which the finding fires (16).
    - `min_copy_bytes`: copies with a known size below this are not counted (1024).
    - `max_copy_share`: in a capture, the share of the steps' time the copies take, not
      overlapped with kernels, above which the finding fires (0.30).
    """

    id = "placement.host-transfers"
    severity = "medium"
    status = "stable"
    # placement (the copies the traced graph implies: predicted), or a capture's
    # copies (measured: their time in the steps, pinned or pageable)
    needs_any = ("placement", "capture")
    options = {
        "max_bytes_per_step": 64 * 1024 * 1024,
        "max_copies_per_step": 16,
        "min_copy_bytes": 1024,
        "max_copy_share": 0.30,
    }
    question = "Why is it slow?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        predicted = self._predicted(facts, options) if facts.placement is not None else []
        capture = facts.capture
        if not capture_facts.decides(capture) or capture is None or not capture.devices:
            return predicted
        return self._measured(capture, predicted, options)

    def _measured(
        self, capture: CaptureFacts, predicted: list[Finding], options: dict[str, Any]
    ) -> list[Finding]:
        """The copies the GPU ran in the captured steps: their time not hidden behind a
        kernel, against the steps' time (XProf's threshold: 30 %); the prediction, where
        there is one, is said beside it and the measurement decides."""
        steps_s = capture.steps_s
        copies = [c for d in capture.devices for c in d.copies if c.direction != "device_to_device"]
        # the copies inside the steps while no kernel ran (their union, step by step)
        exposed = sum(s.exposed_copy_s for s in capture.steps)
        share = exposed / steps_s if steps_s > 0 else 0.0
        pageable = sum(c.pageable for c in copies)
        evidence: dict[str, Any] = {
            "measured_at": f"profiler capture {capture.path}",
            "copy_share_of_steps": round(share, 3),
            "steps_measured": len(capture.steps),
            "copies": {
                c.direction: f"{c.count} ({size_text(c.bytes)}, {c.time_s * 1e3:.2f} ms, "
                f"{c.pageable} pageable)"
                for c in copies
            },
        }
        if share < options["max_copy_share"]:
            measured = (
                f"the capture measured copies in only {share:.0%} of the captured steps' time"
            )
            return self.overruled(predicted, measured, evidence)
        if predicted:
            evidence["predicted"] = f"agrees: {predicted[0].title}"
        fix = [
            "# feed the step from tf.data with a prefetch: the next batch is copied while the",
            "# GPU computes on this one (copies overlapped, not exposed)",
            "ds = ds.prefetch(tf.data.AUTOTUNE)",
            "# keep tensors the step reuses on the GPU: create them once, not every step",
        ]
        if pageable:
            fix = [
                f"# {pageable} copies came from pageable host memory (staged by the driver, never",
                "# overlapped): tf.data's prefetch to the GPU copies from pinned buffers:",
                "ds = ds.apply(tf.data.experimental.prefetch_to_device('/GPU:0'))",
                *fix[3:],
            ]
        return [
            self.finding(
                f"Copies between host and GPU take {share:.0%} of the captured steps' time, "
                f"not hidden behind kernels (measured in {len(capture.steps)} steps"
                + (f"; {pageable} from pageable memory" if pageable else "")
                + ")",
                severity="high" if share >= 2 * options["max_copy_share"] else self.severity,
                evidence=evidence,
                fix="\n".join(fix),
                estimated_gain=f"up to {share:.0%} of step time, as copies overlap compute",
                gain_value=round(share, 4),
            )
        ]

    def _predicted(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        placement = facts.placement
        assert placement is not None  # in `needs`: never run without it
        step = [c for c in placement.copies if c.kind == "step"]
        sizeable = [c for c in step if c.sizeable(options["min_copy_bytes"])]
        owners = _owners(placement)
        folded = [c for c in sizeable if _owner(owners, c)]
        by_design = [
            c for c in sizeable if c.cause_reason in MEMORY_TYPE_REASONS and not _owner(owners, c)
        ]
        big = [
            c
            for c in sizeable
            if not _owner(owners, c) and c.cause_reason not in MEMORY_TYPE_REASONS
        ]
        total_bytes = known_bytes(big)
        design_bytes = known_bytes(by_design)
        looped = [c for c in big if c.in_loop]
        many = len(big) > options["max_copies_per_step"]
        # int32 edges TF keeps in host memory cost their bytes, not a finding per edge:
        # a few KiB of a metric's int32 math is no problem
        heavy = total_bytes + design_bytes > options["max_bytes_per_step"]
        if not (many or heavy or looped):
            return []
        if heavy:
            big = big + by_design
            total_bytes += design_bytes
            looped = [c for c in big if c.in_loop]
        big.sort(key=lambda c: (not c.in_loop, -(c.bytes or 0)))
        inputs = [c for c in placement.copies if c.kind == "input"]
        evidence: dict[str, Any] = {
            "copies_per_step": len(big),
            "bytes_per_step_known": total_bytes,
            "copies_of_unknown_size": sum(1 for c in big if c.bytes is None),
            "copies_inside_loops": len(looped),
            "small_copies_not_counted": len(step) - len(sizeable),
            "input_batch_copies": len(inputs),
            "largest": [_row(c) for c in big[:10]],
            **prediction_note(placement),
        }
        if folded:
            reported: dict[str, int] = {}
            for copy in folded:
                rule = _owner(owners, copy) or ""
                reported[rule] = reported.get(rule, 0) + 1
            evidence["copies_reported_with_their_cause"] = reported
        if by_design and not heavy:
            evidence["host_memory_by_design_not_counted"] = {
                "copies": len(by_design),
                "bytes_known": design_bytes,
                "why": HOST_MEMORY_NOTE,
            }
        size = f" ({size_text(total_bytes)} of known size)" if total_bytes else ""
        loop_note = f", {len(looped)} inside a loop (paid every iteration)" if looped else ""
        return [
            self.finding(
                f"Each call copies {len(big)} tensor{'s' if len(big) != 1 else ''} between host and GPU{size}{loop_note}",
                severity="high" if heavy or (looped and many) else self.severity,
                evidence=evidence,
                fix=_fix(big, placement),
                estimated_gain="each copy removed saves its PCIe transfer and a host<->GPU synchronisation",
                location=big[0].location if big else None,
            )
        ]


def _owner(owners: dict[tuple[str, str], str], copy: HostDeviceCopy) -> str | None:
    """The finding that names the op making ``copy``, if one does."""
    if copy.cause_op is None or copy.cause_reason is None:
        return None
    return owners.get((copy.cause_op, copy.cause_reason))


def _owners(placement: PlacementFacts) -> dict[tuple[str, str], str]:
    """(op, placement reason) of the ops another finding names -> that finding's id: the
    copies they make are its consequence, said there, not a second problem here."""
    owners: dict[tuple[str, str], str] = {}
    for group in reported_groups(placement):
        owners[(group.op, group.reason)] = "placement.no-gpu-kernel"
    for group in pinned_groups(placement):
        owners[(group.op, group.reason)] = "placement.forced-cpu"
    for group in placement.groups:
        if group.reason in ("no-gpu-kernel", "no-gpu-kernel-for-dtype") and is_codec(group.op):
            owners[(group.op, group.reason)] = "compression.cpu-codec"
    return owners


def _fix(copies: list[HostDeviceCopy], placement: PlacementFacts) -> str:
    """What to change for the ops that make these copies, by why each is on the host."""
    lines: list[str] = []
    seen: dict[tuple[str | None, str | None], HostDeviceCopy] = {}
    for copy in copies:
        seen.setdefault((copy.cause_op, copy.location), copy)
    for copy in list(seen.values())[:5]:
        where = f" at {copy.location}" if copy.location else ""
        lines.append(f"# {copy.cause or copy.cause_op}{where}: {_advice(copy)}")
    if any(c.cause_reason in MEMORY_TYPE_REASONS for c in copies):
        step = next((f.name for f in placement.functions), "<your step function>")
        what = "the Keras step" if is_keras_step(step) else step
        lines.append(f"# XLA compiles {what} into one GPU cluster: int32 work stays on the GPU")
        lines += jit_compile_fix(step)
    return "\n".join(lines)


def _advice(copy: HostDeviceCopy) -> str:
    reason = copy.cause_reason
    op = copy.cause_op or "the op"
    if reason in MEMORY_TYPE_REASONS:
        return f"TF's GPU kernel for {op} keeps its {copy.dtype} tensors in host memory"
    if reason == "host-by-design":
        return (
            f"{op} runs on the host by design: run it every N steps, outside the "
            "step function, not on every call"
        )
    if reason == "colocated":
        return f"{op} is on the CPU with the op or variable it is colocated with"
    if reason in ("captured", "input"):
        return "a value the function captures or takes in host memory: make it on the GPU"
    if reason in ("follows-input", "follows-consumer"):
        return f"{op} is placed with its neighbour on the CPU"
    return f"{op} runs on the CPU: replace it with TF ops that have GPU kernels"
