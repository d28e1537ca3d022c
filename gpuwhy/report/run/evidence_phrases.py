"""A finding's evidence read as prose: fields that say one thing together become one
sentence ("Steps wait 65.3 ms for input of a mean 88.0 ms step (74%)." rather than three
lines of "Input wait mean: 65.3 ms."). The fields the phrases below do not take are said
one by one (evidence_text.sentence); the record's keys stay the contract, untouched.

Each phrase is a function of the evidence that returns its sentence and the keys it said,
or None where its keys are not all there: phrases are tried in order, and a key one of
them said is not said again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpuwhy.formatting import duration

Phrase = Callable[[Mapping[str, Any]], "tuple[str, tuple[str, ...]] | None"]


def _ms(value: Any) -> str:
    return duration(float(value) / 1000, microseconds=True)


def _share(value: Any) -> str:
    return f"{float(value):.0%}" if float(value) >= 0.01 or value == 0 else f"{float(value):.1%}"


def _has(evidence: Mapping[str, Any], *keys: str) -> bool:
    return all(evidence.get(k) is not None for k in keys)


def _numbers(evidence: Mapping[str, Any], *keys: str) -> bool:
    return all(
        isinstance(evidence.get(k), (int, float)) and not isinstance(evidence.get(k), bool)
        for k in keys
    )


def _mean_wait(e: Mapping[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    keys = ("input_wait_mean_ms", "step_mean_ms", "input_wait_fraction")
    if not _numbers(e, *keys):
        return None
    return (
        f"Steps wait {_ms(e['input_wait_mean_ms'])} for input of a mean "
        f"{_ms(e['step_mean_ms'])} step ({_share(e['input_wait_fraction'])}).",
        keys,
    )


def _median_wait(e: Mapping[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    for wait, step in (
        ("input_wait_median_ms", "step_median_ms"),
        ("input_wait_ms_per_step", "consumer_ms_per_step"),
    ):
        if _numbers(e, wait, step):
            keys: tuple[str, ...] = (wait, step)
            text = (
                f"The median step takes {_ms(e[step])}; the median wait for input is "
                f"{_ms(e[wait])}."
            )
            if _numbers(e, "input_wait_fraction") and "input_wait_mean_ms" not in e:
                # the share is of the steps' total time, not of the median step
                share = _share(e["input_wait_fraction"])
                text = f"Steps wait for input {share} of the time. {text}"
                keys += ("input_wait_fraction",)
            return text, keys
    return None


def _median_step_with_share(e: Mapping[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    """A capture's: the share of the captured steps, and their median."""
    if not _numbers(e, "input_wait_fraction", "step_median_ms"):
        return None
    return (
        f"Steps wait for input {_share(e['input_wait_fraction'])} of the time; the median "
        f"step takes {_ms(e['step_median_ms'])}.",
        ("input_wait_fraction", "step_median_ms"),
    )


