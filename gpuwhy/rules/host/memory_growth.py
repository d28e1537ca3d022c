"""host.memory-growth: the program's memory grows steadily while it trains."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from gpuwhy.derived.change_points import spearman, theil_sen
from gpuwhy.facts import Facts, GrowingObject, OpenFigures, RunTimeline
from gpuwhy.finding import Finding
from gpuwhy.fixes.python_arguments import retraced_call
from gpuwhy.formatting import byte_size, run_time
from gpuwhy.rules.base import Rule

MiB = 2**20
MIN_WINDOWS = 8

RETRACE_FIX = """\
# every trace keeps a new graph in the tf.function's cache: stop the retracing
# (launch.retracing names the function and the arguments that change). Python numbers
# that change: pass every one of them as a tensor (reduce_retracing does not help them)
train_step(x, y, lr=tf.constant(lr, tf.float32))
# shapes that change: @tf.function(reduce_retracing=True), or an input_signature"""
FIX = """\
# keep Python numbers, not tensors, in what outlives a step:
losses.append(float(loss))          # not losses.append(loss): each tensor keeps its buffer
# predictions in a loop: model(x, training=False) instead of model.predict(x) per batch"""


@dataclass(frozen=True)
class Growth:
    """The program's resident memory over the training windows, as a straight line
    against the steps run (a leak keeps so much per step, whatever the pace)."""

    start_s: float
    end_s: float
    first_bytes: int  # the line at the first window
    last_bytes: int  # at the last
    bytes_per_step: float
    late_bytes_per_step: float  # the slope over the last third alone
    bytes_per_s: float  # the same growth over the wall time it took
    rank: float  # Spearman rho of memory with time
    windows: int
    steps: int  # training steps in those windows
    traces: int = 0  # tf.function traces begun in them
    traced_windows: int = 0  # of them, those with a trace

    @property
    def grown(self) -> float:
        return self.last_bytes - self.first_bytes


def growth(facts: Facts) -> Growth | None:
    """The memory line over the main loop's windows after its warm-up (None: fewer than
    ``MIN_WINDOWS`` windows read)."""
    timeline, steps = facts.timeline, facts.steps
    if timeline is None or steps is None or not steps.count:
        return None
    begin, end = steps.first_step_s or 0.0, float("inf")
    if steps.loops:
        begin = steps.loops[0].first_s
        end = steps.loops[0].last_s if steps.loops[0].last_s is not None else end
    if steps.warmup and steps.warmup < len(steps.starts):
        begin = max(begin, steps.starts[steps.warmup])
    rows = [
        w
        for w in timeline.windows
        if w.host_rss_max_bytes and begin <= w.start_s <= end and w.steps
    ]
    if len(rows) < MIN_WINDOWS:
        return None
    run, done = [], 0
    for w in rows:
        done += w.steps
        run.append(float(done))
    values = [float(w.host_rss_max_bytes or 0) for w in rows]
    per_step, intercept = theil_sen(values, run)
    third = len(rows) // 3
    late_per_step, _ = theil_sen(values[-third:], run[-third:])
    seconds = rows[-1].start_s + timeline.width_s - rows[0].start_s
    first = intercept + per_step * run[0]
    last = intercept + per_step * run[-1]
    return Growth(
        start_s=rows[0].start_s,
        end_s=rows[-1].start_s + timeline.width_s,
        first_bytes=int(first),
        last_bytes=int(last),
        bytes_per_step=per_step,
        late_bytes_per_step=late_per_step,
        bytes_per_s=(last - first) / seconds if seconds > 0 else 0.0,
        rank=round(spearman(values), 3),
        windows=len(rows),
        steps=int(run[-1]),
        traces=sum(w.traces for w in rows),
        traced_windows=sum(1 for w in rows if w.traces),
    )


