"""placement.forced-cpu: an explicit tf.device('/CPU:0') pins ops that could run on the GPU."""

from __future__ import annotations

from typing import Any

from gpuwhy.facts import Facts, PlacementFacts
from gpuwhy.finding import Finding
from gpuwhy.fixes.op_groups import group_row, op_list, prediction_note
from gpuwhy.rules.base import Rule
from gpuwhy.rules.placement.common import (
    HEAVY_BYTES_PER_STEP,
    copies_evidence,
    copies_made_by,
    known_bytes,
    nameable_groups,
)


def pinned_groups(placement: PlacementFacts, ignored: set[str] | frozenset[str] = frozenset()):
    """The op groups this finding names (placement.host-transfers leaves the copies
    they make to it)."""
    return [
        g
        for g in nameable_groups(placement, ("forced-cpu",), ignored)
        if not g.by_library  # a library's own tf.device: nothing to remove in yours
    ]


class ForcedCpu(Rule):
    """An explicit `tf.device("/CPU:0")` pins ops to the CPU although they have GPU kernels.

    ## What it detects
    Ops in the step that run on the CPU only because the program asked for it: they sit
    under a `with tf.device("/CPU:0"):` block (or a `/job:.../device:CPU` string) and
    TensorFlow registers a GPU kernel for their dtypes. Ops a library creates under its
    own `tf.device` (Keras' TextVectorization and lookup layers pin their tables and
    string work to the CPU) are left out: there is no block in the user's code to
    remove. Variables created under such a
    block count too: the ops that take the variable itself (reads, optimizer updates)
    follow it to the CPU. The finding names the ops and the file:line of the block, and
    counts the host<->GPU copies they make (high above 64 MiB a step).

    ## Why is this slow?
    TensorFlow honours an explicit device request whenever a kernel exists for it, so
    the op runs on host cores that are far slower than the GPU for dense math. The
    tensors it reads are copied device-to-host and its results host-to-device over PCIe
    on every step, and the GPU idles while it waits for them. A model built under a CPU
    scope copies every weight to the GPU and every gradient back on each step.

    ## Example
    ```python
    @tf.function
    def train_step(images, labels):
        with tf.device("/CPU:0"):                     # "to save GPU memory"
            images = tf.image.resize(images, (224, 224))
            images = tf.image.per_image_standardization(images)
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        ...
    ```

    Use instead:
    ```python
    def preprocess(images, labels):   # in tf.data: CPU work that overlaps the step
        images = tf.image.resize(images, (224, 224))
        return tf.image.per_image_standardization(images), labels

    ds = ds.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
    # or simply drop the tf.device block and let the ops run on the GPU
    ```

    ## Options
    - `ignore_ops`: op types never reported, e.g. `["ResourceGather"]` for an
      embedding table kept on the host on purpose (`[]`).
    """

    id = "placement.forced-cpu"
    severity = "medium"
    status = "stable"
    needs = ("placement",)
    options = {"ignore_ops": []}
    question = "Why are ops on the CPU?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        placement = facts.placement
        assert placement is not None  # in `needs`: never run without it
        pinned = pinned_groups(placement, set(options["ignore_ops"]))
        if not pinned:
            return []
        pinned.sort(key=lambda g: (-g.count, g.op))
        total = sum(g.count for g in pinned)
        copies = copies_made_by(placement, pinned)
        copied = known_bytes(copies)
        sites = list(dict.fromkeys(loc for g in pinned for loc in g.locations))
        evidence: dict[str, Any] = {
            "ops_pinned": total,
            "ops": [group_row(g) for g in pinned],
            **prediction_note(placement),
        }
        if sites:
            evidence["tf_device_sites"] = sites
        evidence.update(copies_evidence(copies))
        fix = [
            f"# {site}: remove the `with tf.device('/CPU:0'):` block around these ops"
            for site in sites[:5]
        ]
        if not sites:
            fix = [
                "# remove the `with tf.device('/CPU:0'):` block around these ops (see `ops` above)"
            ]
        fix += [
            "# or, if the work is preprocessing, move it into tf.data where it overlaps the step:",
            "<dataset>.map(<your preprocessing>, num_parallel_calls=tf.data.AUTOTUNE)"
            ".prefetch(tf.data.AUTOTUNE)",
        ]
        return [
            self.finding(
                f"tf.device('/CPU:0') pins {total} op{'s' if total > 1 else ''} that {'have' if total > 1 else 'has'} GPU kernels: {op_list(pinned)}",
                evidence=evidence,
                severity="high" if copied > HEAVY_BYTES_PER_STEP else self.severity,
                fix="\n".join(fix),
                estimated_gain="runs them on the GPU and removes their host<->device copies",
                location=sites[0] if sites else None,
            )
        ]
