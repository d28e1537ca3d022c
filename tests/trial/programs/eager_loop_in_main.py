"""An eager custom loop written inside main(): a tf.data loop whose body sums the loss
with .numpy() and counts correct predictions with int(), per step. main() is not the
step (it runs the whole training); the tape, the gradients and apply_gradients are."""

import numpy as np
import tensorflow as tf


def main():
    x = np.random.rand(1024, 16).astype(np.float32)
    y = np.random.randint(0, 3, size=1024)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1024).batch(32)
    model = tf.keras.Sequential(
        [
            tf.keras.Input((16,)),
            tf.keras.layers.Dense(32, activation="relu"),
            tf.keras.layers.Dense(3),
        ]
    )
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = tf.keras.optimizers.Adam(1e-3)
    history = []
    for epoch in range(5):
        epoch_loss = 0.0
        correct = 0
        for step, (xb, yb) in enumerate(dataset):
            with tf.GradientTape() as tape:
                logits = model(xb, training=True)
                loss = loss_fn(yb, logits)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            epoch_loss += loss.numpy()
            correct += int(tf.reduce_sum(tf.cast(tf.argmax(logits, 1) == yb, tf.int32)))
        history.append(epoch_loss / (step + 1))
        print(f"epoch {epoch}: loss {history[-1]:.4f} acc {correct / 1024:.3f}")


if __name__ == "__main__":
    main()
