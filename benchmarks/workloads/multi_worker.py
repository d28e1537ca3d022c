"""One worker of a MultiWorkerMirroredStrategy cluster (TF_CONFIG from the environment):
a custom loop over a dataset function sharded by its input context; prints the median
step time."""

import os
import statistics
import time

import numpy as np
import tensorflow as tf

strategy = tf.distribute.MultiWorkerMirroredStrategy()
GLOBAL_BATCH = 128 * strategy.num_replicas_in_sync
x = np.random.rand(16384, 64).astype("float32")
y = np.random.randint(0, 10, 16384)


def dataset_fn(input_context):
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return ds.batch(input_context.get_per_replica_batch_size(GLOBAL_BATCH)).prefetch(2)


dist_ds = strategy.distribute_datasets_from_function(dataset_fn)
with strategy.scope():
    model = tf.keras.Sequential(
        [
            tf.keras.Input((64,)),
            tf.keras.layers.Dense(512, activation="relu"),
            tf.keras.layers.Dense(512, activation="relu"),
            tf.keras.layers.Dense(10),
        ]
    )
    opt = tf.keras.optimizers.SGD(0.01)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")


@tf.function
def train_step(xb, yb):
    def step(xr, yr):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(
                loss_fn(yr, model(xr, training=True)), global_batch_size=GLOBAL_BATCH
            )
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return strategy.run(step, args=(xb, yb))


times = []
for epoch in range(int(os.environ.get("WORKLOAD_EPOCHS", "3"))):
    last = time.perf_counter()
    for xb, yb in dist_ds:
        train_step(xb, yb)
        now = time.perf_counter()
        times.append(now - last)
        last = now
print(f"MEDIAN_STEP_S {statistics.median(times[20:]):.9f}")
