"""tensorcore.misaligned: fp16/bf16 matmul/conv dimensions are not multiples of 8."""

from __future__ import annotations

from typing import Any

from gpuwhy.facts import Facts, TensorOp
from gpuwhy.finding import Finding
from gpuwhy.rules.base import Rule
from gpuwhy.rules.tensorcore.common import SIXTEEN_BIT, shares

# A first convolution reads 1-4 image channels: normal, cheap, and not worth padding.
_IMAGE_CHANNELS = 4
_TILE = 8  # the smallest 16-bit tensor-core tile edge


def _misaligned_dims(op: TensorOp, multiple: int) -> dict[str, tuple[int, int]]:
    """dimension -> (size, padded size) for each known dimension off the multiple."""
    found = {}
    for name, size in op.dims.items():
        if size is None or name == "batch" or size % multiple == 0:
            continue
        if name == "in_channels" and size <= _IMAGE_CHANNELS:
            continue
        if name in ("m", "n", "k") and size < _TILE:
            continue  # a matrix-vector product: tensor cores do not apply either way
        found[name] = (size, -(-size // multiple) * multiple)
    return found


class TensorCoreMisaligned(Rule):
    """16-bit matmuls or convolutions have dimensions that are not multiples of 8.

    ## What it detects
    Float16 or bfloat16 matmuls and convolutions that carry at least `min_fraction` of
    the step's 16-bit FLOPs and have a dimension that is not a multiple of `multiple`:
    a matmul's M, N or K (batch x sequence, units, input features, vocabulary size) or
    a convolution's input or output channels. The finding lists each op with its shape,
    the layer that created it and the nearest aligned size. Ops in a step XLA compiles
    (`jit_compile=True`, or Keras' default on a GPU) are left out: XLA pads 16-bit matmuls
    and convolutions to tensor-core multiples itself.

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
    status = "stable"
    needs = ("placement",)
    options = {"min_fraction": 0.05, "multiple": 8}
    question = "Are tensor cores used?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        assert facts.placement is not None  # in `needs`: never run without it
        ops = [op for op in facts.placement.tensor_ops if op.dtype in SIXTEEN_BIT]
        multiple = options["multiple"]
        # XLA pads them itself on a GPU (its cublas-pad-for-gemms and cuDNN convolution
        # padding passes): the step still runs on tensor cores
        bad = [(op, _misaligned_dims(op, multiple)) for op in ops if not op.jit_compile]
        bad = [(op, dims) for op, dims in bad if dims]
        share = shares(ops, [op for op, _ in bad])
        if not bad or share < options["min_fraction"]:
            return []
        layers: dict[str, dict[str, Any]] = {}
        for op, dims in bad:
            key = op.layer or op.node
            entry = layers.setdefault(
                key,
                {"layer": key, "ops": 0, "dtype": op.dtype, "dims": {}, "location": op.location},
            )
            entry["ops"] += 1
            for name, (size, padded) in dims.items():
                entry["dims"][name] = f"{size} -> {padded}"
        rows = sorted(layers.values(), key=lambda r: -r["ops"])
        names = ", ".join(
            f"{r['layer']} ({', '.join(f'{k} {v}' for k, v in r['dims'].items())})"
            for r in rows[:3]
        )
        fix = "\n".join(
            [
                f"# pad to multiples of {multiple}: layer sizes (units, filters), vocabulary and batch size"
            ]
            + [
                f"#   {r['layer']}: {', '.join(f'{k} {v}' for k, v in r['dims'].items())}"
                for r in rows[:6]
            ]
            + [
                "keras.layers.Dense(3072)            # not 3001",
                "keras.layers.Embedding(50304, 1024)  # vocabulary padded, ids unchanged",
            ]
        )
        return [
            self.finding(
                f"{share:.0%} of the 16-bit matmul/conv work has sizes that are not multiples of {multiple}: {names}",
                evidence={
                    "misaligned_work_share": round(share, 3),
                    "sixteen_bit_ops": len(ops),
                    "misaligned_ops": len(bad),
                    "layers": rows,
                },
                fix=fix,
                estimated_gain="aligned sizes let cuBLAS/cuDNN pick their fastest tensor-core kernels",
                location=rows[0]["location"],
            )
        ]
