"""How gpuwhy writes a number or a fact for people, in one place: the terminal report, the
HTML report, the verdict line and the findings' titles all say "91.7 ms", "1.5 GiB",
"MapAndBatch(load at train.py:36)" and "interrupted (Ctrl-C)" the same way."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuwhy.facts import StepFacts

KiB = 1024
MiB = 1024**2
GiB = 1024**3


def duration(seconds: float | None, microseconds: bool = False) -> str:
    """``91.7 ms`` below 10 s, ``12.3 s`` above; ``?`` when unknown. ``microseconds``:
    ``3.8 µs`` below a millisecond, for tables of per-element times (a sentence that
    compares two durations keeps both in ms)."""
    if seconds is None:
        return "?"
    if microseconds and seconds < 0.001:
        return f"{seconds * 1e6:,.1f} µs"
    return f"{seconds * 1000:,.1f} ms" if seconds < 10 else f"{seconds:,.1f} s"


def byte_size(n: float | None) -> str:
    """``512 bytes``, ``8.0 KiB``, ``1.5 MiB``, ``2.0 GiB``; ``?`` when unknown."""
    if n is None:
        return "?"
    if abs(n) >= GiB:
        return f"{n / GiB:,.1f} GiB"
    if abs(n) >= MiB:
        return f"{n / MiB:,.1f} MiB"
    if abs(n) >= KiB:
        return f"{n / KiB:,.1f} KiB"
    return f"{n:,.0f} bytes"


def stage_label(stage: Any) -> str:
    """A tf.data stage for people: ``ParallelMapV2(parse at train.py:41)``, ``TFRecord at
    train.py:12``, or TF's name (``Prefetch (added by TF)`` for a stage nobody wrote)."""
    if stage.function and stage.function_location:
        return f"{stage.name}({stage.function} at {stage.function_location})"
    if stage.function:
        return f"{stage.name}({stage.function})"
    if stage.location:
        return f"{stage.name} at {stage.location}"
    return stage.name if stage.written_as else f"{stage.name} (added by TF)"


def stages_words(stages: Sequence[Any]) -> str:
    """Several tf.data stages for people, those one line built said once with it:
    ``FromTensor → Zip → ParallelMapV2(<lambda>) → BatchV2 at train.py:55`` for what one
    call made (a Keras helper builds eight stages at its call's line, which a list of
    labels repeated eight times), ``TFRecord at train.py:60, ParallelMapV2(parse at
    train.py:41)`` for stages written apart. A stage whose function has a line of its
    own keeps its label (:func:`stage_label`)."""
    groups: list[tuple[list[str], str | None]] = []
    for stage in stages:
        if (stage.function and stage.function_location) or not stage.location:
            groups.append(([stage_label(stage)], None))
            continue
        name = f"{stage.name}({stage.function})" if stage.function else stage.name
        if groups and groups[-1][1] == stage.location:
            groups[-1][0].append(name)
        else:
            groups.append(([name], stage.location))
    return ", ".join(
        " → ".join(names) + (f" at {location}" if location else "") for names, location in groups
    )


def how_it_ended(program: Any) -> str:
    """``completed``, ``raised ValueError: ...``, ``interrupted (Ctrl-C)`` ..."""
    return {
        "completed": "completed",
        "exception": f"raised {program.error}",
        "interrupted": "interrupted (Ctrl-C)",
        "terminated": "terminated (SIGTERM)",
        "exit": f"exited with status {program.exit_code}",
        "stopped": "stopped at its time bound (run --stop-after, fix --bound)",
    }.get(program.ended, program.ended)


def run_time(seconds: float | None) -> str:
    """A moment of a run, since its start, as people say it: ``45 s``, ``2 min``,
    ``12 min 30 s``, ``2 h 13 min``; ``?`` when unknown."""
    if seconds is None:
        return "?"
    whole = round(seconds)
    if whole < 60:
        return f"{seconds:.0f} s" if seconds >= 10 or seconds == 0 else f"{seconds:.1f} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s" if whole % 60 else f"{whole // 60} min"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def milliseconds(seconds: float | None, places: int) -> float | None:
    """``seconds`` as milliseconds rounded to ``places``, for evidence (None stays)."""
    return None if seconds is None else round(seconds * 1000, places)


