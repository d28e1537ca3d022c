"""``gpuwhy.KerasCallback``: the same watching as ``gpuwhy run``, from inside ``model.fit``.

For users who would rather add one callback than change how they launch: the session
starts when training begins and stops when it ends, then the report is printed (or
kept in ``.record`` with ``print_report=False``). Keras is imported only when the
callback is created, never by ``import gpuwhy``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gpuwhy.collect.registry import checked_options
from gpuwhy.modes.run.session import Session
from gpuwhy.tfapi.frames import user_location

if TYPE_CHECKING:
    from gpuwhy.record import Record


def make_callback(
    options: Mapping[str, Any],
    print_report: bool = True,
    json_path: str | None = None,
    verbose: bool = False,
) -> Any:
    """``options``: the session's (``hz``, ``audit``, ``eager`` ...), refused here, when
    the callback is made, rather than when training begins."""
    checked_options(options)
    import keras

    class KerasCallback(keras.callbacks.Callback):
        """Watches one ``fit`` call; ``record`` holds the diagnosis afterwards."""

        def __init__(self) -> None:
            super().__init__()
            self.session: Session | None = None
            self.record: Record | None = None

        def on_train_begin(self, logs=None):
            self.session = Session(**options).start()
            self.session.steps.mark_fit_start(user_location())

        def on_train_end(self, logs=None):
            if self.session is None:
                return
            self.record = self.session.stop()
            if json_path:
                self.record.save(json_path)
            if print_report:
                self.session.report(verbose=verbose, file=sys.stderr)

    return KerasCallback()
