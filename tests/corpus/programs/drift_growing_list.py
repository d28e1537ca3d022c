"""From its middle step on, this custom loop keeps every output in a Python list and sums
the last 128 eagerly after each step: the loop slows by 1.7-2x and memory grows."""
# expect: steps.drift medium|high -- +60-80% here: high from +50%, so the host's load moves it
# maybe: steps.drift high -- a second change point where the list's cost rose again (1 run in 3)
# expect: env.no-gpu high
# expect: host.memory-growth high
# expect: input.bound low|medium -- the Python call per step (a 0.4 ms step): low where other processes load the host
# expect: tensorcore.unused low

import tensorflow as tf

STEPS = 30000
dataset = tf.data.Dataset.from_tensor_slices(tf.random.uniform((256, 16), seed=0))
dataset = dataset.repeat().batch(8).prefetch(2)
w = tf.Variable(tf.random.uniform((16, 256), seed=1))


@tf.function
def step(x):
    return tf.nn.relu(tf.matmul(x, w))


outputs = []
for i, x in enumerate(dataset.take(STEPS)):
    out = step(x)
    if i >= STEPS // 2:
        outputs.append(out)
        total = tf.add_n(outputs[-128:])
print("done", float(tf.reduce_sum(total)))