# collect/inprocess/input_wait.py's source name for the waits of Keras fit's steps
GAP_TIMER = "tf.data gap timer"
# and where TF kept no timer (autotune off), the same gaps timed around a from_generator
# source's calls (tfapi/tfdata/generator_gaps.py)
GENERATOR_TIMING = "generator timing"
GAP_SOURCES = (GAP_TIMER, GENERATOR_TIMING)


def wait_in_time(steps: StepFacts) -> str:
    """The input share's time, as the input finding and the step's picture say it: a
    mean wait of the mean step (the share is of their totals), then the median wait
    (" (a mean 65.3 ms of a 88.0 ms step; median 70.1 ms, by next() timing)")."""
    parts = []
    mean = steps.mean_s
    if mean is not None and steps.input_wait_fraction is not None:
        wait = steps.input_wait_fraction * mean
        parts.append(
            f"a mean {duration(wait, microseconds=True)} of a {duration(mean, microseconds=True)} step"
        )
    if steps.input_wait_median_s is not None:
        typical = duration(steps.input_wait_median_s, microseconds=True)
        parts.append(
            # Keras fit's waits are not timed one by one: tf.data's gap timer gives the
            # median step less its median gap, not a median of waits (it can exceed the
            # mean wait, which comes from the means), and is named for what it is
            f"typical {typical}: the median step less {_gap_owner(steps.input_wait_source)} median gap"
            if steps.input_wait_source in GAP_SOURCES
            else f"median {typical}"
        )
    how = f", by {steps.input_wait_source}" if steps.input_wait_source else ""
    if steps.input_wait_error is not None and not steps.input_wait_resolved:
        how += (
            f"; within its uncertainty of ±{steps.input_wait_error:.1%}: not resolved from no wait"
        )
    return f" ({'; '.join(parts)}{how})" if parts else (f" ({how[2:]})" if how else "")


def _gap_owner(source: str | None) -> str:
    return "the generator's" if source == GENERATOR_TIMING else "tf.data's"


def when(created: str) -> str:
    """An ISO date as people read it ("2026-11-30 02:41:35 UTC"), in UTC where it is (as
    records write it); a text that is no ISO date, as it is."""
    from datetime import datetime, timedelta

    try:
        moment = datetime.fromisoformat(created)
    except (TypeError, ValueError):
        return created
    if moment.utcoffset() == timedelta(0):
        return f"{moment:%Y-%m-%d %H:%M:%S} UTC"
    return f"{moment:%Y-%m-%d %H:%M:%S %z}" if moment.tzinfo else f"{moment:%Y-%m-%d %H:%M:%S}"


# who read a tf.data pipeline (``PipelineFacts.consumer``), as people say it
# ``read_via`` of a pipeline Keras' evaluate read inside fit: its validation_data
FIT_VALIDATION = "Model.fit"
CONSUMERS = {
    "keras-fit": "Model.fit",
    "keras-evaluate": "Model.evaluate",
    "keras-predict": "Model.predict",
    "python-loop": "the loop over the dataset",
}


def elements_words(elements: int, known: bool = True, at_least: bool = False) -> str:
    """``1,200 elements``, ``at least 1,200 elements`` (an iterator freed after its last
    read of TF's count), or that they were not counted (``known`` False)."""
    if not known:
        return "elements not counted (autotune off: TF keeps no count)"
    return f"{'at least ' if at_least else ''}{elements:,} element{'' if elements == 1 else 's'}"


def consumer_words(
    consumer: str, start: bool = False, read_at: str | None = None, via: str | None = None
) -> str:
    """``the loop over the dataset`` for ``python-loop`` (``start``: capitalised, to
    begin a title); another reader as the record names it. Where the record says where
    the user's code read it: ``the loop at train.py:27``, or the library call that did
    (``TextVectorization.adapt at train.py:9``)."""
    said = CONSUMERS.get(consumer, consumer)
    if consumer == "python-loop" and read_at:
        said = f"{via} at {read_at}" if via else f"the loop at {read_at}"
    elif consumer == "keras-evaluate" and via == FIT_VALIDATION:
        said = "Model.fit's validation"
    return said[:1].upper() + said[1:] if start else said