def culprit(
    timeline: RunTimeline, line: Growth, min_share: float
) -> tuple[GrowingObject, float | None] | None:
    """The container the heap censuses saw gain the most bytes, where what it gained
    explains at least ``min_share`` of the memory's growth over the same span (or its
    elements' size is unknown); with its elements gained per training step (None: no
    steps in that span)."""
    for grown in timeline.growing:
        if _in_library(grown.where):
            continue
        span = grown.last_at_s - grown.first_at_s
        elements = grown.length_last - grown.length_first
        if elements <= 0 or span <= 0:
            continue
        if grown.element_bytes is not None and line.bytes_per_s > 0:
            if elements * grown.element_bytes < min_share * line.bytes_per_s * span:
                continue
        steps = steps_between(timeline, grown.first_at_s, grown.last_at_s)
        return grown, (elements / steps if steps else None)
    return None


def steps_between(timeline: RunTimeline, start_s: float, end_s: float) -> float:
    """Training steps between two moments: each window's steps, pro rata of its overlap."""
    width = timeline.width_s
    total = 0.0
    for w in timeline.windows:
        overlap = min(end_s, w.start_s + width) - max(start_s, w.start_s)
        if overlap > 0 and w.steps:
            total += w.steps * overlap / width
    return total


def element_text(grown: GrowingObject) -> str:
    """``EagerTensor float32 (256, 512)``, ``float``, ``objects``."""
    if grown.element_type is None:
        return "objects"
    return " ".join(t for t in (grown.element_type, grown.element_detail) if t)


def culprit_title(grown: GrowingObject, per_step: float | None) -> str:
    """``the list `history` (global of train.py, added to at train.py:18) holds 195
    EagerTensor objects (float32 (256, 512) each), +1 per step``"""
    where = f", added to at {grown.where}" if grown.where else ""
    rate = f", +{per_step:.2g} per step" if per_step else ""
    each = f" ({grown.element_detail} each)" if grown.element_detail else ""
    kind = f"{grown.element_type} objects" if grown.element_type else "objects"
    return (
        f"the {grown.what} `{grown.name}` ({grown.holder}{where}) holds "
        f"{grown.length_last:,} {kind}{each}{rate}"
    )


def _written_parts(grown: GrowingObject) -> tuple[str, str | None]:
    """The receiver as written (``history``, ``self.history``) and, for a one-argument
    append/add or an item assigned, the expression added (``out``)."""
    try:
        tree = ast.parse(grown.written or "")
    except SyntaxError:
        return grown.name, None
    node = tree.body[0] if tree.body else None
    if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript):
        return ast.unparse(node.targets[0].value), ast.unparse(node.value)
    if isinstance(node, ast.AugAssign):
        return ast.unparse(node.target), None
    call = node.value if isinstance(node, ast.Expr) else None
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
        return grown.name, None
    one = len(call.args) == 1 and call.func.attr in ("append", "appendleft", "add")
    return ast.unparse(call.func.value), ast.unparse(call.args[0]) if one else None


MODELS_FIX = """\
# each Keras model keeps its weights, optimizer state and traced steps while the program
# holds it: the memory grows with the models built, not with the steps. Building models
# in a loop (a search, one per fold), let each go before the next:
del model                        # or rebind the one variable to the new model
keras.backend.clear_session()    # Keras' global state (layer names, graphs)
gc.collect()"""
MIN_MODELS = 3  # Keras models built, from which their traces are the growth's cause


def models_built(facts: Facts) -> int | None:
    """How many Keras models the run's traces were made for, where Keras' step
    functions of three or more models did most of the tracing: a notebook that builds
    and fits one model after another (TF's time-series tutorial, thirteen) grows by its
    models, whose graphs are no retracing to stop. None otherwise."""
    functions = facts.tracing.functions if facts.tracing is not None else ()
    keras = [f for f in functions if f.models]
    models = max((f.models for f in keras), default=0)
    traced = sum(f.traces for f in keras)
    if models < MIN_MODELS or traced * 2 < sum(f.traces for f in functions):
        return None
    return models


def _retrace_fix(facts: Facts) -> str:
    """RETRACE_FIX, its example the program's own call (:func:`retraced_call`)."""
    call = retraced_call(facts)
    if call is None:
        return RETRACE_FIX
    return RETRACE_FIX.replace("train_step(x, y, lr=tf.constant(lr, tf.float32))", call)


