"""input.bound: the training step waits for the input pipeline."""

from __future__ import annotations

import re
from typing import Any

from gpuwhy.facts import Facts
from gpuwhy.rules.base import Finding, Rule


class InputBound(Rule):
    """The step waits for its next batch: the GPU idles while tf.data prepares input.

    ## What it detects
    The fraction of each training step spent waiting in the iterator's `get_next` is at
    least `medium_at` (medium) or `high_at` (high). It is measured, not estimated, where
    the loop fetches batches from Python (`for x, y in dataset:`): the time inside
    `next()` is the wait. The finding gives the loop's file:line, the wait per step and
    the fraction of step time it costs.

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
    status = "stable"
    needs = ("steps",)
    options = {"medium_at": 0.05, "high_at": 0.20}
    question = "Why is the GPU idle?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        steps = facts.steps
        share = steps.input_wait_fraction if steps is not None else None
        if share is None or share < options["medium_at"]:
            return []
        site = re.search(r" at (\S+:\d+)$", steps.marker)
        speedup = 1 / (1 - share) if share < 0.99 else None
        return [self.finding(
            f"Steps wait for input {share:.0%} of the time "
            f"({_ms(steps.input_wait_median_s)} of a {_ms(steps.median_s)} step)",
            severity="high" if share >= options["high_at"] else "medium",
            location=site.group(1) if site else None,
            evidence={"input_wait_fraction": round(share, 3),
                      "input_wait_median_ms": _round_ms(steps.input_wait_median_s),
                      "step_median_ms": _round_ms(steps.median_s),
                      "steps_measured": steps.count - steps.warmup,
                      "measured_at": steps.marker},
            fix=("ds = (ds.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE)   # parallel, "
                 "not one element at a time\n"
                 "        .cache()                       # when the decoded data fits in memory\n"
                 "        .batch(batch_size)\n"
                 "        .prefetch(tf.data.AUTOTUNE))   # the next batch is ready when the "
                 "step ends"),
            estimated_gain=(f"up to {share:.0%} of step time: steps up to {speedup:.1f}x faster "
                            "once input overlaps compute" if speedup else
                            f"up to {share:.0%} of step time"),
            gain_value=share)]


def _ms(seconds) -> str:
    return "?" if seconds is None else f"{seconds * 1000:,.1f} ms"


def _round_ms(seconds):
    return None if seconds is None else round(seconds * 1000, 2)
