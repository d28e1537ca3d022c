"""The configurations fit_matrix.py trains, named by the tests that read its lines."""

# (policy, optimizer, steps_per_execution, a layer pinned to the CPU); jit_compile off:
# the step is placed op by op, as TF does on a GPU machine without XLA.
FIT_CONFIGS = [
    ("mixed_float16", "adam", 1, False),
    ("mixed_float16", "adam", 4, False),
    ("mixed_float16", "sgd-momentum", 1, False),
    ("mixed_float16", "adamw", 3, False),
    ("mixed_float16", "rmsprop", 1, False),
    ("mixed_bfloat16", "adam", 1, False),
    ("float32", "adam", 1, False),
    ("mixed_float16", "adam", 1, True),
]
LOOP_POLICIES = ("mixed_float16", "float32")
