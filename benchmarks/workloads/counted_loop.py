"""tiny_steps.py's loop with callgrind's client requests around windows of its steps
(bench_instructions.py runs it under valgrind): for each window FROM:TO in
WORKLOAD_WINDOWS, instrumentation is switched on and the program's thread's counters
zeroed after step FROM, and its counters dumped (labelled FROM:TO) after step TO.
WORKLOAD_REQUESTS names the shared library that makes the requests (built by the
benchmark from valgrind's callgrind.h); outside valgrind they do nothing."""

import ctypes
import os

import tensorflow as tf

requests = ctypes.CDLL(os.environ["WORKLOAD_REQUESTS"])
windows = [
    tuple(int(n) for n in window.split(":"))
    for window in os.environ.get("WORKLOAD_WINDOWS", "300:1300").split(",")
]
starts = {first for first, _ in windows}
ends = {last: f"{first}:{last}".encode() for first, last in windows}
size = int(os.environ.get("WORKLOAD_SIZE", "16"))
batch = int(os.environ.get("WORKLOAD_BATCH", "16"))
ds = tf.data.Dataset.from_tensor_slices(tf.random.uniform((1024, size), seed=0))
ds = ds.repeat().batch(batch).take(max(ends) + 20).prefetch(2)
w = tf.Variable(tf.random.uniform((size, size), seed=1))


@tf.function
def train_step(x):
    w.assign_sub(0.0001 * tf.matmul(tf.transpose(x), tf.matmul(x, w)))
    return w


step = 0
for x in ds:
    train_step(x)
    step += 1
    if step in starts:
        requests.window_start()
    elif step in ends:
        requests.window_end(ends[step])
print("STEPS", step)
