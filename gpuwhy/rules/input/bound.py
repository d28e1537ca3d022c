"""input.bound: the training step waits for the input pipeline."""

from gpuwhy.rules.base import Rule


class InputBound(Rule):
    """The step waits for its next batch: the GPU idles while tf.data prepares input.

    ## What it detects
    The fraction of each training step spent waiting in the iterator's `get_next`
    (Keras `fit` and custom loops alike) is at least `medium_at` (medium) or `high_at`
    (high). The finding names the slowest stage of the pipeline that TensorFlow actually
    runs, with its own time and the file:line of the function it calls.

    ## Why is this slow?
    A GPU step can only start once its batch is on the device. When producing a batch
    takes longer than computing on it, the GPU is idle for the difference on every step,
    however fast the GPU is: `nvidia-smi` shows low utilisation and a bigger GPU does
    not help.

    ## Example
    ```python
    ds = tf.data.TFRecordDataset(files).map(parse).batch(64)
    model.fit(ds, epochs=10)          # 40% of every step waits for `parse`
    ```

    Use instead:
    ```python
    ds = (tf.data.TFRecordDataset(files, num_parallel_reads=tf.data.AUTOTUNE)
          .map(parse, num_parallel_calls=tf.data.AUTOTUNE)
          .batch(64)
          .prefetch(tf.data.AUTOTUNE))
    ```

    ## Options
    - `medium_at`: input-wait fraction of step time that makes the finding medium (0.05,
      XProf's threshold).
    - `high_at`: input-wait fraction that makes it high (0.20).
    """

    id = "input.bound"
    severity = "high"
    status = "planned"
    needs = ("steps", "tfdata")
    options = {"medium_at": 0.05, "high_at": 0.20}
    question = "Why is the GPU idle?"