def culprit_fix(grown: GrowingObject) -> str:
    """The fix in the program's own names: a number instead of a scalar tensor, a running
    mean instead of a larger one, the last entries of a dict keyed per step, a bounded
    deque for anything else."""
    receiver, added = _written_parts(grown)
    written = grown.written or f"{receiver}.append(...)"
    at = f"  ({grown.where})" if grown.where else ""
    value = added or "value"  # each step's value, where the line does not say
    detail = grown.element_detail
    if grown.what == "dict":
        return (
            f"# one entry per step, kept for good: keep the last ones only\n"
            f"{written}" + (f"   # {grown.where}" if grown.where else "") + "\n"
            f"while len({receiver}) > 100:\n"
            f"    del {receiver}[next(iter({receiver}))]   # the oldest first"
        )
    if detail is not None and detail.endswith("()"):
        return (
            f"# keep a Python number, not the tensor: each one keeps its buffer and TF handle\n"
            f"{receiver}.append(float({value}))   # instead of {written}{at}"
        )
    if detail is not None:
        size = byte_size(grown.element_bytes) if grown.element_bytes else "its buffer"
        mean = f"{receiver}_mean"
        lines = [
            f"# each step keeps a {detail} {grown.element_type or 'value'} ({size}): "
            "keep a summary of it instead",
            f"{mean} = tf.keras.metrics.Mean()   # once, where {receiver} is made",
            f"{mean}.update_state({value})   # instead of {written}{at}",
        ]
        if "Tensor" in (grown.element_type or ""):
            lines.append(
                f"# to keep every value: {receiver}.append({value}.numpy()) drops TF's handle "
                f"but still keeps {size} a step"
            )
        return "\n".join(lines)
    return (
        f"# one element per step, kept for good: keep the last ones only\n"
        f"{receiver} = collections.deque(maxlen=100)   # where it is made; "
        f"{written} then drops the oldest{at}"
    )


MIN_FIGURES_KEPT = 3  # figures left open over the run that name the growth


def figures_kept(timeline: RunTimeline | None, line: Growth) -> OpenFigures | None:
    """matplotlib figures the program left open while its memory grew: pyplot's registry
    gained at least ``MIN_FIGURES_KEPT`` over the run, still open when the growth was
    last read (a figure an epoch, saved and never closed)."""
    figures = timeline.open_figures if timeline is not None else None
    if figures is None or figures.last - figures.first < MIN_FIGURES_KEPT:
        return None
    if figures.last_at_s < line.start_s:
        return None  # all made and kept before the training's growth: not its cause
    return figures


def figures_title(figures: OpenFigures) -> str:
    """``77 matplotlib figures are open (made at dcgan.py:187, none closed): pyplot keeps
    every figure until plt.close``"""
    made = f"made at {figures.made_at}, " if figures.made_at else ""
    kept = (
        "none closed"
        if figures.first == 0
        else f"{figures.last - figures.first:,} more than at {run_time(figures.first_at_s)}"
    )
    return (
        f"{figures.last:,} matplotlib figures are open ({made}{kept}): pyplot keeps every "
        "figure until plt.close"
    )


def figures_fix(figures: OpenFigures) -> str:
    """``plt.close(fig)`` after the figure is saved, in the program's names: the name
    the figure is assigned to and pyplot's as written at the line that made it."""
    pyplot, name = "plt", None
    try:
        statement = ast.parse(figures.made_written or "").body[0]
    except (SyntaxError, IndexError):
        statement = None
    value = getattr(statement, "value", None)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
        pyplot = ast.unparse(value.func.value)
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target = statement.targets[0]
        first = (
            target.elts[0] if isinstance(target, ast.Tuple | ast.List) and target.elts else target
        )
        if isinstance(first, ast.Name):
            name = first.id
    at = f"   # {figures.made_at}" if figures.made_at else ""
    made = figures.made_written or f"fig = {pyplot}.figure()"
    close = f"{pyplot}.close({name})" if name else f"{pyplot}.close()   # the current figure"
    return "\n".join(
        [
            "# pyplot keeps every figure it makes until it is closed (plt.show() does not",
            "# close it without a display): close each one once it is saved",
            f"{made}{at}",
            f"...   # drawn and saved ({pyplot}.savefig(...)) as before, then:",
            close,
        ]
    )


