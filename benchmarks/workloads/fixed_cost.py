"""bench_fixed_cost.py's workload: the wall clock at the first and the last line, around
TensorFlow's import and one op (what every program pays, whoever watches)."""

import time

print("FIRST", repr(time.time()), flush=True)

import tensorflow as tf  # noqa: E402 - timed from the first line

print(float(tf.reduce_sum(tf.ones([3]))))
print("LAST", repr(time.time()), flush=True)
