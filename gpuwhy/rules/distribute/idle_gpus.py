"""distribute.idle-gpus: several GPUs are visible but only one does work."""

from gpuwhy.rules.base import Rule


class IdleGpus(Rule):
    """Several GPUs are visible to TensorFlow but only one of them does any work.

    ## What it detects
    More than one GPU is visible to the process, no `tf.distribute` strategy spans
    them, and during steps every GPU but one stays below `idle_below` activity. The
    finding lists the GPUs with their activity and memory in use.

    ## Why is this slow?
    TensorFlow places ops on `/GPU:0` unless a strategy or `tf.device` says otherwise;
    it does not split a model or a batch across GPUs by itself. Yet it initialises
    every visible GPU and by default reserves most of its memory, so nvidia-smi shows
    all of them "in use" while only one computes. With `tf.distribute.MirroredStrategy`
    each GPU runs a replica on its share of the global batch and gradients are
    all-reduced (NCCL), so throughput scales with the GPU count as long as the input
    pipeline keeps up.

    ## Example
    ```python
    model = build_model()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.fit(ds.batch(128), epochs=10)       # 4 GPUs visible, only GPU:0 busy
    ```

    Use instead:
    ```python
    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():                    # variables mirrored on every GPU
        model = build_model()
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.fit(ds.batch(128 * strategy.num_replicas_in_sync), epochs=10)
    # or hide the unused GPUs from this job: CUDA_VISIBLE_DEVICES=0
    ```

    ## Options
    - `idle_below`: GPU activity during steps (0-1) below which a GPU counts as idle
      (0.05).
    """

    id = "distribute.idle-gpus"
    severity = "medium"
    status = "planned"
    needs = ("devices", "gpu_samples", "placement")
    options = {"idle_below": 0.05}
    question = "How do I use all GPUs?"
