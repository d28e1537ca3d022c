"""input.iterator-end-wait: one tf.data iterator for the run in place of one per epoch,
written into the program where the finding's loop (or fit call) is.

A loop: ``NAME_batches = iter(DATASET.repeat())`` before the epochs' loop, and the loop
reading ``itertools.islice(NAME_batches, N)`` where it read the dataset (N the batches
of one pass: TF's count, or what each epoch read on the first run); ``import
itertools`` where the module has none. fit: its dataset ``.repeat()``-ed and
``steps_per_epoch=N``. A loop reads the same elements in the same order, so its results
are compared each value; fit the same elements each epoch, but Keras draws one shuffle
order more per epoch than a repeated dataset does (a seeded shuffle's second epoch read
[5, 4, 0, ...] against [1, 0, 7, ...]), so its results are compared by their means.
Judged by the loop's wall time per step:
the waits are between the steps (at each epoch's end), which the steps' own times leave
out, and so the one end left after the last step (said with the fix: LAST_END). How
long an end waits is TF's race: where the first runs lost none, the fix has nothing to
show and is not kept."""

from __future__ import annotations

from dataclasses import replace

from gpuwhy.facts import Facts
from gpuwhy.finding import Finding
from gpuwhy.source_epochs import (
    NotRewritten,
    epoch_loop,
    fit_call_at,
    fit_data,
    fit_validation,
    imports_itertools,
)
from gpuwhy.trial.candidate import FixCandidate, NotTried, SourceAt, SourceFiles, source_at
from gpuwhy.trial.source_edits import Edit, indent_of, node_span, set_keywords, top_line

NOTE = (
    "the one iterator still ends after the last step: up to a minute, once, where TF "
    "loses its race there (not in the loop's time this trial judges)"
)
FIT_TOLERANCE = 0.1
FIT_WHY = (
    "each quantity's mean over the run: Keras draws one shuffle order more per epoch than "
    "the repeated dataset does, so a seeded shuffle's later epochs come in another order; "
    "the curves match, not each point"
)


def candidates(
    finding: Finding, facts: Facts, files: SourceFiles
) -> tuple[list[FixCandidate], list[NotTried]]:
    at = source_at(finding.location, files)
    if at is None:
        return [], [NotTried(finding.id, "the loop is not in the program's own files")]
    count = finding.evidence.get("batches_per_pass")
    if not isinstance(count, int) or count <= 0:
        return [], [
            NotTried(finding.id, "the batches in one pass are unknown (TF's count and the run's)")
        ]
    path, line, source, lines, tree = at.path, at.line, at.source, at.lines, at.tree
    if finding.evidence.get("loop_source") == "keras-fit":
        return _fit(finding, at, count)
    found = epoch_loop(tree, line, source)
    if isinstance(found, NotRewritten):
        return [], [NotTried(finding.id, f"the loop at {path}:{line}: {found.why}")]
    epochs_line = found.epochs.lineno
    indent = indent_of(lines[epochs_line - 1])
    span = node_span(found.dataset, lines)
    edits = [
        Edit(path, epochs_line, 0, epochs_line, 0, f"{indent}{found.iterator_line()}\n"),
        Edit(path, span.line, span.col, span.end_line, span.end_col, found.epoch_read(count)),
    ]
    if not imports_itertools(tree):
        top = top_line(tree, source)
        edits.insert(0, Edit(path, top, 0, top, 0, "import itertools\n"))
    what = f"one iterator for the run: {found.dataset_text} repeated, {count} batches an epoch"
    return [_candidate(finding, what, edits, at)], []


def _candidate(
    finding: Finding, what: str, edits: list[Edit], at: SourceAt, **more
) -> FixCandidate:
    """Judged on the loop's wall time per step: the waits are between the steps."""
    location = f"{at.path}:{at.line}"
    return FixCandidate(
        finding.id, what, tuple(edits), location=location, by_loop_time=True, note=NOTE, **more
    )


def _fit(finding: Finding, at: SourceAt, count: int) -> tuple[list[FixCandidate], list[NotTried]]:
    path, line, source, lines = at.path, at.line, at.source, at.lines
    call = fit_call_at(at.tree, line)
    if isinstance(call, NotRewritten):
        return [], [NotTried(finding.id, f"the fit call at {path}:{line}: {call.why}")]
    x = fit_data(call)
    assert x is not None  # fit_call_at found it
    s = node_span(x, lines)
    edits = [Edit(path, s.end_line, s.end_col, s.end_line, s.end_col, ".repeat()")]
    keywords = {"steps_per_epoch": str(count)}
    what = f"fit over its dataset repeated, steps_per_epoch={count}"
    validation = fit_validation(call)
    validation_count = finding.evidence.get("validation_batches_per_pass")
    repeated = None
    if validation is not None and isinstance(validation_count, int) and validation_count > 0:
        v = node_span(validation, lines)
        repeated = Edit(path, v.end_line, v.end_col, v.end_line, v.end_col, ".repeat()")
        keywords["validation_steps"] = str(validation_count)
        what += f", its validation too, validation_steps={validation_count}"
    added = set_keywords(source, lines, path, call, **keywords)
    if repeated is not None:
        # the keywords go after the last argument: where validation_data is it, one edit
        # writes its repeat() and them, in that order
        same = [e for e in added if e.span == repeated.span]
        if same:
            added = [replace(e, text=repeated.text + e.text) if e in same else e for e in added]
        else:
            edits.append(repeated)
    edits += added
    fit = _candidate(
        finding, what, edits, at, tolerance=FIT_TOLERANCE, tolerance_why=FIT_WHY, by_mean=True
    )
    return [fit], []
