"""memory.underused: low peak memory and low GPU activity: a larger batch would help."""

from __future__ import annotations

from typing import Any

from gpuwhy.derived.gpu_activity import MIN_SAMPLES, usable
from gpuwhy.derived.stage import derived
from gpuwhy.facts import Facts
from gpuwhy.finding import Finding
from gpuwhy.fixes.gpu_evidence import percent
from gpuwhy.formatting import MiB
from gpuwhy.rules.base import Rule
from gpuwhy.rules.memory.near_limit import peak_evidence, peaks

INPUT_BOUND = 0.05  # input.bound's medium threshold: a bigger batch would wait longer still
HEADROOM = 0.8  # of the device's memory a larger batch may grow into

FIX = """\
# up to {fits}x the batch fits in the GPU's memory: {factor}x first
model.compile(optimizer=keras.optimizers.Adam(learning_rate * {factor}),  # scale it with the batch
              loss=loss, steps_per_execution=16)
model.fit(x_train, y_train, batch_size=batch_size * {factor}, epochs=epochs)"""
OTHER_FIX = """\
# A batch up to {fits}x larger fits: raise it, {factor}x first (and scale the learning
# rate with it)
# PyTorch: DataLoader(dataset, batch_size=batch_size * {factor}, ...)
# JAX / Flax: the batch axis of what each jitted step is fed"""


class MemoryUnderused(Rule):
    """The GPU is mostly idle and mostly empty: a larger batch would keep it busy.

    ## What it detects
    TensorFlow's peak allocation on the GPU (or, without it, the memory the watched
    processes held) stays below `max_peak_fraction` of the device memory while measured
    busy share of the steady work (the one busy figure: derived/gpu_busy.py; never a
    figure that cannot resolve the program) stays below `max_activity`, and the step is not input-bound (the input pipeline keeps up: under
    5% of the step waits for input where that was measured). The finding gives the peak
    memory, the activity and how many times larger the batch could grow before using
    80% of the device (an upper bound: the weights do not grow with the batch).

    ## Why is this slow?
    Every step carries fixed costs that do not grow with the batch: Python and runtime
    dispatch, one kernel launch (5-10 µs) per op, the optimizer update over all
    weights, gradient all-reduce. A small batch also makes kernels too small to fill
    the GPU's SMs (132 on an H100), so each one runs at a fraction of peak. A larger
    batch spreads the fixed costs over more samples and fills the SMs. Note that it
    changes the optimisation: scale the learning rate (linearly, with warm-up) and check
    accuracy.

    ## Example
    ```python
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss="sparse_categorical_crossentropy")
    model.fit(x_train, y_train, batch_size=32, epochs=20)  # 3 of 80 GiB, 15% busy
    ```

    Use instead:
    ```python
    model.compile(optimizer=keras.optimizers.Adam(8e-3),   # learning rate x 8
                  loss="sparse_categorical_crossentropy",
                  steps_per_execution=16)                  # fewer host round trips
    model.fit(x_train, y_train, batch_size=256, epochs=20)
    ```

    ## Options
    - `max_activity`: GPU activity during steps below which the GPU counts as
      underused (0.50).
    - `max_peak_fraction`: peak allocation as a share of device memory below which
      memory counts as underused (0.30).
    """

    id = "memory.underused"
    severity = "low"
    status = "stable"
    needs = ("gpu_samples",)  # and steps, when the run has them
    options = {"max_activity": 0.50, "max_peak_fraction": 0.30}
    question = "How do I maximise utilisation?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        if not usable(facts.gpu_samples):
            return []
        steps = facts.steps
        if steps is not None and (steps.input_wait_fraction or 0.0) >= INPUT_BOUND:
            return []
        findings = []
        for series, peak, source in peaks(facts):
            total = series.memory_total_bytes
            if not total or not peak or peak / total >= options["max_peak_fraction"]:
                continue
            block = derived(facts).busy_of(series)
            if block is None or block.share is None or not block.reliable:
                continue  # nothing rests on a figure that cannot resolve the program
            busy = block.steady_share if block.steady_share is not None else block.share
            basis = "during steps" if facts.steps is not None else "in its steady work"
            if block.samples < MIN_SAMPLES or busy >= options["max_activity"]:
                continue
            factor = max(2, int(HEADROOM * total / peak))
            findings.append(
                self.finding(
                    f"GPU {series.index} ({series.name}) is {busy:.0%} busy {basis} and uses "
                    f"{peak / MiB:,.0f} of {total / MiB:,.0f} MiB: a larger batch would keep it busy",
                    evidence={
                        **peak_evidence(series.index, peak, total, source),
                        "activity_percent": percent(busy),
                        "activity_measure": block.measure,
                        "samples": block.samples,
                        "batch_could_grow_up_to": f"{factor}x",
                    },
                    fix=(FIX if _tensorflow(facts) else OTHER_FIX).format(
                        factor=min(factor, 8), fits=factor
                    ),
                    gain_value=round(1.0 - busy, 3),
                    estimated_gain=f"up to {factor}x the batch fits; fixed per-step costs "
                    f"spread over more samples",
                )
            )
        return findings


def _tensorflow(facts: Facts) -> bool:
    """A TensorFlow program (steps, or TensorFlow imported): Keras' fix; any program
    ``watch`` saw (or a recording of one): the batch in its own framework's words."""
    tf = facts.program is not None and facts.program.tensorflow_imported
    return tf or facts.steps is not None
