"""What the two runs did not share: the versions, the GPU and its driver, the batch,
the precision policy, XLA, the host. A step time that moved with one of these moved for
that reason as much as for the code: the diff says so beside its verdict."""

from __future__ import annotations

from collections.abc import Callable

from gpuwhy.comparison.model import EnvironmentChange
from gpuwhy.derived.pipeline import steps_pipeline
from gpuwhy.facts import Facts

HOST_LOAD_CHANGE = 0.20  # other processes' share of the host's CPU: a shared host wanders by 10
HOST_LOAD = "other processes' CPU on the host"
QUEUED = "the main thread waiting for a core"


def environment_changes(before: Facts, after: Facts) -> tuple[EnvironmentChange, ...]:
    out = []
    for what, read in READERS:
        b, a = _safe(read, before), _safe(read, after)
        if b != a and (b is not None or a is not None):
            out.append(EnvironmentChange(what=what, before=b, after=a))
    load_b, load_a = others_cpu(before), others_cpu(after)
    if load_b is not None and load_a is not None and abs(load_a - load_b) >= HOST_LOAD_CHANGE:
        out.append(EnvironmentChange(what=HOST_LOAD, before=f"{load_b:.0%}", after=f"{load_a:.0%}"))
    queued_b, queued_a = queued_share(before), queued_share(after)
    if queued_b is not None and queued_a is not None and abs(queued_a - queued_b) >= 0.05:
        out.append(
            EnvironmentChange(what=QUEUED, before=f"{queued_b:.0%}", after=f"{queued_a:.0%}")
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


SATURATED = 0.90  # the program and the others together: the host had no core to spare
CONTENDED = 0.30  # ... and the others held this much of it
QUEUED_AT_LEAST = 0.02  # a difference in the main thread's waiting for a core that counts
QUEUED_SHARE_OF_CHANGE = 0.5  # ... when it is this much of the step-time change or more


def host_contention(before: Facts, after: Facts, change: float | None) -> str | None:
    """Why two runs' wall times may differ for the host's sake, for a step time that
    changed by ``change`` (AFTER / BEFORE); None where the host explains little of it.

    Measured where Linux keeps it: the share of the time the program's main thread (its
    loop) waited for a core. More waiting in the slower run, by half the change or more,
    is the host's doing. Where that is not kept, inferred: other processes took a
    different share of the host's CPU (20 points), or a saturated host's (the program and
    the others at 90 % of its cores, the others at 30 %)."""
    if change is None:
        return None
    queued_b, queued_a = queued_share(before), queued_share(after)
    if queued_b is not None and queued_a is not None:
        delta = queued_a - queued_b
        same_way = (delta > 0) == (change > 1)
        big = abs(delta) >= max(QUEUED_AT_LEAST, QUEUED_SHARE_OF_CHANGE * abs(change - 1))
        if same_way and big:
            return (
                f"the program's main thread waited for a core {queued_a:.0%} of the time "
                f"during AFTER against {queued_b:.0%} during BEFORE (a host loaded "
                "differently)"
            )
        return None
    load_b, load_a = others_cpu(before), others_cpu(after)
    if load_b is not None and load_a is not None and abs(load_a - load_b) >= HOST_LOAD_CHANGE:
        return (
            f"other processes used {load_a:.0%} of the host's CPU during AFTER against "
            f"{load_b:.0%} during BEFORE"
        )
    for name, facts, load in (("BEFORE", before, load_b), ("AFTER", after, load_a)):
        own = _cpu_share(facts, "cpu_process_share")
        if load is not None and own is not None and load >= CONTENDED and load + own >= SATURATED:
            return (
                f"the host's CPU was saturated during {name} (other processes {load:.0%}, "
                f"the program {own:.0%})"
            )
    return None


def queued_share(facts: Facts) -> float | None:
    """The share of its training time the program's main thread waited for a core."""
    return _cpu_share(facts, "main_thread_queued_share")


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


def _batch(f: Facts) -> str | None:
    pipeline = steps_pipeline(f.tfdata, f.steps)
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


READERS: tuple[tuple[str, Callable[[Facts], str | None]], ...] = (
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
    ("mixed precision policy", _attr("placement", "mixed_precision_policy")),
    ("XLA", _xla),
    ("tf.distribute strategy", _attr("distribute", "strategy")),
)
