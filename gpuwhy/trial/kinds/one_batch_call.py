"""steps.keras-call-per-step: the loop's ``X.predict(batch)`` made
``X.predict_on_batch(batch)`` (``X.evaluate(x, y)`` made ``X.test_on_batch(x, y)``,
``X.fit(x, y, epochs=1)`` made ``X.train_on_batch(x, y)``) at the line the finding names.

The one-batch forms run the same compiled function on the same batch without the loop
around it (a dataset, an iterator, callbacks, a progress bar per call), and return the
same kind of value (NumPy arrays; the loss and metrics), but for fit, which returns a
History where train_on_batch returns the loss: a program that reads it fails the trial.
The arguments that only the loop takes (``verbose``, ``batch_size``, ``steps``,
``callbacks``) are dropped. A call given a dataset or a generator, not a batch, fails in
the trial's run and is reported so: it is no one-batch call.

The results compared are what the program prints: the variables read at a dataset's
reads are read elsewhere once predict's own reads are gone (a DCGAN's fix was refused as
"changed the results" for a batch-norm beta read at different points of the two runs,
its printed losses the same), and train_on_batch writes no Keras logs. It is judged by
the training loop's wall time per step: the steps alone leave out the calls between
them, and fit's batches become train_on_batch's calls. Calls found outside the training
steps (one batch each, many at one line) are judged by the program's own run time.
"""

from __future__ import annotations

from gpuwhy.facts import Facts
from gpuwhy.finding import Finding
from gpuwhy.rules.steps.keras_call_per_step import one_batch_call
from gpuwhy.trial.candidate import FixCandidate, NotTried, SourceFiles, source_at
from gpuwhy.trial.source_edits import Edit, calls_at, node_span, segment


def candidates(
    finding: Finding, facts: Facts, files: SourceFiles
) -> tuple[list[FixCandidate], list[NotTried]]:
    at = source_at(finding.location, files)
    if at is None:
        return [], [NotTried(finding.id, "the call is not in the program's own files")]
    path, line, source, lines, tree = at.path, at.line, at.source, at.lines, at.tree
    for method in ("predict", "evaluate", "fit"):
        for call in calls_at(tree, line, method):
            written = segment(source, call)
            found = one_batch_call(written)
            if found is None or found[0] != written:
                continue
            span = node_span(call, lines)
            edit = Edit(path, span.line, span.col, span.end_line, span.end_col, found[1])
            return [
                FixCandidate(
                    finding.id,
                    f"{found[1].split('(', 1)[0]}() for {written.split('(', 1)[0]}()",
                    (edit,),
                    location=f"{path}:{span.line}",
                    by_loop_time=True,
                    # calls outside the training steps: the whole run is what they cost
                    by_program_time=finding.evidence.get("one_batch_each") is True,
                    printed_only=True,
                )
            ], []
    return [], [
        NotTried(
            finding.id,
            f"no predict(), evaluate() or fit() call at line {line} that one batch's call can "
            "stand for (a fit of several epochs runs several updates)",
        )
    ]
