"""The fix for training that makes a new tf.data iterator each epoch and waits at each
one's end (rules/input/iterator_end_wait.py): one iterator for the run, each epoch one
pass of batches from it, written from the program's own loop or fit call
(source_epochs.py reads them; the trial makes the same edits, trial/kinds/
epoch_iterator.py)."""

from __future__ import annotations

from gpuwhy.facts import PipelineFacts
from gpuwhy.fixes.pipeline_code import IN_PLACE_OF
from gpuwhy.source_calls import source_lines, syntax_tree
from gpuwhy.source_epochs import (
    NotRewritten,
    epoch_loop_in,
    fit_call_at,
    fit_repeated,
    fit_validation,
    imports_itertools,
)

# what is left: the one iterator ends too, once, after the last step (a fit over the
# dataset repeated, measured: no wait between its 15 epochs, 1.43 s after its last step
# where the 15 iterators' ends had cost 0.66 s in all: the race's period grows with the
# iterator's age), which pays where epochs are many or long, not for a handful of short ones
LAST_END = (
    "# One end remains, after the last step: up to a minute, once, where TF loses its race there."
)
ONE_ITERATOR = [
    "# One iterator for the run: the dataset repeated, its iterator made once before the",
    "# epochs' loop, each epoch taking one pass of batches from it (the same elements in",
    "# the same order: repeat() reshuffles each pass as a new iterator would).",
    LAST_END,
]
FIT = [
    "# fit makes a new iterator each epoch over a dataset that ends, and frees it at the",
    "# epoch's end; over one that repeats, given steps_per_epoch, it keeps one for the run",
    "# (the same batches each epoch; a seeded shuffle's later epochs in another order).",
    LAST_END,
]

VALIDATION = [
    "# Its validation the same: a new iterator each epoch over validation_data, one for the",
    "# run over it repeated with validation_steps (each validation reads the same batches).",
]

UNKNOWN_PASS = "<batches in one pass>"


def per_pass(pipeline: PipelineFacts | None) -> int | None:
    """Batches in one pass of the dataset the loop reads: TF's count, else the reads of
    this run where its every iterator read as many (None: neither tells)."""
    if pipeline is None:
        return None
    if pipeline.cardinality:
        return pipeline.cardinality
    if pipeline.iterators > 1 and not pipeline.elements_at_least:
        each, rest = divmod(pipeline.elements, pipeline.iterators)
        if rest == 0 and each > 0:
            return each
    return None


def counted_words(pipeline: PipelineFacts | None, count: int) -> list[str]:
    """The comment that says where a count TF did not know came from."""
    if pipeline is None or pipeline.cardinality:
        return []
    return [f"# {count}: the batches each epoch read on this run (TF does not know the size)"]


def epochs_per_pass_fix(
    source: str,
    where: str,
    pipeline: PipelineFacts | None,
    validation: PipelineFacts | None = None,
) -> list[str]:
    """The fix's lines: code for the loop (or fit call) at ``where`` where it can be
    rewritten to read the same, else the change in words and why no code. ``validation``:
    fit's validation pipeline, one iterator for the run over it too."""
    path, _, number = where.rpartition(":")
    line = int(number) if number.isdigit() else 0
    count = per_pass(pipeline)
    if source == "keras-fit":
        return _fit_lines(path, line, count, pipeline, per_pass(validation))
    return [*ONE_ITERATOR, *one_iterator_code(where, count, pipeline)]


def one_iterator_code(where: str, count: int | None, pipeline: PipelineFacts | None) -> list[str]:
    """The code of one iterator for the run for the loop at ``where`` (each epoch
    ``count`` batches of it): the import where the module has none, the iterator made
    before the epochs' loop, the loop's line rewritten; or why none is written."""
    path, _, number = where.rpartition(":")
    found = epoch_loop_in(path, int(number)) if number.isdigit() else None
    if found is None or isinstance(found, NotRewritten):
        why = found.why if found is not None else "its line is not known"
        return [f"# (not written for {where}: {why})"]
    if count is None:
        each = (
            found.call_text(UNKNOWN_PASS)
            if found.call is not None
            else f"for {found.targets} in {found.epoch_read(UNKNOWN_PASS)}"
        )
        return [
            f"{found.iterator_line()}   # once, before the epochs' loop",
            f"# then each epoch: {each}   (this run did not tell how many)",
        ]
    tree = syntax_tree(path)
    imports = [] if tree is not None and imports_itertools(tree) else ["import itertools"]
    made = f"{found.iterator_line()}   # before the epochs' loop at line {found.epochs.lineno}"
    lines = source_lines(path)
    if found.call is not None and found.statement is not None and lines is not None:
        # the function's loop reads what its call gives it: the call's statement as
        # written (its assignment kept), the pass in place of the dataset
        statement = found.statement
        written = lines[statement.lineno - 1].strip()
        more = " ..." if (statement.end_lineno or statement.lineno) > statement.lineno else ""
        return [
            *imports,
            made,
            *counted_words(pipeline, count),
            f"# {path}:{statement.lineno}: {IN_PLACE_OF}{written}{more}",
            *found.statement_lines(lines, count),
        ]
    indent = " " * found.loop.col_offset
    return [
        *imports,
        made,
        *counted_words(pipeline, count),
        f"# {where}: {IN_PLACE_OF}for {found.targets} in {found.reads()}:",
        f"{indent}for {found.targets} in {found.reads(count)}:",
    ]


def _fit_lines(
    path: str,
    line: int,
    count: int | None,
    pipeline: PipelineFacts | None,
    validation_count: int | None = None,
) -> list[str]:
    tree = syntax_tree(path) if line else None
    call = fit_call_at(tree, line) if tree is not None else NotRewritten("no source")
    if isinstance(call, NotRewritten):
        n = count if count is not None else "<batches in one pass>"
        return [*FIT, f"# model.fit(<dataset>.repeat(), steps_per_epoch={n}, ...)  ({call.why})"]
    if count is None:
        return [*FIT, "# steps_per_epoch=<batches in one pass>: this run did not tell how many"]
    validating = validation_count is not None and fit_validation(call) is not None
    return [
        *FIT,
        *(VALIDATION if validating else []),
        *counted_words(pipeline, count),
        fit_repeated(call, count, validation_count),
    ]
