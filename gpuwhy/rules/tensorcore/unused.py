"""tensorcore.unused: float32 matmul/conv without TF32 or mixed precision on a tensor-core GPU."""

from __future__ import annotations

import os
from typing import Any

from gpuwhy.derived import capture as capture_facts
from gpuwhy.facts import CaptureFacts, Facts, FloatIndex, TensorOp
from gpuwhy.finding import Finding
from gpuwhy.fixes.dataset_calls import with_keywords
from gpuwhy.fixes.op_groups import prediction_note
from gpuwhy.fixes.pipeline_code import IN_PLACE_OF
from gpuwhy.formatting import duration
from gpuwhy.rules.base import Rule
from gpuwhy.rules.tensorcore.common import shares, target_gpu
from gpuwhy.source_calls import output_layers

# a step's float32 matmul/conv work under this many FLOPs: microseconds of a GPU at any
# precision (kernel launches and the input decide its time), little to gain
SMALL_STEP_FLOPS = 1e9
_FIX_MIXED = "\n".join(
    [
        "keras.mixed_precision.set_global_policy('mixed_float16')   # before building the model",
        "# ('mixed_bfloat16' on compute capability 8.0+: no loss scaling needed)",
        "# keep each model's last layer in float32: dtype='float32' in its call",
        "# custom loops: mixed_float16 needs the loss scaled in the step (see explain)",
    ]
)


FLOAT32 = "'float32'"  # the dtype the outputs keep, as the fix and its trial write it


def _float32_outputs(script: str | None, keras: str) -> str:
    """Each model's last layer, as the script writes it, with ``dtype='float32'``: its
    output (a softmax, the loss's input) stays float32 under the policy. Where the script
    cannot be read or builds no model it can see, what to write, said in general."""
    layers = output_layers(script, f"dtype={FLOAT32}") if script else ()
    if not script or not layers:
        # "..." for its arguments, no name: "Dense(units, ...)" read as the program's own
        # `units` where a subclassed model's attention layer had one, its output layer
        # being Dense(vocab_size)
        return (
            "# keep each model's last layer in float32: dtype='float32' in its call "
            f"({keras}.layers.Dense(..., dtype='float32'))"
        )
    name = os.path.basename(script)
    lines = ["# keep each model's last layer in float32 (its output feeds the loss):"]
    for line, written, typed in layers:
        lines += [f"# {name}:{line}: {IN_PLACE_OF}{written}", typed]
    return "\n".join(lines)


