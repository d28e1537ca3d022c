"""Captures derived from the committed ones (tests/data/xplane/) by leaving events out,
written as the profiler writes them: what a capture of the same program run another way
holds, without running it again."""

from __future__ import annotations

from pathlib import Path

from gpuwhy.collect.capture import xspace


def without_events(source: Path, folder: Path, prefix: str) -> Path:
    """A copy of the capture ``source`` without the events whose names start with
    ``prefix``, as a TensorBoard log dir under ``folder`` (its plugins/profile/<run>/);
    ``folder`` is returned."""
    _, _, xspace_class = xspace.classes()
    space = xspace_class()
    space.ParseFromString(source.read_bytes())
    for plane in space.planes:
        dropped = {i for i, m in plane.event_metadata.items() if m.name.startswith(prefix)}
        for line in plane.lines:
            kept = [event for event in line.events if event.metadata_id not in dropped]
            if len(kept) != len(line.events):
                del line.events[:]
                line.events.extend(kept)
    run = folder / "plugins" / "profile" / source.parent.name
    run.mkdir(parents=True)
    (run / source.name).write_bytes(space.SerializeToString())
    return folder
