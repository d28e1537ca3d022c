"""placement.forced-cpu: the ``with tf.device('/CPU:0'):`` around step ops removed.

Only a block whose device names the CPU, holding the finding's line (the innermost), is changed: where it is
the statement's only context manager the block's body moves out of it (dedented), else
that manager alone is dropped. Its effect is on a GPU (no copies to the host and back
each step): on a machine without one the trial shows whether the program still runs and
computes the same, and says its speed is not measured here.
"""

from __future__ import annotations

import ast

from gpuwhy.facts import Facts
from gpuwhy.finding import Finding
from gpuwhy.trial.candidate import FixCandidate, NotTried, SourceFiles, location_parts
from gpuwhy.trial.source_edits import segment, unwrap_with, walk_at


def candidates(
    finding: Finding, facts: Facts, files: SourceFiles
) -> tuple[list[FixCandidate], list[NotTried]]:
    where = location_parts(finding.location)
    read = files.read(where[0]) if where else None
    if where is None or read is None:
        return [], [NotTried(finding.id, "its location is not in the program's files")]
    source, lines, tree = read
    blocks = [n for n in walk_at(tree, where[1]) if isinstance(n, ast.With | ast.AsyncWith)]
    for node in sorted(blocks, key=lambda n: -n.lineno):  # the innermost block first
        for k, item in enumerate(node.items):
            text = segment(source, item.context_expr)
            if "device(" in text and "cpu" in text.lower():
                edits = unwrap_with(source, lines, where[0], node, k)  # type: ignore[arg-type]
                if not edits:
                    return [], [
                        NotTried(finding.id, f"`with {text}:` is on one line with its body")
                    ]
                return [
                    FixCandidate(
                        finding.id,
                        f"the `with {text}:` block removed",
                        tuple(edits),
                        location=finding.location,
                        device_effect=True,
                    )
                ], []
    return [], [NotTried(finding.id, f"no `with tf.device(...CPU...)` at {finding.location}")]
