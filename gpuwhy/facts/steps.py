"""Sections ``steps``, ``eager`` and ``tracing`` of a watched run: the training steps
found without markers, the ops Python issued one by one in them, and the tf.functions
the run traced and called.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StepLoop:
    """One loop whose steps are in :class:`StepFacts` (a script may train in several:
    a warm-up loop, one per model, a custom loop then ``fit``)."""

    source: str  # keras-fit, tf-data, tf-function or optimizer
    name: str  # the loop's site or function: "train.py:40", "train_step (train.py:12)"
    count: int  # its steps
    first_s: float  # when its first step started, from the run's start
    last_s: float | None = None  # when its last step started (None: an older record)
    median_s: float | None = None  # per step, after its warm-up


@dataclass(frozen=True)
class StepSpan:
    """One window of the step timeline: the steps that started in it."""

    start_s: float  # the window's start, from the run's start
    steps: int
    p50_s: float | None  # time per step (a Keras call of N steps counts once, its time / N)
    p90_s: float | None
    max_s: float
    step_s: float  # wall time of those steps, summed
    input_wait_s: float | None = None  # of it, waiting for input (None: not timed for all)


@dataclass(frozen=True)
class StepTimeline:
    """Every counted step of the run in windows of ``width_s`` seconds, at most a few
    hundred: adjacent windows merged as the run grew, so it covers the first step to the
    last at any length. Quantiles are within 1 % (a DDSketch per window)."""

    width_s: float
    windows: tuple[StepSpan, ...] = ()


# A fit's wait share this large is resolved whatever its uncertainty: a fifth of the
# steps' time held by a few long steps (a shuffle buffer refilled at each of 3 epochs:
# 2 s each beside 300 steps of 10 ms, 67 % of the time, with an uncertainty of 115 %)
# is those steps' own events, which the spread of the steps measures as noise.
WAIT_RESOLVED_AT = 0.20


@dataclass(frozen=True)
class StepFacts:
    """Section ``steps``: the training steps found without step markers.

    ``source`` says what marked them: ``keras-fit`` (Keras' per-batch callbacks),
    ``tf-data`` (next() on a tf.data iterator in a Python loop), ``tf-function`` (calls
    of the hottest tf.function) or ``optimizer`` (eager ``apply_gradients`` calls).
    ``warmup`` first steps of each loop (tracing, autotune ramp-up) are left out of the
    statistics.
    ``starts``, ``durations`` and ``input_waits`` hold the run's first steps one by one;
    ``timeline`` all of them in windows. ``input_waits`` holds, per step, the seconds spent waiting for the next batch where
    that was measured (None: not measurable for this source). The steps of every
    training loop of the program are counted, on one time line; ``source`` and
    ``marker`` name the loop with the most steps, ``loops`` each of them.
    """

    source: str
    marker: str  # what was timed, for people: "Model.fit (train.py:40)"
    count: int  # steps seen (a Keras batch of steps_per_execution N is N)
    warmup: int = 0
    # indices into ``starts`` of warm-up steps after the first steps of the series: the
    # first steps of a later Keras fit (a new model traces) or of another loop
    later_warmup: tuple[int, ...] = ()
    median_s: float | None = None  # per step, after warm-up
    p90_s: float | None = None
    total_s: float = 0.0  # wall time inside steps after warm-up
    input_wait_fraction: float | None = None  # of total_s, None when not measured
    input_wait_median_s: float | None = None
    input_wait_source: str | None = None  # how the wait was measured: "next() timing"
    # (Python loops) or "tf.data gap timer" (Keras fit)
    # Keras fit's share is a difference of two means (the steps' and tf.data's gaps):
    # its uncertainty, three standard errors of that difference as a share of the mean
    # step. A share not above it is not resolved from no wait (``input_wait_resolved``)
    input_wait_error: float | None = None
    steps_per_call: int = 1  # Keras steps_per_execution
    run_s: float = 0.0  # the whole run, start-up included
    first_step_s: float | None = None  # when the first step started
    starts: tuple[float, ...] = ()  # per step, for the run's first MAX_STEPS steps
    durations: tuple[float, ...] = ()
    input_waits: tuple[float | None, ...] = ()
    # per kept call, the steps it ran, where some differ from ``steps_per_call`` (an
    # epoch's last Keras call runs fewer; a custom loop's steps beside a fit of N a
    # call run one): empty where every kept call ran ``steps_per_call``
    call_steps: tuple[int, ...] = ()
    phases: tuple[
        tuple[str, float, float], ...
    ] = ()  # (name, start, end): fit, evaluate, epochs...
    # every loop counted above, most steps first; evaluation loops (none of their steps
    # trains, while another loop's do) are left out of the steps and of this list
    loops: tuple[StepLoop, ...] = ()
    # a run longer than the steps kept one by one: the latest steps (start, seconds,
    # input wait), and the slowest after warm-up over the whole run (start, per step)
    last_steps: tuple[tuple[float, float, float | None], ...] = ()
    slowest: tuple[tuple[float, float], ...] = ()
    timeline: StepTimeline | None = None
    all_kept: bool = True  # whether ``starts`` holds every step (else the first ones)
    # steps only counted, not timed one by one (in ``count`` and ``total_s``): the next()
    # timing paused for most of a long steady loop of short steps, to keep watching
    # cheap; the quantiles and the input wait are the timed steps'
    counted_only: int = 0

    @property
    def warmup_indices(self) -> frozenset[int]:
        """Indices into ``starts`` of the warm-up steps kept one by one: the leading
        ones (``warmup`` counts the later ones too) and ``later_warmup``."""
        per_call = max(self.steps_per_call, 1)
        leading = max(0, -(-self.warmup // per_call) - len(self.later_warmup))
        return frozenset(self.later_warmup) | frozenset(range(leading))

    @property
    def kept_call_steps(self) -> tuple[int, ...]:
        """The steps each call in ``starts`` ran, one per start: what divides a kept
        duration into steps (an epoch's short last call divided by ``steps_per_call``
        would read as that many fast steps)."""
        if len(self.call_steps) == len(self.starts):
            return self.call_steps
        return (max(1, self.steps_per_call),) * len(self.starts)

    @property
    def first_after_warmup(self) -> int:
        """Index into ``starts`` of the first call after the leading warm-up (counted in
        steps: the calls before it ran ``warmup`` steps or more)."""
        first = ran = 0
        for n in self.kept_call_steps:
            if ran >= self.warmup:
                break
            ran += n
            first += 1
        return first

    @property
    def input_wait_resolved(self) -> bool:
        """Whether the measured wait share stands out of its uncertainty (a wait timed
        around each ``next()`` always does; a Keras fit's difference of two means where
        it exceeds ``input_wait_error``, or holds ``WAIT_RESOLVED_AT`` of the steps'
        time): a share that does not is said, never judged as a wait."""
        share, error = self.input_wait_fraction, self.input_wait_error
        if share is None:
            return False
        return error is None or share > error or share >= WAIT_RESOLVED_AT

    @property
    def mean_s(self) -> float | None:
        """The mean step after warm-up: the step the input share is of (``total_s`` is
        its denominator), so the wait said in time is ``input_wait_fraction`` of it.
        One definition: the finding, the step's picture and the tables say the same."""
        counted = self.count - self.warmup
        return self.total_s / counted if counted > 0 and self.total_s > 0 else None


@dataclass(frozen=True)
class EagerOpSite:
    """Eager ops of one type issued from one source line, within the sampled steps."""

    op: str
    location: str | None  # user file:line that issued them
    count: int
    median_elements: int | None = None  # of the largest output
    device: str | None = None  # where TF ran them (CPU / GPU)
    dtype: str | None = None  # of their first output ("float64"); a line's dtypes apart


@dataclass(frozen=True)
class ReboundName:
    """A name the step's code reads whose object the program creates anew in a loop: a
    ``tf.function`` traced over that code would keep the first object for good."""

    name: str
    location: str  # file:line where the loop creates it
    loop: str  # file:line of that loop
    metric: bool = False  # a Keras metric (the script calls update_state/reset_state/result)


@dataclass(frozen=True)
class StepCode:
    """The code the eager ops come from, read from the source: what a fix wraps."""

    function: str | None  # the def holding most of them; None: a loop body in no def
    location: str  # the def's (or the loop's) file:line
    # "def train_step(x, y):" as written; for a loop body, a def over the loop's variables
    signature: str | None = None
    rebound: tuple[ReboundName, ...] = ()
    body: tuple[str, ...] = ()  # a loop's body as written, dedented, where it can move as is
    before: str | None = None  # a loop body's function goes before this loop (file:line)
    # the lines of the loop's body the function takes (first, last: all of it, or the
    # statements issuing the ops, source_step.py) and the call they become
    moved: tuple[int, int] | None = None
    call: str | None = None  # "loss = train_step(xb, yb)"
    part: bool = False  # ``moved`` is the statements issuing the ops, not the whole body


@dataclass(frozen=True)
class EagerFacts:
    """Section ``eager``: ops dispatched one by one from Python, counted over windows of
    steps (a per-op callback is not free, so it is switched on for part of the run)."""

    sampled_steps: int  # steps wholly inside counting windows
    ops: int  # eager ops counted inside those steps
    per_step: float | None = None
    dispatch_fraction: float | None = None  # estimated share of step time issuing them
    median_gap_us: float | None = None  # between consecutive eager ops
    counted_s: float = 0.0  # seconds the counter was on
    # seconds the counted thread waited for a core (another process's load) inside the
    # time dispatch_fraction is over, and left out of it (Linux schedstat; 0 where none
    # was seen or the kernel does not say)
    core_wait_s: float = 0.0
    sites: tuple[EagerOpSite, ...] = ()  # the top sites by count
    outside_steps: int = 0  # eager ops counted outside any step
    note: str | None = None  # what the count cannot see (other threads ...)
    step_code: StepCode | None = None  # where the small ops' code is, for the fix
    # per window of the run's timeline that holds sampled steps: (window start, sampled
    # steps that started in it, eager ops counted in them)
    windows: tuple[tuple[float, int, int], ...] = ()
    # where the run's loops differ (eager loops beside a traced one): the loops whose
    # steps ``per_step`` and ``dispatch_fraction`` are of, by name (empty: all of them)
    of_loops: tuple[str, ...] = ()


@dataclass(frozen=True)
class TraceSignature:
    """The arguments of one trace, as TF's function type describes them."""

    at_s: float
    args: tuple[tuple[str, str], ...]  # (name, "float32[32,784]" | "3 (int)" ...)
    seconds: float | None = None  # time spent tracing
    caller: str | None = None  # user file:line whose call caused the trace


@dataclass(frozen=True)
class TracedFunction:
    """One tf.function: how often it ran, how often it was traced, and why again."""

    name: str
    location: str | None = None  # def file:line
    calls: int = 0  # calls from eager code
    call_s: float = 0.0  # wall time in those calls
    traces: int = 0
    trace_s: float = 0.0
    changed_args: tuple[str, ...] = ()  # arguments whose spec differed between traces
    signatures: tuple[TraceSignature, ...] = ()  # the first few traces
    reduce_retracing: bool = False
    jit_compile: bool | None = None
    library: bool = False  # defined by Keras/TF, not the user's code
    instances: int = 1  # Function objects with this name and place (a tf.function
    # re-created in a loop, a method per instance)
    # Keras step functions: the models their objects were made for, and the most
    # objects one model has (a model makes one per compile: a new model is no re-creation)
    models: int = 0
    most_per_model: int = 0
    # tf.functions whose graphs call this one (traced inside theirs: Keras'
    # multi_step_on_iterator runs one_step_on_data): its work is in their calls
    inside: tuple[str, ...] = ()
    # of call_s, the calls that traced, whole (the trace, its compile, the first run):
    # call_s less it is the steady calls' time
    traced_call_s: float = 0.0
    # the host's time from one call's end to the next one's start, both timed (the loop,
    # callbacks, a next() outside the call): the median of ``gaps`` such spans
    gap_median_s: float | None = None
    gaps: int = 0


@dataclass(frozen=True)
class TracingFacts:
    """Section ``tracing``: every tf.function the run traced or called."""

    functions: tuple[TracedFunction, ...] = ()
