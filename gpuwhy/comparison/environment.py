"""What the two runs did not share: the versions, the GPU and its driver, the batch,
the precision policy, XLA, the host. A step time that moved with one of these moved for
that reason as much as for the code: the diff says so beside its verdict."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gpuwhy.comparison.model import Change, EnvironmentChange
from gpuwhy.derived.stage import derived
from gpuwhy.facts import Facts
from gpuwhy.formatting import duration

HOST_LOAD = "other processes' CPU on the host"
QUEUED = "the program's threads waiting for a core, per step"
WAITED_CHANGE_S = 0.0002  # ... listed when it moved this much and by half or more
WAITED_RATIO = 1.5


def environment_changes(before: Facts, after: Facts) -> tuple[EnvironmentChange, ...]:
    out = []
    for what, read in READERS:
        b, a = _safe(read, before), _safe(read, after)
        # a side that does not say (an eager-only run has no traced function to audit)
        # is unknown, not different; a GPU present on one side only is a difference
        if b != a and ((b is not None and a is not None) or what == "GPU"):
            out.append(EnvironmentChange(what=what, before=b, after=a))
    return (*out, *host_changes([before], [after]))


def host_changes(before: Sequence[Facts], after: Sequence[Facts]) -> tuple[EnvironmentChange, ...]:
    """The host's load and the program's waiting for a core, where they moved: each
    side's runs' mean (the figures the contention check reads)."""
    out = []
    load_b, load_a = _mean(others_cpu, before), _mean(others_cpu, after)
    if load_b is not None and load_a is not None and abs(load_a - load_b) >= NEIGHBOUR_CHANGE:
        out.append(EnvironmentChange(what=HOST_LOAD, before=f"{load_b:.0%}", after=f"{load_a:.0%}"))
    waited_b = _mean(threads_queued_per_step, before)
    waited_a = _mean(threads_queued_per_step, after)
    if waited_b is not None and waited_a is not None:
        low, high = sorted((waited_b, waited_a))
        if high - low >= WAITED_CHANGE_S and high >= WAITED_RATIO * low:
            out.append(
                EnvironmentChange(
                    what=QUEUED, before=duration(waited_b, True), after=duration(waited_a, True)
                )
            )
    return tuple(out)


def others_cpu(facts: Facts) -> float | None:
    """Other processes' mean share of the host's CPU (all its cores) while the program
    trained (the windows with steps), or over the record where none had steps."""
    return _cpu_share(facts, "cpu_others_share")


def _cpu_share(facts: Facts, name: str) -> float | None:
    if facts.timeline is None:
        return None
    rows = [w for w in facts.timeline.windows if getattr(w, name) is not None]
    training = [w for w in rows if w.steps]
    shares = [getattr(w, name) for w in (training or rows)]
    return sum(shares) / len(shares) if shares else None


NEIGHBOUR_CHANGE = 0.10  # other processes' share of all cores, more in the slower run
BUSY_HOST = 0.80  # ... while they and the program kept this share of the cores busy


def host_contention(
    before: Sequence[Facts], after: Sequence[Facts], step: Change | None
) -> str | None:
    """Why two sides' step times may differ for the host's sake (their runs' mean
    shares); None where the host explains little of the change.

    Other processes took a larger share of the host's CPU during the slower side (10
    points or more) while its cores were busy then (the program and the others at 80 %
    or more): they took cores the program would have had. With cores to spare, a
    neighbour takes nothing from it. (The threads' own waiting for a core, which the
    timeline keeps too, cannot say this: TF's op threads wait for each other as well,
    more as the program computes more.)

    The cores they took bound what they can explain: a program that had ``own`` of the
    host's CPU and lost at most the others' extra share to them would have run at most
    (own + extra) / own times as fast. A change whose interval lies beyond that bound
    is the program's, whatever the neighbours did (a 2.3x slowdown is not a 12-point
    neighbour's)."""
    if step is None or step.called == "same":
        return None
    slower, faster = (after, before) if step.after > step.before else (before, after)
    slower_name, faster_name = ("AFTER", "BEFORE") if slower is after else ("BEFORE", "AFTER")
    load_s, load_f = _mean(others_cpu, slower), _mean(others_cpu, faster)
    own = _mean(lambda f: _cpu_share(f, "cpu_process_share"), slower)
    if load_s is None or load_f is None or own is None:
        return None
    slowdown_low = step.low if slower is after else 1 / step.high
    if own > 0 and slowdown_low > (own + load_s - load_f) / own:
        return None
    if load_s - load_f >= NEIGHBOUR_CHANGE and load_s + own >= BUSY_HOST:
        return (
            f"other processes used {load_s:.0%} of the host's CPU during {slower_name} "
            f"against {load_f:.0%} during {faster_name}, when its cores were busy "
            f"({load_s + own:.0%} with the program's)"
        )
    return None


