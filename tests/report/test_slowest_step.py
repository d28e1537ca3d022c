"""The HTML's slowest step says how much of it gpuwhy's own pause held: a heap census
on the program's thread made a 317 ms step of a 42 ms loop in a new user's Keras fit,
which the page showed as the program's slowest step."""

from __future__ import annotations

from gpuwhy.facts import LoopStalls, Stall, StallFacts, StepFacts
from gpuwhy.report.run.html_sections import slowest_step

STEPS = StepFacts(
    source="keras-fit",
    marker="Model.fit (train.py:40)",
    count=6,
    warmup=1,
    starts=(0.5, 0.55, 0.6, 0.65, 0.97, 1.01),
    durations=(0.3, 0.04, 0.05, 0.317, 0.04, 0.045),
)


def _stalls(causes: tuple[tuple[str, float], ...], start_s: float = 0.65) -> StallFacts:
    loop = LoopStalls(
        source="keras-fit",
        name="Model.fit at train.py:40",
        between_steps=False,
        count=1,
        loop_steps=6,
        loop_s=1.1,
        typical_step_s=0.045,
        stall_s=0.317,
        lost_s=0.27,
        lost_share=0.25,
        first=(Stall(step=3, start_s=start_s, seconds=0.317, causes=causes),),
    )
    return StallFacts(loops=(loop,))


def test_the_part_gpuwhy_held_is_said_to_be_its_own():
    said = slowest_step(STEPS, _stalls((("gpuwhy", 0.2979),)))
    assert said == (
        "317.0 ms at 0.65 s (call 4), 297.9 ms of it gpuwhy's own pause (not the program's)"
    )


def test_a_stall_of_the_program_s_own_or_of_another_step_adds_nothing():
    plain = "317.0 ms at 0.65 s (call 4)"
    assert slowest_step(STEPS) == plain
    assert slowest_step(STEPS, _stalls((("gc", 0.2),))) == plain
    assert slowest_step(STEPS, _stalls((("gpuwhy", 0.29),), start_s=0.97)) == plain
