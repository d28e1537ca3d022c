"""The fix for a fit whose wait is each epoch's new iterator starting (derived/
epoch_starts.py): its first batch waits while the iterator starts its threads and fills
its buffers, a shuffle buffer above all (every element of it read, and mapped, before
the first batch).

Keras makes a new iterator per epoch over a finite dataset and keeps one for the run
where ``steps_per_epoch`` is given (``EpochIterator._enumerate_iterator``, keras 3);
a shuffle after a ``repeat`` fills its buffer once for the run (epochs then blend at
their boundaries, as TF's guide says), where one before it refills at every pass (a
``repeat()`` added at the end makes a new shuffle iterator at each pass: it refills).
"""

from __future__ import annotations

from gpuwhy.derived.epoch_starts import EpochStarts, filled_elements, shuffle_refill
from gpuwhy.facts import PipelineFacts, PipelineStage
from gpuwhy.fixes import dataset_calls
from gpuwhy.fixes.epoch_iterator_code import one_iterator_code
from gpuwhy.formatting import duration


def epoch_start_fix(
    starts: EpochStarts, pipeline: PipelineFacts | None, loop_at: str | None = None
) -> list[str]:
    """The lines of the fix, as comments: what each epoch's start costs, and the two ways
    to pay it less (one iterator for the run; a shuffle after a ``repeat``, filled once),
    with the trade-off measured: the reads a refill makes at once are then made beside
    every step, which costs where the steps use every core (this 2-core host, no GPU:
    20 epochs of 59 steps after a 60,000-element buffer took 4.23 s against 3.55 s,
    median of 5 pairs) and hides behind a GPU's steps where cores are free. Not code to
    paste: which way is faster is the host's, and the order of the shuffle is the
    user's to choose."""
    each = f"{duration(starts.excess_s)} an epoch of {starts.steps_per_epoch} steps"
    shuffle = refilled_shuffle(pipeline)
    if shuffle is not None and shuffle.by_library:
        shuffle = None  # a library's (make_csv_dataset's): no call of the program's to name
    lines = ["# the typical step finds its batch ready: the wait is each epoch's new iterator"]
    if pipeline is not None and pipeline.consumer == "python-loop":
        return lines + _loop_lines(starts, pipeline, shuffle, each, loop_at)
    if shuffle is None:
        lines.append(f"# starting (its threads and its buffers filling), {each}.")
    else:
        call = dataset_calls.stage_call(shuffle, "shuffle")
        buffer = _buffer_words(pipeline, shuffle)
        where = f" ({shuffle.location})" if shuffle.location else ""
        lines += [
            f"# filling the buffer of {call}{where}, {buffer}, {each}.",
            "# A shuffle after a .repeat() fills it once for the run (epochs blend at their",
            "# boundaries); its reads then run beside every step, which pays where the",
            "# steps leave cores free (a GPU's), not where they use every core.",
        ]
    lines += [
        "# Longer epochs pay it more rarely; fit keeps one iterator for the whole run where",
        f"# the dataset repeats and fit is given steps_per_epoch={starts.steps_per_epoch}.",
    ]
    return lines


def _loop_lines(
    starts: EpochStarts,
    pipeline: PipelineFacts,
    shuffle: PipelineStage | None,
    each: str,
    loop_at: str | None,
) -> list[str]:
    """A loop's epochs each make a new iterator: one for the run (the dataset repeated)
    starts once, and each epoch takes its batches from it. The loop's own ``for`` line
    rewritten where that reads the same (epoch_iterator_code), else said in words."""
    filling = "its threads and its buffers filling" + (
        ", its shuffle buffer above all" if shuffle else ""
    )
    lines = [
        f"# starting ({filling}), {each}.",
        "# One iterator for the run starts once: made before the epochs' loop from the",
        "# dataset repeated, each epoch takes its batches from it.",
    ]
    if shuffle is not None:
        # a repeat after the shuffle makes a new shuffle iterator at every pass: its
        # buffer refills all the same; only a repeat before it keeps one buffer
        call = dataset_calls.stage_call(shuffle, "shuffle")
        buffer = _buffer_words(pipeline, shuffle)
        refill = shuffle_refill(pipeline, shuffle)
        if refill is not None:
            buffer += f", about {duration(refill.seconds)} at the rate of {refill.slowest.name}"
        where = f" at {shuffle.location}" if shuffle.location else ""
        lines += [
            f"# {call}{where} still refills its buffer ({buffer}) at every pass:",
            f"# a .repeat() written before it (.repeat(){_method(call, 'shuffle')}) fills it "
            "once for the run,",
            "# and epochs then blend at their boundaries.",
        ]
    per_epoch = pipeline.cardinality or starts.steps_per_epoch
    if loop_at is None:
        return [
            *lines,
            f"# e.g. batches = iter(<dataset>.repeat()), then {per_epoch} next(batches) an epoch",
        ]
    return [*lines, *one_iterator_code(loop_at, per_epoch, pipeline)]


def _buffer_words(pipeline: PipelineFacts | None, shuffle: PipelineStage) -> str:
    """``10,000 elements``, or where the pass is shorter than the buffer, what fills it:
    ``its 3,000 elements (the whole pass; a buffer of 10,000)``."""
    if not shuffle.buffer_size:
        return "its elements"
    filled = filled_elements(pipeline, shuffle) if pipeline is not None else None
    if filled is not None and filled < shuffle.buffer_size:
        return f"its {filled:,} elements (the whole pass; a buffer of {shuffle.buffer_size:,})"
    return f"{shuffle.buffer_size:,} elements"


def _method(call: str, name: str) -> str:
    """``.shuffle(train_size)`` of ``ds.shuffle(train_size)`` as written (or rebuilt)."""
    at = call.rfind(f".{name}(")
    return call[at:] if at >= 0 else f".{call.lstrip('.')}"


def refilled_shuffle(pipeline: PipelineFacts | None) -> PipelineStage | None:
    """The pipeline's last shuffle with no repeat written before it (one that refills
    its buffer at each pass), or None. The last: its buffer fills through every stage
    under it, an earlier shuffle's fill included. A review's image pipeline shuffled its
    900 file names (milliseconds) and then, after the map that decodes them, 720 decoded
    images (half a second): the fix named the file names' shuffle."""
    if pipeline is None:
        return None
    found = None
    for stage in pipeline.stages:
        if "repeat" in stage.written_as:
            break
        if "shuffle" in stage.written_as:
            found = stage
    return found