def _mean(read: Callable[[Facts], float | None], runs: Sequence[Facts]) -> float | None:
    """The runs' mean of a share; None where a run does not say."""
    values = [read(f) for f in runs]
    if not values or any(v is None for v in values):
        return None
    return sum(v for v in values if v is not None) / len(values)


def threads_queued_per_step(facts: Facts) -> float | None:
    """Seconds per training step the program's threads waited for a core, added up."""
    if facts.timeline is None:
        return None
    rows = [w for w in facts.timeline.windows if w.steps and w.threads_queued_s is not None]
    steps = sum(w.steps for w in rows)
    return sum(w.threads_queued_s or 0.0 for w in rows) / steps if steps else None


def _safe(read: Callable[[Facts], str | None], facts: Facts) -> str | None:
    try:
        return read(facts)
    except (AttributeError, IndexError, TypeError):  # a section this record lacks
        return None


def _tensorflow(f: Facts) -> str | None:
    if f.program is not None and f.program.tensorflow_version:
        return f.program.tensorflow_version
    tf = f.environment.tensorflow if f.environment else None
    return tf.version if tf else None


def _build(key: str) -> Callable[[Facts], str | None]:
    def read(f: Facts) -> str | None:
        tf = f.environment.tensorflow if f.environment else None
        value = tf.build.get(key) if tf else None
        return None if value is None else str(value)

    return read


def _gpus(f: Facts) -> str | None:
    if not f.devices:
        return None
    names: dict[str, int] = {}
    for d in f.devices:
        names[d.name] = names.get(d.name, 0) + 1
    return ", ".join(f"{n}x {name}" if n > 1 else name for name, n in names.items())


def batch_size(f: Facts) -> int | None:
    """The batch the steps read (the last batch stage of their pipeline), where known."""
    text = _safe(_batch, f)
    return int(text) if text else None


def _batch(f: Facts) -> str | None:
    pipeline = derived(f).steps_pipeline
    if pipeline is None:
        return None
    batches = [s for s in pipeline.stages if s.kind == "batch" or "batch" in s.written_as]
    if not batches or batches[-1].ratio <= 1:
        return None
    return str(round(batches[-1].ratio))


def _xla(f: Facts) -> str | None:
    compiled = [fn.name for fn in (f.tracing.functions if f.tracing else ()) if fn.jit_compile]
    if compiled:
        return "jit_compile on " + ", ".join(sorted(set(compiled))[:3])
    if f.program is not None and f.program.keras_auto_jit is not None:
        return "Keras auto (XLA)" if f.program.keras_auto_jit else "off"
    return None


def _attr(*path: str) -> Callable[[Facts], str | None]:
    """A reader of ``facts.<path>`` as text (None where a section on the way is missing)."""

    def read(f: Facts) -> str | None:
        value: object = f
        for name in path:
            value = getattr(value, name, None)
            if value is None:
                return None
        if isinstance(value, tuple):
            return ", ".join(map(str, value)) or None
        return str(value)

    return read


def program(facts: Facts) -> str | None:
    """The script the record ran (its path as given), where it says."""
    command = facts.program.command if facts.program is not None else ()
    return command[0] if command else None


READERS: tuple[tuple[str, Callable[[Facts], str | None]], ...] = (
    ("program", program),
    ("TensorFlow", _tensorflow),
    ("Keras", _attr("program", "keras_version")),
    ("CUDA (TF's build)", _build("cuda_version")),
    ("cuDNN (TF's build)", _build("cudnn_version")),
    ("NVIDIA driver", _attr("environment", "driver", "driver_version")),
    ("GPU", _gpus),
    ("GPUs TensorFlow used", _attr("program", "gpus_seen_by_tf")),
    ("Python", _attr("environment", "python_version")),
    ("host CPU cores", _attr("environment", "cpu_count")),
    ("batch size", _batch),
    ("steps per execution", _attr("steps", "steps_per_call")),
    ("what marked the steps", _attr("steps", "source")),
    ("Keras dtype policy", _attr("placement", "mixed_precision_policy")),
    ("XLA", _xla),
    ("tf.distribute strategy", _attr("distribute", "strategy")),
)
