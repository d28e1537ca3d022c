"""``gpuwhy run SCRIPT``'s mode: the script run as ``python SCRIPT`` would (script.py),
watched by a Session (session.py) from before its first line to its end, with the live
metrics published while it runs. The command only parses options and writes the record.
"""

from __future__ import annotations

import gc
import types
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import gpuwhy.export as export
from gpuwhy.export.metrics_options import MetricsOptions
from gpuwhy.modes.run.script import RunSteps, ScriptEnding, report_steps
from gpuwhy.modes.run.session import Session
from gpuwhy.record import Record
from gpuwhy.redact import mask_argv

if TYPE_CHECKING:  # imported where metrics are asked for: most runs publish none
    from gpuwhy.export.live import LiveMetrics

# Called once when the script has ended, with what makes its record: the caller decides
# when (and inside which error handling) the collectors are stopped and the rules run.
ReportRecord = Callable[[Callable[[], Record]], None]


def watched_steps(
    script: str,
    script_args: Sequence[str],
    code: types.CodeType,
    *,
    options: Mapping[str, Any],
    metrics: MetricsOptions,
    report: ReportRecord,
    stop_after: float | None = None,
) -> RunSteps[ScriptEnding]:
    """Run the compiled ``code`` of ``script`` inside a Session, then ``report`` its
    record once (also when the script ends the process with ``os._exit`` or is
    interrupted); returns how the script ended, for the caller to end as it did. As
    steps, which the caller runs with :func:`~gpuwhy.modes.run.script.drive`: this
    frame is off the stack the script runs on (TensorFlow reads every frame of it at
    each eager op).

    ``options``: the Session's, by name (the collectors' options); ``metrics``: where to
    publish live metrics (nothing when not ``metrics.wanted``); ``stop_after``: seconds
    after which the script is stopped (its bounded part, reported as such).
    """
    session = Session(command=[script, *script_args], **options)
    live: LiveMetrics | None = None

    def stop(ended: str, exit_code: int, error: str | None) -> Record:
        record = session.stop(ended, exit_code, error)
        if live is not None:
            live.finish(record)
        return record

    def report_ending(ended: str, exit_code: int, error: str | None) -> None:
        report(lambda: stop(ended, exit_code, error))

    session.start()
    # Everything made so far is the interpreter's and gpuwhy's (its modules, collectors
    # and hooks), alive to the end: out of the collector's generations, as gc.freeze() is
    # meant for. The program's full collections then walk only its own objects and
    # TensorFlow's, as under `python` (they walked 20-30k more of gpuwhy's), their pacing
    # (new long-lived objects against those already old) is python's, and the process
    # ends 0.05 s sooner (the interpreter's last collections skip them). The script's
    # __main__ and everything it makes come after: the heap census still sees them.
    gc.freeze()
    if metrics.wanted:
        assert session.t0 is not None
        command = " ".join(mask_argv([script, *script_args]))  # the label, masked
        live = export.LiveMetrics(metrics, "run", command, session.t0, session.live).start()
    return (yield from report_steps(script, script_args, code, report_ending, stop_after))
