"""Nothing lost: every program and saved GPU record of the corpus gives exactly the
findings written next to it, at their severities, each pointing at the program's own
code. See tests/corpus/corpus.py for the format and how to print what a program gives."""

from __future__ import annotations

import os

import pytest

from gpuwhy.library_files import KNOWN_LIBRARY_FILES
from gpuwhy.rules import ALL_RULES
from tests.corpus.corpus import Entry, differences, entries, outside_the_program, run

ENTRIES = entries()

# Ids no corpus entry gives yet, each with the reason: the coverage test below fails when
# one of them gains an entry (move it out of here) or a new rule has neither.
NOT_COVERED = {
    "distribute.collective-bound": "needs a multi-GPU recording with collective kernels",
    "distribute.cpu-starved-input": "needs a host whose cores the pipeline saturates while "
    "the run is input-bound: here the host's load decides it, not the program",
    "distribute.input-sharding": "needs workers started by a launcher (tests/commands/"
    "test_merge_multiworker.py runs them)",
    "distribute.replica-batch": "needs a strategy over several GPUs",
    "distribute.straggler": "needs several workers (tests/commands/test_merge_multiworker.py)",
    "distribute.unbalanced-ps": "needs a parameter-server cluster",
    "distribute.undistributed-input": "needs a strategy over several GPUs",
    "env.ptx-jit": "needs a GPU whose architecture the build lacks",
    "launch.host-bound": "needs a GPU capture of a launch-bound TF program",
    "memory.near-limit": "needs a recording of a GPU near its memory limit",
    "placement.measured-cpu-ops": "needs a GPU capture with ops on the host",
    "placement.host-transfers": "its CPU-side causes are named by other findings; what is "
    "left (a variable created under tf.device('/CPU:0'), a summary op each step) the placer "
    "cannot tell from the default on a CPU-only machine, or needs TensorBoard installed",
}


def _id(entry: Entry) -> str:
    return entry.name


@pytest.fixture(scope="module", params=ENTRIES, ids=_id)
def result(request):
    entry: Entry = request.param
    code, found, tail = run(entry)
    lines = differences(entry, found)
    if lines and entry.is_program:
        # A program is timed on a shared machine: a difference is only believed when a
        # second run shows it again (a finding truly lost is lost in both).
        code, found, tail = run(entry)
        lines = differences(entry, found)
    return entry, code, found, tail, lines


def test_it_runs_to_the_end(result):
    """A program exits as it does under python (0); a report, 1 where it has a high
    finding or no usable GPU (the exit status a CI gate reads), else 0."""
    entry, code, found, tail, _ = result
    allowed = (0,) if entry.is_program else (0, 1)
    assert code in allowed, f"{entry.name} exited {code}:\n{tail}"


def test_it_gives_the_findings_written_next_to_it(result):
    entry, _, found, tail, lines = result
    assert not lines, (
        f"{entry.name} ({entry.path.relative_to(entry.path.parents[2])}):\n  "
        + "\n  ".join(lines)
        + "\nA change that loses or adds a finding is a regression; an expectation "
        "changes only in a commit that says why.\n" + tail.rpartition("-- facts --")[2]
    )


def test_each_location_is_in_the_users_code(result):
    entry, _, found, _, _ = result
    if entry.is_program:
        assert outside_the_program(entry, found) == []
    else:
        # a capture names frames by base name: a framework's file, or any path installed
        libraries = ("site-packages", "dist-packages", "/gpuwhy/", "/tensorflow/", "/keras/")
        assert [
            f.location
            for f in found
            if f.location
            and (
                any(p in f.location for p in libraries)
                or os.path.basename(f.location.rpartition(":")[0]) in KNOWN_LIBRARY_FILES
            )
        ] == []


def test_every_rule_has_a_corpus_entry_or_a_reason():
    covered = {e.id for entry in ENTRIES for e in entry.expected if not e.optional}
    ids = {rule.id for rule in ALL_RULES if rule.status != "removed"}
    assert sorted(ids - covered - set(NOT_COVERED)) == []
    assert sorted(covered & set(NOT_COVERED)) == []
    assert sorted(set(NOT_COVERED) - ids) == []
