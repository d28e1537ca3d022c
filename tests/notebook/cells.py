"""The cells the notebook tests run, shared by the in-process shell and the kernel: a
planted input-bound pipeline (a sequential ``tf.py_function`` that sleeps) defined in one
cell and read in another, and an eager ``GradientTape`` loop (many small ops a step)."""

PIPELINE = """\
import time
import tensorflow as tf

def slow_read(x):
    time.sleep(0.01)
    return x

dataset = tf.data.Dataset.range(40).map(lambda x: tf.py_function(slow_read, [x], tf.int64)).batch(2)
"""

# read in its own cell, under the magic: prints, and ends with a value (the cell's Out)
WATCHED_PIPELINE = """\
%%gpuwhy -r rec --hz 5
total = 0
for batch in dataset:
    total += int(tf.reduce_sum(batch))
print("total", total)
total
"""
TOTAL = sum(range(40))

EAGER_SETUP = """\
weights = [tf.Variable(tf.random.normal((8, 8)) * 0.1) for _ in range(16)]  # >100 ops a step
features = tf.data.Dataset.from_tensor_slices(tf.random.normal((192, 8))).batch(8)
"""

WATCHED_EAGER = """\
%%gpuwhy -r eager_rec --eager-duty 1 --no-audit --text
for x in features:
    with tf.GradientTape() as tape:
        h = x
        for w in weights:
            h = tf.nn.relu(h @ w)
        loss = tf.reduce_mean(h * h)
    grads = tape.gradient(loss, weights)
    for w, g in zip(weights, grads):
        w.assign_sub(0.01 * g)
"""

# interrupted half-way, as Ctrl-C (the kernel's interrupt) would
INTERRUPTED = """\
%%gpuwhy -r stopped --text
seen = 0
for batch in dataset:
    seen += 1
    if seen == 10:
        raise KeyboardInterrupt
"""
