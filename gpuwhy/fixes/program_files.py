"""The program's own source files that a run's facts name: where a fix may look for
what the program wrote (a NumPy array made float64, a class made with ``workers=``).

A location in the facts is always the user's code (the outermost frame of their files,
never a library's), so the files they name are the program's: the script, the modules
its tf.functions were defined in, and those its pipelines' stages were written in (a
``keras.utils.PyDataset`` in a module of its own).
"""

from __future__ import annotations

from gpuwhy.facts import Facts


def located_files(facts: Facts) -> list[str]:
    """The script, then each file a location of the run names, once each, in that
    order (a record read on another machine names files that are not here: their
    readers find none)."""
    script = [facts.program.command[0]] if facts.program and facts.program.command else []
    found: list[str] = []
    if facts.placement is not None:
        found += [f.location for f in facts.placement.functions if f.location]
    if facts.tracing is not None:
        found += [f.location for f in facts.tracing.functions if f.location]
    if facts.tfdata is not None:
        found += [
            where
            for p in facts.tfdata.pipelines
            for s in p.stages
            for where in (s.location, s.function_location)
            if where
        ]
    paths = [*script, *(where.rpartition(":")[0] for where in found)]
    return [p for p in dict.fromkeys(paths) if p]
