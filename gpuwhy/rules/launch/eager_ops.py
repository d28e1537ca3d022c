"""launch.eager-ops: many small ops dispatched one by one from Python each step."""

from __future__ import annotations

from typing import Any

from gpuwhy.derived.stage import derived
from gpuwhy.facts import EagerFacts, EagerOpSite, Facts
from gpuwhy.finding import Finding
from gpuwhy.fixes import traced_step
from gpuwhy.formatting import duration
from gpuwhy.rules.base import Rule


def _is_small(site: EagerOpSite, small_elements: int) -> bool:
    """Unknown size (an op with no output, such as a variable update) counts as small."""
    return site.median_elements is None or site.median_elements < small_elements


def _small_share(eager: EagerFacts, small_elements: int) -> float:
    """Share of the counted ops that are small, read from the listed (top) sites."""
    listed = sum(site.count for site in eager.sites)
    if not listed:
        return 0.0
    return sum(site.count for site in eager.sites if _is_small(site, small_elements)) / listed


def _percent(fraction: float | None) -> str:
    return "?" if fraction is None else f"{fraction:.0%}"


def _loops(names: tuple[str, ...]) -> str:
    """``the loop at train.py:61`` / ``the loops at train.py:61, train.py:93``: the loops
    a per-step figure is of (a tf.data loop is named by its site, others as they are)."""
    named = [n.removeprefix("Model.fit at ") for n in names]
    if all(":" in n for n in named):
        return ("the loop at " if len(named) == 1 else "the loops at ") + ", ".join(named)
    return ("the loop " if len(names) == 1 else "the loops ") + ", ".join(names)


def _row(site: EagerOpSite, eager: EagerFacts, small_elements: int) -> dict[str, Any]:
    row: dict[str, Any] = {"op": site.op, "location": site.location}
    if eager.sampled_steps:
        row["per_step"] = round(site.count / eager.sampled_steps, 1)
    elif eager.counted_s > 0:
        row["per_second"] = round(site.count / eager.counted_s)
    row["median_elements"] = site.median_elements
    row["device"] = site.device
    if not _is_small(site, small_elements):
        row["small"] = False
    return row


