"""The datasets a script iterates, caught while ``gpuwhy fix --input`` runs it.

Two hooks record where each dataset was created and which datasets the script iterated
(``for x in ds``, ``iter(ds)``, Keras' epoch iterators); wrappers a library put around
the user's dataset (Keras, tf.distribute) are looked through. Each distinct dataset is
optimised the first time the script iterates it, inside that call: its files, temporary
directories and Python objects are alive then, and may not be once the script ends
(``with tempfile.TemporaryDirectory()`` around training).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpuwhy import own_stderr
from gpuwhy.tfapi.tfdata import stages


class StopScript(SystemExit):
    """Ends the script at its first iterator (``--stop-early``): a SystemExit(0), so the
    runner reports a clean exit and prints no traceback."""

    def __init__(self) -> None:
        super().__init__(0)


@dataclass
class Captured:
    dataset: Any
    created_at: str | None
    iterated_at: list[str] = field(default_factory=list)
    iterators: int = 0
    result: Any = None  # the OptimizeResult, measured at the first iteration
    error: BaseException | None = None


class Capture:
    """The user's datasets the script iterated, in the order it first iterated them, each
    passed to ``optimise`` when first iterated (``optimise`` None: captured only)."""

    def __init__(self, stop_early: bool, optimise: Callable[[Any], Any] | None = None) -> None:
        self.stop_early = stop_early
        self.optimise = optimise
        self.found: dict[int, Captured] = {}
        self.library_only: list[str] = []
        self.patches: list[Any] = []
        self.failed: str | None = None
        self._optimising = False

    def install(self, _module: Any = None) -> None:
        try:
            self.patches = stages.install_creation_sites() + stages.install_iterator_capture(
                self.seen
            )
        except Exception as e:  # noqa: BLE001 - a TF without these internals
            self.failed = f"cannot hook tf.data in this TensorFlow: {type(e).__name__}: {e}"
        from gpuwhy.tfapi.frames_hidden import hide_gpuwhy_frames

        self.patches.append(hide_gpuwhy_frames())  # undone by uninstall() with the others

    def seen(self, dataset: Any, where: str | None) -> None:
        if self._optimising:
            return  # the measuring's own iterators
        users = stages.user_dataset(dataset)
        if users is None:
            self.library_only.append(where or "?")
            return
        entry = self.found.get(id(users))
        if entry is None:
            entry = self.found[id(users)] = Captured(users, stages.creation_site(users))
            new = True
        else:
            new = False
        entry.iterators += 1
        if where and where not in entry.iterated_at:
            entry.iterated_at.append(where)
        if new and self.optimise is not None:
            self._optimise_now(entry, where)
        if self.stop_early:
            raise StopScript()

    def _optimise_now(self, entry: Captured, where: str | None) -> None:
        """Measure while the pipeline's inputs exist; never raise into the script."""
        assert self.optimise is not None
        own_stderr.say(
            f"gpuwhy fix: measuring the dataset created at {entry.created_at or '?'}"
            f" (original, rewritten, ideal) before the script reads it at "
            f"{where or '?'} ..."
        )
        self._optimising = True
        try:
            entry.result = self.optimise(entry.dataset)
        except Exception as e:  # noqa: BLE001 - reported after the script, as it was
            entry.error = e
        finally:
            self._optimising = False

    def uninstall(self) -> None:
        for patch in reversed(self.patches):
            patch.undo()
        self.patches = []

    def datasets(self) -> tuple[list[Captured], list[Captured]]:
        """(datasets to optimise, views of them: ``ds.take(1)`` over a captured ``ds``)."""

        entries = list(self.found.values())
        ids = {id(e.dataset) for e in entries}
        main: list[Captured] = []
        views: list[Captured] = []
        for entry in entries:
            below = [s.dataset for s in stages.read_chain(entry.dataset)[:-1]]
            (views if any(id(d) in ids for d in below) else main).append(entry)
        return main, views
