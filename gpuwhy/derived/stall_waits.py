"""What a beat of stalls is, where what gpuwhy timed in it does not say it all: the
steps' wait for input, or an activity that covered only part of the stalls.

A producer that keeps pace only every few steps makes the steps that wait on a beat: a
``PyDataset`` whose two workers each make a batch in 10 ms, read by steps of 2 ms, makes
every second step wait 8 ms, with nothing gpuwhy times running in it. Fit's wait is read
from the gaps between its reads (tf.data's timer or the generator's), not step by step,
so it is the time that says so: a wait that covers most of the beat's lost time is the
beat. The rule (steps.periodic-stall) leaves such a beat to input.bound, and the Stalls
line names it for what it is; both ask here.
"""

from __future__ import annotations

from gpuwhy.facts import LoopStalls, StallBeat, StepFacts
from gpuwhy.formatting import GAP_SOURCES

# Below this share of a beat's time, the activity that overlapped most of it is said
# as a part of the stalls, not as what they are (the Stalls line and the rule alike)
PARTLY_COVERED = 0.5

# The share of a beat's lost time fit's measured input wait must cover for the beat to
# be the waits themselves
WAIT_COVERS = 0.8


def input_waits(steps: StepFacts | None, loop: LoopStalls, beat: StallBeat) -> bool:
    """Whether ``beat`` (stalls inside ``loop``'s steps with nothing timed in them) is the
    steps' measured wait for input: the same loop, a wait read from the gaps, and enough
    of it to cover ``WAIT_COVERS`` of the beat's time."""
    if steps is None or loop.between_steps or beat.kind is not None:
        return False
    if steps.source != loop.source or steps.input_wait_source not in GAP_SOURCES:
        return False
    if not steps.input_wait_fraction:
        return False
    return steps.input_wait_fraction * steps.total_s >= WAIT_COVERS * beat.lost_s
