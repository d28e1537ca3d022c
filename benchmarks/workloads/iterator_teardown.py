"""Many short loops over one tf.data pipeline, each on a new iterator: how long each
iterator took to go away once its loop ended (its C++ teardown, on the program's
thread), the event behind whole runs that took nearly twice their time.

Prints ``TEARDOWN_S`` and ``LOOP_S``: every loop's teardown and its loop time, seconds,
space-separated. WORKLOAD_STEPS steps a loop (1000: about 0.4 s here), WORKLOAD_LOOPS
loops (150); WORKLOAD_PIPELINE=parallel: a shuffle, a parallel map and an autotuned
prefetch instead of a batch and a prefetch of two.
"""

import os
import time

import tensorflow as tf

steps = int(os.environ.get("WORKLOAD_STEPS", "1000"))
loops = int(os.environ.get("WORKLOAD_LOOPS", "150"))
ds = tf.data.Dataset.from_tensor_slices(tf.random.uniform((1024, 16), seed=0))
if os.environ.get("WORKLOAD_PIPELINE") == "parallel":
    # as image_dataset_from_directory builds it: a shuffle, a parallel map, an
    # autotuned prefetch (more of tf.data's threads and cancellation callbacks)
    ds = ds.shuffle(256, seed=0).repeat()
    ds = ds.map(lambda x: tf.tanh(x) * 2.0, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.batch(16).take(steps).prefetch(tf.data.AUTOTUNE)
else:
    ds = ds.repeat().batch(16).take(steps).prefetch(2)
w = tf.Variable(tf.random.uniform((16, 16), seed=1))


@tf.function
def train_step(x):
    w.assign_sub(0.0001 * tf.matmul(tf.transpose(x), tf.matmul(x, w)))
    return w


loop_s, teardown_s = [], []
for _ in range(loops):
    start = time.perf_counter()
    iterator = iter(ds)
    for x in iterator:
        train_step(x)
    ended = time.perf_counter()
    del iterator  # the last reference: TF's iterator is destroyed here, on this thread
    teardown_s.append(time.perf_counter() - ended)
    loop_s.append(ended - start)
print("TEARDOWN_S", " ".join(f"{s:.6f}" for s in teardown_s))
print("LOOP_S", " ".join(f"{s:.6f}" for s in loop_s))