def _unexplained_is_enough(line: Growth, options: dict[str, Any]) -> bool:
    """Growth nothing names (no container, no retracing) is reported only over a longer
    stretch of training and by more: a healthy Keras fit of a few epochs was seen to creep
    24 MiB in 15 s (its evaluate and predict functions built as it went)."""
    if line.grown < options["unexplained_min_mib"] * MiB:
        return False
    start = max(line.first_bytes, 1)
    if line.grown >= options["unexplained_large_share"] * start:
        return True  # half as much again, however short the run
    return (
        line.end_s - line.start_s >= options["unexplained_min_s"]
        and line.grown >= options["unexplained_min_share"] * start
    )


def _high(line: Growth, runs_out: float | None, options: dict[str, Any]) -> bool:
    """High: the host is full within a day at this rate, and the growth is large enough
    for the rate to be one: `high_min_share` of where it started. A line a few per cent
    above its start, extrapolated over a day, is a guess from a short stretch."""
    if runs_out is None or runs_out >= 24 * 3600:
        return False
    return line.grown >= options["high_min_share"] * max(line.first_bytes, 1)


def _in_library(where: str | None) -> bool:
    """Added to on a line inside an installed package (TF's, Keras'): the library's
    container, not one the program can change, whoever recorded it (a saved record)."""
    return (
        where is not None
        and re.search(r"(^|/)(site|dist)-packages/", where.replace("\\", "/")) is not None
    )


