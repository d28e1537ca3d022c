"""A loop of small eager ops (seed 001, example 3); prints the median step time."""

import statistics
import time

import tensorflow as tf

a = tf.random.uniform((16, 16))
b = tf.random.uniform((16, 16))
times = []
for step in range(300):
    start = time.perf_counter()
    h = a
    for _ in range(50):  # 150 small eager ops per step
        h = tf.nn.relu(tf.matmul(h, b)) * 0.01
    times.append(time.perf_counter() - start)
print(f"MEDIAN_STEP_S {statistics.median(times[20:]):.9f}")