def mixed_precision_fix(facts: Facts, capability: tuple[int, int] | None) -> str:
    """Keras' mixed precision, written as the program names Keras, for how it trains.

    ``fit`` scales the loss itself under ``mixed_float16``. A custom loop does not: a
    ``LossScaleOptimizer`` whose loss is not scaled in the step (Keras 3's
    ``optimizer.scale_loss``; tf.keras 2's ``get_scaled_loss`` and
    ``get_unscaled_gradients``) divides every update by the loss scale (32,768 at the
    start) and trains nothing, without an error. So a custom loop gets ``mixed_bfloat16``
    (no loss scaling: the loop stays as written) where the GPU has bfloat16 tensor cores
    (8.0+, or not known), and float16 with the scaling spelled out where it has not."""
    program = facts.program
    keras = (program.keras_name if program else None) or "keras"
    loops = facts.steps.loops if facts.steps is not None else ()
    custom = bool(loops) and not any(loop.source == "keras-fit" for loop in loops)
    last = _float32_outputs(program.command[0] if program and program.command else None, keras)
    setter = f"{keras}.mixed_precision.set_global_policy"
    if not custom:
        return "\n".join(
            [
                f"{setter}('mixed_float16')   # before building the model",
                "# ('mixed_bfloat16' on compute capability 8.0+: no loss scaling needed)",
                last,
            ]
        )
    version = program.keras_version if program else None
    keras3 = version is None or not version.startswith(("2.", "1."))
    scaled = (
        [
            f"optimizer = {keras}.optimizers.LossScaleOptimizer(optimizer)",
            "# in the step: grads = tape.gradient(optimizer.scale_loss(loss), variables)",
        ]
        if keras3
        else [
            f"optimizer = {keras}.mixed_precision.LossScaleOptimizer(optimizer)",
            "# in the step: grads = optimizer.get_unscaled_gradients(",
            "#     tape.gradient(optimizer.get_scaled_loss(loss), variables))",
        ]
    )
    unscaled = "# (a LossScaleOptimizer whose loss is not scaled shrinks every update by the scale)"
    if capability is not None and capability < (8, 0):
        return "\n".join(
            [
                f"{setter}('mixed_float16')   # before building the model",
                last,
                "# a custom loop scales the loss itself (float16 gradients underflow without):",
                *scaled,
                unscaled,
            ]
        )
    return "\n".join(
        [
            f"{setter}('mixed_bfloat16')   # before building the model",
            "# bfloat16 (compute capability 8.0+) needs no loss scaling: the loop stays as written",
            last,
            "# on 7.x (V100, T4) 'mixed_float16', and the loss scaled in the step:",
            *(f"#   {line.removeprefix('# ')}" for line in scaled),
            unscaled,
        ]
    )


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

    The largest ops named come from the training step (the functions with a backward
    pass), not from a `predict()` run after training. Keras traces `fit` with an
    unknown batch dimension: their FLOPs use the batch size the run delivered (the
    batch stage of the pipeline the steps read, as TF's own model measured it), and
    the evidence says so (`flops_batch`).

    With a profiler capture of a GPU (`gpuwhy report CAPTURE`, `gpuwhy run --capture N`)
    the kernels actually run decide: the convolution and matmul kernels' time on no
    tensor core (their names say so: `xmma`/`wgmma`/`hmma`/`imma` kernels use them,
    `sgemm`/`wgrad_alg0` do not) is at least `min_fraction` of those kernels' time.
    Where the graph predicted otherwise the finding says both and trusts the capture
    (an info finding where only the prediction fired).

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

    A custom training loop (a `GradientTape` step) gets `mixed_bfloat16` where the GPU
    has bfloat16 tensor cores (8.0+, or not known): it needs no loss scaling, so the
    loop stays as written. Under `mixed_float16` the loop must scale the loss itself,
    or small gradients underflow to zero:
    ```python
    optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(optimizer.scale_loss(loss), model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))  # unscales them
    ```
    A `LossScaleOptimizer` whose loss is not scaled divides every update by the loss
    scale (32,768 at first) and the model trains nothing, with no error (tf.keras 2:
    `get_scaled_loss` and `get_unscaled_gradients` instead of `scale_loss`). The fix is
    written with the name the script gives Keras (`keras`, `tf.keras`).

    Token ids that arrive through a float `keras.Input` (Keras' default dtype) are
    named first: under `mixed_float16` a layer that autocasts (a custom embedding layer,
    keras-io's `TokenAndPositionEmbedding`) casts them to float16, exact for integers up
    to 2048 only (bfloat16: 256), so embeddings come out wrong or an id rounded past the
    table fails the lookup. The step's graph shows it (a float input cast to the indices
    of a gather or one-hot); the fix makes that Input `dtype="int32"` by the name the
    script gives it, and offers mixed precision only with that line.

    On Ampere and newer with TF32 on, float32 matmuls already use tensor cores as TF32:
    the finding is then only `low`, pointing out that 16-bit mixed precision is about
    twice as fast again (its expected gain says so, not the 2-8x of plain float32). Without a GPU on the machine the GPU generation is unknown and
    the finding says what happens on each.

    A step whose float32 matmul/conv work is under 1 GFLOP (a small dense or conv net
    at a small batch) is `low` and says how little there is to gain: such kernels take
    microseconds on any GPU, and the step waits on their launches and its input.

    ## Options
    - `min_fraction`: share of the step's matmul/convolution FLOPs in float32 without
      tensor cores needed for the finding (0.10).
    """

    id = "tensorcore.unused"
    severity = "medium"
    status = "stable"
    # placement (the traced graph: a prediction), or a capture's kernels (measured)
    needs_any = ("placement", "capture")
    options = {"min_fraction": 0.10}
    question = "Are tensor cores used?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        predicted = self._predicted(facts, options) if facts.placement is not None else []
        capture = facts.capture
        if capture is None or not any(d.matmul_s > 0 for d in capture.devices):
            return predicted
        return self._measured(capture, predicted, options)

    def _measured(
        self, capture: CaptureFacts, predicted: list[Finding], options: dict[str, Any]
    ) -> list[Finding]:
        """The convolution and matmul kernels the GPU ran, by their names: the capture
        measures what the graph predicts, and where the two disagree it is trusted."""
        off, total, names = capture_facts.matmul_off_tensor_cores(capture)
        share = off / total if total > 0 else 0.0
        used = sorted(
            {k.tensor_core for d in capture.devices for k in d.top_kernels if k.tensor_core}
        )
        evidence: dict[str, Any] = {
            "measured_at": f"profiler capture {capture.path}",
            "matmul_conv_kernel_ms": round(total * 1e3, 3),
            "off_tensor_cores_share": round(share, 3),
            "tensor_core_precisions": ", ".join(used) or None,
            "kernels_off_tensor_cores": names[:5],
        }
        if share < options["min_fraction"]:
            measured = (
                f"the capture measured {1 - share:.0%} of the convolution/matmul kernel time "
                f"on tensor cores ({', '.join(used) or 'by their names'})"
            )
            return self.overruled(predicted, measured, evidence)
        if predicted:
            evidence["predicted"] = f"agrees: {predicted[0].title}"
        title = (
            f"{share:.0%} of the convolution/matmul kernel time ran on no tensor core "
            f"(measured: {duration(off)} of {duration(total)} in "
            f"{len(capture.steps) or 'the'} captured steps)"
        )
        sixteen = {"bf16", "fp16", "fp8", "int8"} & set(used)
        if used:
            # the others run on tensor cores: these are shapes cuDNN/cuBLAS gave other
            # kernels (few channels, odd sizes), not a precision the program turned off
            title += (
                f"; the rest runs on tensor cores ({', '.join(used)}): cuDNN chose other "
                "kernels for these shapes (few channels, odd sizes)"
            )
        if sixteen:
            fix = None  # 16-bit tensor cores already run: nothing to switch on
        elif capture.producer == "jax":
            fix = (
                "jax.config.update('jax_default_matmul_precision', 'tensorfloat32')  # 8.0+\n"
                if not used
                else ""
            ) + _FIX_MIXED
        else:
            fix = (
                "tf.config.experimental.enable_tensor_float_32_execution(True)  # the default\n"
                if not used
                else ""
            ) + _FIX_MIXED
        return [
            self.finding(
                title,
                severity="low" if used else self.severity,
                evidence=evidence,
                fix=fix,
                estimated_gain=(
                    "up to 2x on those kernels with 16-bit tensor cores"
                    if used
                    else "up to 2-8x on those kernels, by GPU generation"
                ),
                gain_value=round(off / max(capture.steps_s, 1e-9), 4),
            )
        ]

    def _predicted(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        placement = facts.placement
        assert placement is not None
        ops = list(placement.tensor_ops)
        float32 = [op for op in ops if op.dtype == "float32"]
        share = shares(ops, float32)
        if not float32 or share < options["min_fraction"]:
            return []
        capability, gpu = target_gpu(facts)
        tf32 = placement.tf32_enabled is not False
        if capability is not None and capability < (7, 0):
            return []  # no tensor cores: nothing to gain here
        if capability is not None and capability >= (8, 0) and tf32:
            severity = "low"
            title = (
                f"{share:.0%} of the matmul/conv work is float32: it uses TF32 tensor cores on "
                f"{gpu or 'this GPU'}; mixed precision would use them at 16 bits, about 2x faster"
            )
        elif capability is not None:
            severity = self.severity
            why = (
                "TF32 is turned off"
                if capability >= (8, 0)
                else f"compute capability {capability[0]}.{capability[1]} has no TF32"
            )
            title = (
                f"{share:.0%} of the matmul/conv work runs in plain float32 on {gpu or 'the GPU'} "
                f"({why}): tensor cores sit idle"
            )
        elif not tf32:
            severity = self.severity
            title = f"{share:.0%} of the matmul/conv work runs in float32 with TF32 turned off: tensor cores sit idle"
        else:
            severity = "low"
            title = (
                f"{share:.0%} of the matmul/conv work is float32: no tensor cores on V100/T4 (7.x), "
                "TF32 on A100/H100 (8.0+); mixed precision uses them at 16 bits on all"
            )
        step = training_ops(float32)
        biggest = _largest(step)
        evidence: dict[str, Any] = {
            "float32_work_share": round(share, 3),
            "float32_ops": len(float32),
            "tensor_ops": len(ops),
            "tf32_enabled": placement.tf32_enabled,
            "mixed_precision_policy": placement.mixed_precision_policy,
            "gpu": gpu,
            "compute_capability": f"{capability[0]}.{capability[1]}" if capability else None,
            **_where_from(step, biggest),
            "largest": [
                {
                    "op": op.op,
                    "node": op.node,
                    "layer": op.layer,
                    "dims": op.dims,
                    "gflops": round(op.flops / 1e9, 3) if op.flops else None,
                    "location": op.location,
                }
                for op in biggest
            ],
            **prediction_note(placement),
        }
        if placement.float_indices:
            evidence["float_token_ids"] = [
                f"{i.op} ({i.location or i.node}) reads ids that arrive as {i.dtype}"
                + (
                    f" through {i.input_name or 'the Input'} ({i.input_location})"
                    if i.input_location
                    else ""
                )
                for i in placement.float_indices
            ]
        fix = _mixed_fix(placement.float_indices, mixed_precision_fix(facts, capability))
        if not tf32:
            fix = (
                "tf.config.experimental.enable_tensor_float_32_execution(True)   # the default\n"
                + fix
            )
        if not facts.devices and not placement.compute_capability:  # no GPU here
            fix = CPU_ONLY_NOTE + fix
        gain = (
            "about 2x on matmul/conv time (16-bit tensor cores over TF32)"
            if capability is not None and capability >= (8, 0) and tf32
            else "up to 2-8x on matmul/conv time, by GPU generation"
        )
        work = step_flops(step)
        if work is not None and work < SMALL_STEP_FLOPS:
            severity = "low"
            evidence["step_float32_mflop"] = round(work / 1e6, 3)
            gain = (
                f"little: the step's float32 matmul/conv work is {work / 1e6:,.1f} MFLOP, "
                "microseconds of a GPU at any precision (a model this small waits on kernel "
                "launches and its input, not on math)"
            )
        return [
            self.finding(
                title,
                severity=severity,
                evidence=evidence,
                fix=fix,
                estimated_gain=gain,
                location=biggest[0].location if biggest else None,
            )
        ]


# mixed precision pasted into a CPU-only run made a text model's step 28 ms -> 139 ms here
CPU_ONLY_NOTE = (
    "# for the GPU machine: no GPU here, and on a CPU mixed precision runs several times\n"
    "# slower (16-bit math without tensor cores): measure it where the GPU is\n"
)


def _mixed_fix(indices: tuple[FloatIndex, ...], mixed: str) -> str:
    """Mixed precision, with the float Input that carries token ids made int32 first:
    under mixed_float16 Keras casts a layer's float inputs to float16, exact for
    integers up to 2048 only (bfloat16: 256), and the embedding then reads wrong rows or
    fails on an id rounded past its table. Without that Input named, mixed precision is
    not offered: the one thing to paste first is the Input's dtype."""
    if not indices:
        return mixed
    first = indices[0]
    where = ", ".join(sorted({i.location or i.node for i in indices}))
    why = [
        f"# token ids reach {first.op} ({where}) as {first.dtype}: mixed precision would cast",
        "# them to 16 bits first (float16 is exact up to 2048, bfloat16 up to 256): wrong",
        "# embeddings, or an id rounded past the table. Make that Input int32 first:",
    ]
    inputs = {(i.input_location, i.input_name, i.input_written) for i in indices}
    (location, name, written), *others = inputs
    if others or location is None or written is None:
        return "\n".join(
            [
                *why,
                '# the keras.Input(...) the ids come through: dtype="int32", then mixed precision',
            ]
        )
    new = with_keywords(written, dtype='"int32"').replace("dtype='int32'", 'dtype="int32"')
    old, new = (f"{name} = {written}", f"{name} = {new}") if name else (written, new)
    return "\n".join([*why, f"# {location}: in place of: {old}", new, mixed])


def _largest(ops: list[TensorOp], shown: int = 5) -> list[TensorOp]:
    """The ``shown`` largest ops, each layer's op of one kind and size once: a function
    traced twice (Keras' step retraced for a last, smaller batch, or for validation)
    has every op twice, and the list named one Conv2D twice."""
    out: list[TensorOp] = []
    seen: set[tuple] = set()
    for op in sorted(ops, key=lambda op: -(op.flops or 0)):
        key = _once(op)
        if key in seen:
            continue
        seen.add(key)
        out.append(op)
        if len(out) == shown:
            break
    return out


def _once(op: TensorOp) -> tuple:
    """What an op of two traces of one function shares: its node and its sizes (a layer
    called twice makes two nodes)."""
    return (op.node, op.dtype, tuple(sorted(op.dims.items())))


def step_flops(step: list[TensorOp]) -> float | None:
    """The float32 matmul/conv FLOPs of one call of the step (each op times the runs of
    the loops around it, an op of two traces of the step once); None where an op's size
    or runs are not known."""
    if not step or any(op.flops is None or op.runs is None for op in step):
        return None
    ops = {_once(op): op for op in step}.values()
    return float(sum((op.flops or 0) * (op.runs or 1) for op in ops))


def training_ops(ops: list[TensorOp]) -> list[TensorOp]:
    """The ops of the functions that train (those with a backward pass), where any do:
    a one-image ``predict()`` after training is not where the time goes."""
    training = {op.function for op in ops if op.gradient}
    return [op for op in ops if op.function in training] if training else ops


def _where_from(step: list[TensorOp], biggest: list[TensorOp]) -> dict[str, Any]:
    """Which function the figures come from, and the batch size behind them."""
    found: dict[str, Any] = {}
    functions = sorted({op.function for op in biggest if op.function})
    if functions:
        kind = "the training step" if any(op.gradient for op in step) else "no training step seen"
        xla = ", XLA-compiled" if any(op.jit_compile for op in biggest) else ""
        found["largest_from"] = f"{', '.join(functions)} ({kind}{xla})"
    batches = sorted({op.flops_batch for op in biggest if op.flops_batch})
    if batches:
        found["flops_batch"] = (
            f"{', '.join(map(str, batches))}: the batch size the run delivered, for the "
            "batch dimension the trace left unknown"
        )
    return found
