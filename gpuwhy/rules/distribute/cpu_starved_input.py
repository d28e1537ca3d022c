"""distribute.cpu-starved-input: input-bound while every host core is busy."""

from gpuwhy.rules.base import Rule


class CpuStarvedInput(Rule):
    """The step waits for input while every host core is already busy preparing it.

    ## What it detects
    The step is input-bound (input wait at least `min_input_wait` of step time) and
    the host's CPU cores are at least `min_cpu_busy` busy during training, with the
    pipeline already parallel (`num_parallel_calls`, parallel reads). Tuning the
    pipeline cannot help: it has no idle cores left to use.

    ## Why is this slow?
    One GPU can consume preprocessed images or examples faster than a machine's cores
    can decode and augment them, and adding GPUs makes it worse. Once the cores are
    saturated, the GPU idles for the difference on every step. The remedies are doing
    less work per epoch (cache or preprocess offline, augment on the GPU inside the
    model) or using more CPUs: `tf.data.experimental.service` runs the pipeline on
    separate CPU machines and streams finished batches to the trainer.

    ## Example
    ```python
    ds = (tf.data.TFRecordDataset(files, num_parallel_reads=tf.data.AUTOTUNE)
          .map(decode_and_augment, num_parallel_calls=tf.data.AUTOTUNE)
          .batch(256).prefetch(tf.data.AUTOTUNE))
    model.fit(ds, epochs=90)      # 45% of each step waits; 32 of 32 cores at 100%
    ```

    Use instead:
    ```python
    # on CPU hosts: tf.data.experimental.service.DispatchServer(...) and WorkerServers
    ds = (tf.data.TFRecordDataset(files, num_parallel_reads=tf.data.AUTOTUNE)
          .map(decode_and_augment, num_parallel_calls=tf.data.AUTOTUNE)
          .batch(256)
          .apply(tf.data.experimental.service.distribute(
              processing_mode="parallel_epochs", service="grpc://dispatcher:5050"))
          .prefetch(tf.data.AUTOTUNE))
    model.fit(ds, epochs=90)
    ```

    ## Options
    - `min_cpu_busy`: average host CPU utilisation (0-1) during steps needed for the
      finding (0.90).
    - `min_input_wait`: input-wait fraction of step time needed for the finding (0.05).
    """

    id = "distribute.cpu-starved-input"
    severity = "high"
    status = "planned"
    needs = ("environment", "steps", "tfdata")
    options = {"min_cpu_busy": 0.90, "min_input_wait": 0.05}
    question = "How do I scale input?"
