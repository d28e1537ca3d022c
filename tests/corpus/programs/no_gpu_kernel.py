"""A step that hashes string features inside the tf.function: string ops have no GPU
kernel, so on a GPU machine they run on the CPU and their results are copied over every
step."""
# expect: env.no-gpu high
# expect: placement.no-gpu-kernel medium
# maybe: input.bound low|medium -- the Python call per step against a step of a millisecond: the host's load decides
# expect: tensorcore.unused low
# maybe: input.iterator-end-wait medium|high -- a new tf.data iterator each epoch: TF's race at its end, lost mostly on a loaded host

import numpy as np
import tensorflow as tf

words = np.array([f"token{i % 97}" for i in range(4096)])
labels = (np.arange(4096) % 2).astype(np.float32)
dataset = tf.data.Dataset.from_tensor_slices((words, labels)).batch(64).prefetch(2)
embedding = tf.keras.layers.Embedding(1000, 16)
head = tf.keras.layers.Dense(1)
optimizer = tf.keras.optimizers.Adam()


@tf.function
def train_step(batch_words, batch_labels):
    ids = tf.strings.to_hash_bucket_fast(tf.strings.lower(batch_words), 1000)
    with tf.GradientTape() as tape:
        logits = tf.squeeze(head(embedding(ids)), -1)
        loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(batch_labels, logits))
    variables = embedding.trainable_variables + head.trainable_variables
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return loss


for epoch in range(3):
    for batch_words, batch_labels in dataset:
        loss = train_step(batch_words, batch_labels)
print(f"loss {float(loss):.4f}")
