"""The configurations fit_matrix.py trains, named by the tests that read its lines."""

from __future__ import annotations

# (policy, optimizer, steps_per_execution, model, jit_compile). Models: "dense" (Dense
# and BatchNormalization layers), "pinned" (one layer's op pinned to the CPU: a real
# copy each way), "embedding" (an Embedding: a sparse gradient). jit_compile False: the
# step placed op by op, as TF does on a GPU without XLA; "auto": Keras' default, which
# XLA-compiles the step on a GPU machine; True: XLA everywhere.
FIT_CONFIGS = [
    ("mixed_float16", "adam", 1, "dense", False),
    ("mixed_float16", "adam", 4, "dense", False),
    ("mixed_float16", "sgd-momentum", 1, "dense", False),
    ("mixed_float16", "adamw", 3, "dense", False),
    ("mixed_float16", "rmsprop", 1, "dense", False),
    ("mixed_bfloat16", "adam", 1, "dense", False),
    ("float32", "adam", 1, "dense", False),
    ("mixed_float16", "adam", 1, "dense", "auto"),
    ("mixed_float16", "adam", 1, "pinned", False),
    ("mixed_float16", "adam", 1, "embedding", False),
    ("mixed_float16", "adam", 1, "embedding", True),
    ("mixed_float16", "adam", 1, "embedding", "auto"),
    ("mixed_bfloat16", "adam", 1, "embedding", False),
]
LOOP_POLICIES = ("mixed_float16", "float32")


def fit_name(policy: str, optimizer: str, spe: int, model: str, jit: bool | str) -> str:
    return f"fit:{policy}:{optimizer}:{spe}:{model}:jit={jit}"