def _measured_over(e: Mapping[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    if not _has(e, "steps_measured", "measured_at"):
        return None
    keys: tuple[str, ...] = ("steps_measured", "measured_at")
    at = str(e["measured_at"])
    at = f"in the {at}" if at.startswith("profiler capture") else f"at {at}"
    text = f"Measured over {e['steps_measured']:,} steps, {at}"
    by = e.get("measured_by")
    if isinstance(by, str) and by and by not in str(e["measured_at"]):
        text += f", by {by}"
        keys += ("measured_by",)
    return text + ".", keys


def _stage(prefix: str, name_key: str, label: str) -> Phrase:
    """``MapAndBatch(load at x.py:36) takes 85.4 ms an element on 1 thread: 100% of the
    pipeline's time``, from a stage's fields (``prefix``: ``bottleneck_`` or none)."""

    def phrase(e: Mapping[str, Any]) -> tuple[str, tuple[str, ...]] | None:
        per, threads, share = (
            f"{prefix}{k}" for k in ("ms_per_element", "threads", "share_of_pipeline_time")
        )
        if not _has(e, name_key) or not _numbers(e, per):
            return None
        name = str(e[name_key]).removeprefix("stage ")
        keys: tuple[str, ...] = (name_key, per)
        called = label
        if e.get("slowest_stage") is True:
            called, keys = "The slowest stage", (*keys, "slowest_stage")
        text = f"{called}, {name}, takes" if called else f"{name} takes"
        text += f" {_ms(e[per])} an element"
        if _numbers(e, threads):
            n = int(e[threads])
            text += f" on {n} thread{'' if n == 1 else 's'}"
            keys += (threads,)
        if _numbers(e, share):
            text += f": {_share(e[share])} of the pipeline's time"
            keys += (share,)
        if _numbers(e, "elements") and not prefix:
            text += f", over {int(e['elements']):,} elements"
            keys += ("elements",)
        return text + ".", keys

    return phrase


def _gpu_busy(e: Mapping[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    if not _numbers(e, "gpu_busy_fraction"):
        return None
    return (
        f"The GPU was busy {_share(e['gpu_busy_fraction'])} of the time.",
        ("gpu_busy_fraction",),
    )


def _band(value: Any, fmt: Callable[[Any], str]) -> str:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return f" ({fmt(value[0])}–{fmt(value[1])})"
    return ""


def _projected_step(e: Mapping[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    if not _has(e, "gpu") or not _numbers(e, "projected_step_ms"):
        return None
    band = e.get("projected_step_band_ms")
    return (
        f"On {e['gpu']} (projected), the step alone would take {_ms(e['projected_step_ms'])}"
        f"{_band(band, _ms)}.",
        ("gpu", "projected_step_ms", "projected_step_band_ms"),
    )


def _projected_wait(e: Mapping[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    if not _numbers(e, "projected_input_wait"):
        return None
    band = e.get("projected_input_wait_band")
    return (
        f"Steps would wait for input {_share(e['projected_input_wait'])} of the time"
        f"{_band(band, _share)}.",
        ("projected_input_wait", "projected_input_wait_band"),
    )


def _batch_made(e: Mapping[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    alone, delivered = "input_ms_per_batch_alone", "input_ms_per_batch_as_delivered"
    if not _numbers(e, alone):
        return None
    # its stage timers ran beside the model, on cores the steps share: at most its time alone
    text = f"The pipeline makes a batch in {_ms(e[alone])} by its stage timers (at most alone)"
    if _numbers(e, delivered):
        text += f", and delivered one every {_ms(e[delivered])} beside the model"
    return text + ".", (alone, delivered)


def _eager_ops(e: Mapping[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    if not _numbers(e, "eager_ops_per_step", "sampled_steps"):
        return None
    keys: tuple[str, ...] = ("eager_ops_per_step", "sampled_steps")
    text = f"{e['eager_ops_per_step']:,.0f} ops run eagerly a step"
    if _numbers(e, "small_ops_per_step"):
        text += f", {e['small_ops_per_step']:,.0f} of them small"
        keys += ("small_ops_per_step",)
    text += f" (counted in {int(e['sampled_steps']):,} sampled steps)"
    if _numbers(e, "median_gap_between_eager_ops_us"):
        text += f", one every {duration(e['median_gap_between_eager_ops_us'] / 1e6, microseconds=True)} (median)"
        keys += ("median_gap_between_eager_ops_us",)
    return text + ".", keys


def _traces(e: Mapping[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    if not _has(e, "function") or not _numbers(e, "traces"):
        return None
    keys: tuple[str, ...] = ("function", "traces")
    where = f" ({e['location']})" if isinstance(e.get("location"), str) else ""
    if where:
        keys += ("location",)
    text = f"{e['function']}{where} was traced {int(e['traces']):,} times"
    if _numbers(e, "trace_seconds", "call_seconds"):
        text += (
            f": {duration(e['trace_seconds'])} of tracing in {duration(e['call_seconds'])} of calls"
        )
        keys += ("trace_seconds", "call_seconds")
        if _numbers(e, "tracing_share_of_call_time"):
            text += f" ({_share(e['tracing_share_of_call_time'])})"
            keys += ("tracing_share_of_call_time",)
    return text + ".", keys


# NVML's names for where a busy figure came from
BUSY_SOURCES = {"gpm": "NVML's GPM counters", "dcgm": "DCGM", "utilization": "NVML utilization"}


def _busy_percent(e: Mapping[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    """A recording's busy figure: how busy, by which measure and counters, over what."""
    if not _numbers(e, "busy_percent"):
        return None
    keys: tuple[str, ...] = ("busy_percent",)
    text = f"The GPU was busy {float(e['busy_percent']):.1f}% of the time"
    if isinstance(e.get("busy_measure"), str):
        text += f", by {e['busy_measure']}"
        keys += ("busy_measure",)
    source = e.get("busy_source")
    if isinstance(source, str):
        text += f" ({BUSY_SOURCES.get(source, source)})"
        keys += ("busy_source",)
    if _numbers(e, "window_s", "samples"):
        text += f", over {duration(float(e['window_s']))} in {int(e['samples']):,} samples"
        keys += ("window_s", "samples")
    return text + ".", keys


def _engaged(e: Mapping[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    """How a GPU's busy time splits: how often a kernel ran, how much of it while one did."""
    if not _numbers(e, "time_share_percent", "space_share_percent"):
        return None
    return (
        f"A kernel ran {float(e['time_share_percent']):.0f}% of the time, and while one ran "
        f"{float(e['space_share_percent']):.0f}% of its SMs were busy.",
        ("time_share_percent", "space_share_percent"),
    )


# in the order tried: a key one phrase said is not said again by a later one
PHRASES: tuple[Phrase, ...] = (
    _mean_wait,
    _median_wait,
    _median_step_with_share,
    _measured_over,
    _stage("bottleneck_", "bottleneck", "The slowest stage"),
    _stage("", "stage", ""),
    _gpu_busy,
    _projected_step,
    _projected_wait,
    _batch_made,
    _eager_ops,
    _traces,
    _busy_percent,
    _engaged,
)


def phrased(evidence: Mapping[str, Any]) -> tuple[list[str], set[str]]:
    """The sentences the phrases make of ``evidence``, and the keys they said."""
    said: set[str] = set()
    sentences = []
    for phrase in PHRASES:
        left = {k: v for k, v in evidence.items() if k not in said}
        try:
            made = phrase(left)
        except (TypeError, ValueError, OverflowError, ZeroDivisionError):
            # a saved record's evidence of another type than gpuwhy writes (edited by
            # hand): its fields are said one by one, as any field no phrase knows
            made = None
        if made is None:
            continue
        text, keys = made
        sentences.append(text)
        said.update(k for k in keys if k in evidence)
    return sentences, said
