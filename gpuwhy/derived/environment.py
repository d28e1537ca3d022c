"""Whether TensorFlow can use a GPU: env.no-gpu's question, which the verdict asks too
(and distribute.cpu-starved-input, to leave a CPU-only run to env.no-gpu)."""

from __future__ import annotations

from gpuwhy.facts import EnvironmentFacts


def tf_can_use_gpu(env: EnvironmentFacts) -> bool:
    """True only when TF listed a GPU *and* a real op ran on it."""
    tf = env.tensorflow
    return bool(tf and tf.gpus and tf.confirm_device and "GPU" in tf.confirm_device.upper())