class MemoryGrowth(Rule):
    """The program's memory grows steadily while it trains.

    ## What it detects
    The program's resident memory (read once a second through the whole run) rises
    along a straight line against the training steps: a robust (Theil-Sen) line over
    the main loop's windows after its warm-up, whose rank correlation with time is at
    least `min_rank`, that keeps at least `min_bytes_per_step` per step, grows by at
    least `min_growth_mib` and `min_growth_share` of where it started, and keeps
    growing at the same pace per step over the last third of the training (at least
    half its overall pace). TF's own start-up creep (allocator arenas, tf.data buffers,
    autotuning) slows down as the run goes on, and a cache or a shuffle buffer that fills
    during the first epoch stops: neither is a leak. Growth that nothing names (no
    container found growing by the censuses below, no tf.function retracing all along)
    must also span `unexplained_min_s` of training and grow by `unexplained_min_mib` and
    `unexplained_min_share` (or grow by `unexplained_large_share`, however short): over a
    short run, resident memory alone creeps in healthy programs too. The line must
    span `min_steps` training steps. The finding gives the rate, the memory per training
    step, and when the host's memory would run out at that rate: high when that is
    within a day and the memory grew by `high_min_share` of where it started. Where
    the traces all along are Keras' step functions of three or more models (a notebook
    that builds and fits model after model), the finding names the models, not a
    retracing, and is not high: the memory grows with the models built, not the steps.

    ## Why is this slow?
    Memory that grows with every step is something the program keeps: a Python list
    of loss tensors (each one holds its buffer and, in eager mode, a TF handle),
    `model.predict` in a loop (each call builds and keeps a new function and its
    data), a `tf.data` cache on a dataset that is not finite, results appended to a
    history; a tf.function that retraces keeps every graph it traced. It costs time
    before it costs the job: the garbage collector walks a larger heap at each
    collection, the host starts to swap, and in the end the kernel's OOM killer stops
    the job hours in.

    ## Example
    ```python
    losses = []
    for x, y in dataset:
        loss = train_step(x, y)
        losses.append(loss)                 # a tensor per step, kept for good
    ```

    Use instead:
    ```python
    losses = []
    for x, y in dataset:
        loss = train_step(x, y)
        losses.append(float(loss))          # a Python float: a few bytes
    ```

    As the memory grows, a few censuses of the Python heap (a baseline once the memory
    has grown 4 MiB past what it was when training began, not before 8 s nor before 2 s of
    training, then each time it has grown by 12, 24, 48 MiB ..., or by 4 MiB after 10, 20,
    40 s ..., at most 10 a run; a program whose memory stays flat gets none) find the list, dict,
    set or deque that gains the most elements, and name it as the program does (a
    global, a function's local, an object's attribute), with the type of its elements
    and the line that adds to them: the finding then says what to change on that line.
    Only the program's own containers are named: what TensorFlow, Keras or another
    installed library keeps (a tf.function's captures, rebuilt as it traces) is not
    something the program changes on a line of its own.

    One library's store is named all the same, because the program decides what it
    keeps: matplotlib's pyplot keeps every figure it made until `plt.close`, and a
    program that saves a picture each epoch (`plt.figure`, `plt.savefig`, `plt.show`,
    which closes nothing without a display: TF's DCGAN tutorial) keeps them all, a few
    MiB each. pyplot's open figures are counted once a second with the memory, and the
    line of the program that made them is read as each is made; where at least 3 more
    are open at the end than at the first count, and nothing else names the growth,
    the finding names them, the memory per figure and that line, and the fix closes
    each figure once it is saved (`plt.close(fig)`, in the program's names).

    ## Options
    - `min_growth_mib`: growth over the training, in MiB, below which nothing is said (16).
    - `min_growth_share`: growth as a share of the memory at the start of training (0.02).
    - `min_bytes_per_step`: memory kept per training step (512).
    - `min_rank`: rank correlation of memory with time (0.9).
    - `min_steps`: training steps the line must span (50): over a handful of steps what
      the memory gains is what the first steps allocate (functions traced, buffers and
      caches filled), not what each step keeps.
    - `high_min_share`: growth as a share of the memory at the start of training from
      which a host full within a day is high (0.10); below it the finding is medium.
    - `min_explained_share`: share of the memory's growth a named container's elements
      must account for (their count times the last one's size) to be named (0.2).
    - `unexplained_min_s`: seconds of training the growth must span when nothing names
      it (no container, no retracing): resident memory alone creeps in short runs (60).
    - `unexplained_min_mib`: growth in MiB needed then (64).
    - `unexplained_min_share`: growth as a share of the starting memory needed then (0.10).
    - `unexplained_large_share`: growth as a share of the starting memory that is
      reported however short the stretch (0.5).
    """

    id = "host.memory-growth"
    measured_thresholds = {"min_growth_share": "floor", "high_min_share": "floor"}
    severity = "medium"
    status = "preview"
    since = "0.4.0"
    needs = ("steps", "timeline")
    options = {
        "min_growth_mib": 16,
        "min_growth_share": 0.02,
        "min_bytes_per_step": 512,
        "min_rank": 0.9,
        "min_steps": 50,
        "high_min_share": 0.10,
        "min_explained_share": 0.2,
        "unexplained_min_s": 60,
        "unexplained_min_mib": 64,
        "unexplained_min_share": 0.10,
        "unexplained_large_share": 0.5,
    }
    question = "Why does my training's memory keep growing?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        line = growth(facts)
        if line is None or line.grown <= 0 or line.rank < options["min_rank"]:
            return []
        if line.steps < options["min_steps"]:
            return []  # a handful of steps: their first allocations, not a per-step leak
        if line.grown < options["min_growth_mib"] * MiB:
            return []
        if line.grown < options["min_growth_share"] * max(line.first_bytes, 1):
            return []
        if line.bytes_per_step < options["min_bytes_per_step"]:
            return []
        if line.late_bytes_per_step < 0.5 * line.bytes_per_step:
            return []  # it grew, then slowed or stopped: start-up, a buffer that filled
        per_hour = line.bytes_per_s * 3600
        per_step = line.bytes_per_step
        timeline = facts.timeline
        host = timeline.host_memory_bytes if timeline is not None else None
        runs_out = None
        if host and line.bytes_per_s > 0:
            runs_out = max(0.0, (host - line.last_bytes) / line.bytes_per_s)
        # traces all along the growth: each one keeps a graph (a retrace storm's memory)
        retracing = line.traces >= 10 and line.traced_windows >= line.windows / 2
        named = culprit(timeline, line, options["min_explained_share"]) if timeline else None
        # Keras models built one after another: their graphs, where no container is named
        models = models_built(facts) if retracing and not named else None
        # pyplot's figures left open: matplotlib's registry, which no census names
        figures = None if named or retracing else figures_kept(timeline, line)
        if not (named or retracing or figures) and not _unexplained_is_enough(line, options):
            return []  # resident memory alone, over a short run: Keras and TF creep too
        rate = f", {byte_size(per_step)} per step" if per_step else ""
        if figures is not None:  # kept a figure at a time, not a step at a time
            rate = f", about {byte_size(line.grown / (figures.last - figures.first))} per figure"
        title = (
            f"The program's memory grows {byte_size(line.bytes_per_s * 60)} a minute while "
            f"it trains ({byte_size(line.first_bytes)} -> {byte_size(line.last_bytes)}, "
            f"+{byte_size(line.grown)} from {run_time(line.start_s)} to {run_time(line.end_s)}"
            + rate
            + "): "
            + (
                culprit_title(*named)
                if named
                else f"{models} Keras models were built and traced meanwhile ({line.traces:,} "
                "traces): each keeps its weights and graphs while the program holds it"
                if models
                else f"tf.function traced {line.traces:,} times meanwhile, each trace keeps its graph"
                if retracing
                else figures_title(figures)
                if figures
                else "something keeps what each step makes"
            )
        )
        # models built one after another: the rate holds only while more are built
        high = _high(line, runs_out, options) and not models
        growing: dict[str, Any] = {}
        if named:
            grown, per_step_elements = named
            growing = {
                "growing": f"{grown.what} {grown.name} ({grown.holder})",
                "growing_where": grown.where,
                "growing_written": grown.written,
                "growing_element": element_text(grown),
                "growing_element_bytes": grown.element_bytes,
                "growing_length_first": grown.length_first,
                "growing_length_last": grown.length_last,
                "growing_from_s": grown.first_at_s,
                "growing_until_s": grown.last_at_s,
                "growing_per_step": round(per_step_elements, 3) if per_step_elements else None,
            }
        if figures is not None:
            growing.update(
                {
                    "open_figures_first": figures.first,
                    "open_figures_last": figures.last,
                    "figures_made_at": figures.made_at,
                    "figures_made_written": figures.made_written,
                    "figures_made_there": figures.made,
                }
            )
        if timeline is not None and timeline.growing_types:
            growing["growing_types"] = ", ".join(
                f"{name} {first:,} -> {last:,}" for name, first, last in timeline.growing_types[:3]
            )
        return [
            self.finding(
                title,
                severity="high" if high else self.severity,
                evidence={
                    "from_s": line.start_s,
                    "until_s": line.end_s,
                    "first_bytes": line.first_bytes,
                    "last_bytes": line.last_bytes,
                    "bytes_per_hour": round(per_hour),
                    "bytes_per_step": round(per_step) if per_step else None,
                    "rank_correlation": line.rank,
                    "windows": line.windows,
                    "host_memory_bytes": host,
                    "host_full_in_s": round(runs_out) if runs_out is not None else None,
                    "traces_meanwhile": line.traces,
                    **({"keras_models_built": models} if models else {}),
                    **growing,
                },
                fix=(
                    culprit_fix(named[0])
                    if named
                    else MODELS_FIX
                    if models
                    else _retrace_fix(facts)
                    if retracing
                    else figures_fix(figures)
                    if figures
                    else FIX
                ),
                location=named[0].where if named else figures.made_at if figures else None,
                estimated_gain=(
                    "the run keeps its memory: at this rate the host's runs out in about "
                    f"{run_time(runs_out)}"
                    if runs_out is not None
                    else None
                ),
            )
        ]