class EagerOps(Rule):
    """Each step dispatches many small ops eagerly from Python; overhead, not math, dominates.

    ## What it detects
    At least `min_ops_per_step` ops per step run eagerly (outside any `tf.function`) on
    tensors smaller than `small_elements` elements, or at least `min_ops_when_busy` of
    them where issuing them takes `min_busy_fraction` of the step (a small model's eager
    `GradientTape` step is 60 ops, nearly all of its time dispatch): a custom training loop without
    `@tf.function`, Python `for` loops over layers or time steps, `model.compile(
    run_eagerly=True)`, or per-step metric and logging code. The finding names the op
    types and the file:line that issues most of them, and how much of the step went
    into issuing them (the gaps between consecutive eager ops, an estimate; the time
    the thread waited for a core while other processes held them is not the step's,
    and is left out, where Linux's schedstat says how long it was). When no
    training step was found (a bare Python loop of ops), it fires when issuing small
    eager ops took at least `min_busy_fraction` of the time they were counted (and at
    least `min_ops_per_step` of them were counted). It is
    high when issuing them took half the step or more, medium from 15% (or when
    unknown), low below. With `--target GPU` it adds what the projection says: issuing
    the ops costs the host the same on that GPU while their kernels get shorter, so a
    CPU run where the kernels hid the dispatch shows the share the GPU would see; high
    when that is half the projected step or more.

    ## Why is this slow?
    An eager op pays tens of microseconds of Python and runtime dispatch plus 5-10 µs to
    launch its kernel, while a kernel on a small tensor finishes in a few microseconds.
    The GPU runs each kernel, then waits for the host to issue the next one, so it is
    idle most of the step and a faster GPU changes nothing. A `tf.function` runs the
    whole step as one graph in C++ (no per-op Python), and `jit_compile=True` lets XLA
    fuse the element-wise ops into far fewer kernels.

    ## Example
    ```python
    def train_step(x, y):                   # no tf.function: every op from Python
        with tf.GradientTape() as tape:
            h = x
            for w in weights:               # 50 small layers
                h = tf.nn.relu(h @ w)
            loss = tf.reduce_mean(tf.square(h - y))
        grads = tape.gradient(loss, weights)
        optimizer.apply_gradients(zip(grads, weights))
        return loss
    ```

    Use instead:
    ```python
    @tf.function(jit_compile=True)          # one graph per step, fused by XLA
    def train_step(x, y):
        ...                                 # same body
    # Keras: keep model.compile(run_eagerly=False) (the default)
    ```

    The fix names the function the ops come from (or the loop whose body to make one)
    as the source writes it. Objects that code reads and the program creates anew in a
    loop (metrics made each epoch) are named with it: a `tf.function` keeps the first
    ones, so they are made once and `reset_state()` each pass. Under a `tf.distribute`
    strategy with several replicas the fix leaves out `jit_compile=True`, which fails
    there, and says which part XLA can compile.

    Eager ops are counted on the thread that imported TensorFlow, during windows that
    cover part of the run (counting slows each op); `tf.function` calls are not eager
    ops and are not counted. A program that trains in several loops, some eager and
    some calling a `tf.function` (a tutorial's eager loop, then the same step traced),
    is counted per step of the loops that issue the ops (those issuing a quarter or
    more of the busiest loop's ops a step), and the finding names them ("Each step of
    the loops at train.py:61, train.py:93"): pooled with the traced loop's steps, the
    count moved run to run with the steps its windows happened to sample.

    ## Options
    - `min_busy_fraction`: the share of the step (with no training step found, of the
      counted time) spent issuing small eager ops that makes the finding from fewer than
      `min_ops_per_step` of them (0.5).
    - `min_ops_when_busy`: small eager ops per step that make the finding where issuing
      them takes `min_busy_fraction` of the step (20).
    - `min_ops_per_step`: small eager ops per step that make the finding (100).
    - `small_elements`: an op whose largest output has fewer elements than this counts
      as small (65536).
    """

    id = "launch.eager-ops"
    severity = "high"
    status = "stable"
    needs = ("eager",)
    options = {
        "min_busy_fraction": 0.5,
        "min_ops_per_step": 100,
        "min_ops_when_busy": 20,
        "small_elements": 65536,
    }
    question = "Why is it slow with small ops?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        eager = facts.eager
        assert eager is not None  # in `needs`: never run without it
        if not eager.ops or not eager.sites:
            return []
        small_elements = options["small_elements"]
        small_share = _small_share(eager, small_elements)
        busy = eager.dispatch_fraction
        gain = busy * small_share if busy is not None else None
        if eager.sampled_steps and eager.per_step is not None:
            small_per_step = eager.per_step * small_share
            if small_per_step < options["min_ops_per_step"] and not (
                small_per_step >= options["min_ops_when_busy"]
                and gain is not None
                and gain >= options["min_busy_fraction"]
            ):
                return []
            of = f" of {_loops(eager.of_loops)}" if eager.of_loops else ""
            title = (
                f"Each step{of} dispatches ~{small_per_step:.0f} small ops eagerly from "
                f"Python ({_percent(gain)} of the step spent issuing them)"
            )
            rate: dict[str, Any] = {
                "small_ops_per_step": round(small_per_step, 1),
                "eager_ops_per_step": round(eager.per_step, 1),
                "sampled_steps": eager.sampled_steps,
            }
            if eager.of_loops:
                rate["of_loops"] = list(eager.of_loops)
        else:
            if facts.steps is not None and facts.steps.count:
                # Training steps were found but no counted window fell inside one: the
                # ops counted ran in set-up or evaluation code, not in the steps.
                return []
            small_ops = eager.ops * small_share
            if (
                small_ops < options["min_ops_per_step"]
                or gain is None
                or gain < options["min_busy_fraction"]
            ):
                return []
            per_second = small_ops / eager.counted_s if eager.counted_s > 0 else None
            title = (
                "Small ops dispatched eagerly from Python"
                + (f", ~{per_second:,.0f} per second" if per_second else "")
                + f", took {_percent(gain)} of the time (no training step found)"
            )
            rate = {
                "small_ops_per_second": round(per_second) if per_second else None,
                "small_ops_counted": round(small_ops),
            }
        small_sites = [site for site in eager.sites if _is_small(site, small_elements)]
        evidence: dict[str, Any] = {
            **rate,
            "share_of_time_issuing_them": _percent(gain),
            "median_gap_between_eager_ops_us": (
                round(eager.median_gap_us, 1) if eager.median_gap_us is not None else None
            ),
            "counted_s": round(eager.counted_s, 2),
            "left_out_waiting_for_a_core_s": round(eager.core_wait_s, 2),
            "eager_ops_outside_steps": eager.outside_steps,
            "sites": [_row(site, eager, small_elements) for site in eager.sites[:10]],
        }
        if eager.note:
            evidence["counted"] = eager.note
        severity, gain_text = self._severity(gain), self._gain_text(gain)
        projection = derived(facts).projection
        if projection is not None and projection.eager_s and projection.step_s > 0:
            # a GPU shortens the step's kernels, not Python's issuing of them
            share = min(1.0, projection.eager_s / projection.step_s)
            evidence["projected"] = (
                f"on {projection.gpu} (projected): issuing them takes "
                f"{duration(projection.eager_s)} of a {duration(projection.step_s)} step "
                f"({share:.0%}); the GPU would wait for Python"
            )
            if share >= 0.5:
                severity = "high"
            gain_text += f"; on {projection.gpu} (projected) up to {share:.0%} of the step"
        return [
            self.finding(
                title,
                severity=severity,
                evidence=evidence,
                fix=self._fix(small_sites, facts),
                estimated_gain=gain_text,
                location=_run_eagerly_at(facts)
                or next((site.location for site in small_sites if site.location), None),
                gain_value=gain,
            )
        ]

    @staticmethod
    def _severity(gain: float | None) -> str:
        if gain is None:
            return "medium"
        if gain >= 0.5:
            return "high"
        return "medium" if gain >= 0.15 else "low"

    @staticmethod
    def _fix(sites: list[EagerOpSite], facts: Facts) -> str:
        lines = ["# the eager ops come from:"]
        for site in sites[:5]:
            lines.append(f"#   {site.op} at {site.location or 'library code'}")
        code = facts.eager.step_code if facts.eager is not None else None
        if code is None and _in_fit(facts):
            # Keras traces fit's train step unless told not to: the switch is the cause
            switched = _run_eagerly_at(facts)
            if switched is not None:  # the compile given run_eagerly=True: that one line
                return "\n".join(
                    [
                        *lines,
                        f"# the compile at {switched} runs fit's train step eagerly: leave",
                        "# run_eagerly out there (False is the default), so fit traces it",
                        "model.compile(..., run_eagerly=False)",
                    ]
                )
            return "\n".join(
                [
                    *lines,
                    "# Keras fit runs its train step eagerly only when told to: turn it back",
                    "model.compile(..., run_eagerly=False)   # the default: leave it out",
                    "tf.config.run_functions_eagerly(False)  # where the script set it True",
                ]
            )
        lines += traced_step.wrap(code, facts)
        lines += traced_step.rebound(code)
        if traced_step.replicas(facts) > 1:
            lines += traced_step.xla_under_strategy(facts)
        lines += [
            "# Keras: model.compile(..., run_eagerly=False) (the default), and no",
            "# tf.config.run_functions_eagerly(True) left in the script",
        ]
        return "\n".join(lines)

    @staticmethod
    def _gain_text(gain: float | None) -> str:
        if gain is None:
            return "most of the per-op dispatch time; a graph issues the same ops from C++"
        return (
            f"up to ~{gain:.0%} of the time: what issuing these ops from Python costs "
            "now; in a graph they cost a few µs each, fused by XLA fewer still"
        )


def _in_fit(facts: Facts) -> bool:
    """The steps are Keras fit's (its train step is then a tf.function unless the
    program turned that off)."""
    steps = facts.steps
    return steps is not None and any(loop.source == "keras-fit" for loop in steps.loops)


def _run_eagerly_at(facts: Facts) -> str | None:
    """The program's compile given ``run_eagerly=True``, where fit's eager ops come from
    it: the line to change (fit's own line was given, and the eager ops' sites are
    Keras' layers called from fit)."""
    if facts.program is None or not _in_fit(facts):
        return None
    return facts.program.keras_run_eagerly_at
