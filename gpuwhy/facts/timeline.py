"""Section ``timeline``: the whole run in windows of equal width, its first second to
its last, whatever its length.

A slowdown that comes late (steps slower as the run goes on, a GPU that throttles, a
stall every N minutes) is invisible in the run's first minute and blurred in its
means. Each window says what the steps, the host and every GPU did in it; the windows
merge in pairs as the run grows (at most a few hundred), so a day's run is 256 windows
of 512 s and a minute's is 60 of 1 s.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuWindow:
    """One GPU in one window: the NVML samples read in it (None: not read then)."""

    index: int
    samples: int
    utilization: float | None = None  # mean, 0-1 (NVML's point readings)
    busy: float | None = None  # mean of the GPU's busy series (derived/gpu_busy.py), 0-1
    utilization_max: float | None = None
    sm_activity: float | None = None  # GPM, mean
    memory_used_max_bytes: int | None = None
    sm_clock_mhz: float | None = None  # mean
    sm_clock_min_mhz: float | None = None
    power_w: float | None = None  # mean
    power_max_w: float | None = None
    pcie_tx_bytes_per_s: float | None = None  # mean
    pcie_rx_bytes_per_s: float | None = None
    # clocks, heat and link: slowdown reasons are NVML's clock-event reasons
    # other than GPU idle, applications clocks and display clocks; the link is judged on
    # busy samples only (utilisation >= 50%), as it downshifts when idle
    throttle_share: float | None = None  # share of its samples with a slowdown reason
    throttle_reasons: tuple[str, ...] = ()  # the slowdown reasons seen ("sw_power_cap")
    temperature_max_c: float | None = None
    power_limit_w: float | None = None  # the enforced limit (lowest read)
    pcie_gen_busy_min: int | None = None
    pcie_width_busy_min: int | None = None
    pcie_replays: int | None = None  # the replay counter's growth in the window
    others_memory_max_bytes: int | None = None  # other processes' memory on this GPU


@dataclass(frozen=True)
class RunWindow:
    """What happened in one window of the run (from ``start_s``, ``width_s`` long)."""

    start_s: float
    steps: int = 0  # steps that started in it
    step_p50_s: float | None = None  # time per step, within 1 %
    step_p90_s: float | None = None
    step_max_s: float | None = None
    input_wait_share: float | None = None  # of those steps' time (None: not timed)
    eager_ops_per_step: float | None = None  # in the steps the eager counter sampled
    eager_sampled_steps: int = 0
    # tf.function traces (and so graph builds, XLA compiles) begun in it, outermost ones
    # (a trace inside another's is part of it); none of fit's validation passes (below)
    traces: int = 0
    trace_s: float = 0.0  # seconds those traces took, each in the windows it ran through
    # seconds inside outermost tf.function calls from Python, each in the windows it ran
    # through: the rest of a step is Python's. Not those of fit's validation passes,
    # which run between the training steps (nor their calls that traced, below)
    function_call_s: float = 0.0
    # of those, the calls that traced, each whole (its trace, the graph's optimisation,
    # any XLA compile and the new graph's first run): what retracing costs the steps
    traced_call_s: float = 0.0
    # Keras fit's consumer time per element (tf.data's gap timer, the latest gaps at each
    # read of its iterator's model), mean: a fit step is its input wait plus this gap
    fit_gap_s: float | None = None
    host_rss_max_bytes: int | None = None  # the program's resident memory, highest read
    # TF's own bytes in use on its GPUs (all of them), highest read: what the model holds,
    # not the pool TF reserved (None: no GPU, or not read)
    tf_gpu_memory_max_bytes: int | None = None
    # the host's CPU time in it, of all its cores: this program's (its process tree) and
    # every other process's (None: not read)
    cpu_process_share: float | None = None
    cpu_others_share: float | None = None
    # of the window's wall time, the program's main thread (its loop) was runnable but
    # waited for a core (Linux schedstat): the host's contention, measured where it acts
    main_thread_queued_share: float | None = None
    # all the program's threads, their seconds waiting for a core added up (TF's op
    # threads wait there while the loop's thread waits for them)
    threads_queued_s: float | None = None
    gc_pause_s: float = 0.0  # Python garbage collection (gc.callbacks), seconds in it
    gc_collections: int = 0
    checkpoint_s: float = 0.0  # checkpoint writes (tf.train.Checkpoint, Keras saves)
    # gpuwhy's own work that held the program's threads (a heap census holds the GIL),
    # seconds of it that began in the window: time the steps took that is not the program's
    own_pause_s: float = 0.0
    # the program's own Keras evaluate()/predict() calls begun in it (not fit's
    # validation), and their seconds: one a step is a loop body calling predict()
    keras_calls: int = 0
    keras_call_s: float = 0.0
    # the program's Model.fit calls begun in it, and their seconds (fit's steps inside):
    # one a step is a loop of one-batch fits
    keras_fits: int = 0
    keras_fit_s: float = 0.0
    stalls: int = 0  # stalled steps that started in it (section stalls)
    gpus: tuple[GpuWindow, ...] = ()


@dataclass(frozen=True)
class GrowingObject:
    """A container of the program's that gained elements between two heap censuses
    (taken as its memory grew), named as the program names it."""

    what: str  # list | dict | set | deque
    name: str  # the program's name for it ("history")
    holder: str  # "global of train.py", "local of train()", "attribute of Trainer"
    where: str | None  # file:line of the first statement that adds to it (None: not read)
    written: str | None  # that statement as written ("history.append(out)")
    length_first: int  # elements at the census before it was seen growing
    length_last: int  # at the last census that saw it
    first_at_s: float
    last_at_s: float
    element_type: str | None = None  # of its last element (a dict's last value)
    element_detail: str | None = None  # a tensor's or array's dtype and shape
    element_bytes: int | None = None  # one element's size: its buffer, or what it reaches
    key_type: str | None = None  # a dict's keys


@dataclass(frozen=True)
class OpenFigures:
    """matplotlib's pyplot figures the program kept open (pyplot keeps each one it made
    until ``plt.close``), counted with the memory once a second from the time pyplot
    was imported."""

    first: int  # open at the first read
    last: int  # at the last
    most: int
    first_at_s: float
    last_at_s: float
    made_at: str | None = None  # the program's line that made the most figures
    made_written: str | None = None  # that statement as written
    made: int = 0  # figures made there


@dataclass(frozen=True)
class RunTimeline:
    """Section ``timeline``: windows of ``width_s`` seconds from the run's start
    (windows in which nothing was read are left out)."""

    width_s: float
    run_s: float  # the run it covers: 0 to run_s
    host_memory_bytes: int | None = None  # the host's physical memory
    windows: tuple[RunWindow, ...] = ()
    # the heap censuses taken as the program's memory grew (a baseline, then at most 7)
    heap_censuses: int = 0
    heap_census_s: float = 0.0  # the CPU seconds they took (holding the GIL)
    growing: tuple[GrowingObject, ...] = ()  # most bytes gained first
    # the types whose objects grew most in number: (type, at the baseline, at the last)
    growing_types: tuple[tuple[str, int, int], ...] = ()
    open_figures: OpenFigures | None = None  # matplotlib's, where pyplot made any
