"""A tf.data loop of very short tf.function steps (about 0.2 ms here; WORKLOAD_SIZE=288
WORKLOAD_BATCH=160: about 0.5 ms), the case where gpuwhy's per-step hooks weigh most;
prints the median step time and, for the loop as a whole, its wall and CPU time (the
main thread's, and the process's), and how long its end took (END_S: the iterator freed).
WORKLOAD_SETUP_S=N waits N seconds before the loop, as a program that loads its data
first does."""

import os
import statistics
import time

import tensorflow as tf

steps = int(os.environ.get("WORKLOAD_STEPS", "20000"))
size = int(os.environ.get("WORKLOAD_SIZE", "16"))
batch = int(os.environ.get("WORKLOAD_BATCH", "16"))
chunk = int(os.environ.get("WORKLOAD_CHUNK", "0"))
setup_s = float(os.environ.get("WORKLOAD_SETUP_S", "0"))
ds = tf.data.Dataset.from_tensor_slices(tf.random.uniform((1024, size), seed=0))
ds = ds.repeat().batch(batch).take(steps).prefetch(2)
w = tf.Variable(tf.random.uniform((size, size), seed=1))


@tf.function
def train_step(x):
    w.assign_sub(0.0001 * tf.matmul(tf.transpose(x), tf.matmul(x, w)))
    return w


time.sleep(setup_s)
times = []
start, cpu, main = time.perf_counter(), time.process_time(), time.thread_time()
last = start
for x in ds:
    train_step(x)
    now = time.perf_counter()
    times.append(now - last)
    last = now
# the loop's end: its iterator freed as the loop ran out (TensorFlow's race at an
# iterator's end can hold it for seconds, under python as under gpuwhy: docs/speed.md)
print(f"END_S {time.perf_counter() - last:.4f}")
print(f"MEDIAN_STEP_S {statistics.median(times[20:]):.9f}")
if chunk:  # WORKLOAD_CHUNK=N: each N steps' mean and median step (bench_loop_chunks.py)
    parts = [times[i : i + chunk] for i in range(0, len(times), chunk)]
    print("CHUNK_MEAN_S", *(f"{sum(p) / len(p):.9f}" for p in parts))
    print("CHUNK_MEDIAN_S", *(f"{statistics.median(p):.9f}" for p in parts))
print(
    f"LOOP_S {last - start:.4f} CPU_S {time.process_time() - cpu:.4f} "
    f"MAIN_CPU_S {time.thread_time() - main:.4f}"
)
