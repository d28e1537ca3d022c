"""A finding whose measure sits within a fifth of its rule's line says so in its evidence:
one run's report does not present as settled what the next run may not give."""

from gpuwhy.finding import NEAR_KEY
from gpuwhy.rules import run_rules
from gpuwhy.rules.input.bound import InputBound
from gpuwhy.rules.thresholds import loosened, shifted
from tests import builders_tfdata as t


def _bound(wait: float):
    facts = t.facts(t.pipeline(t.tfrecord(), t.parse(), bottleneck=1), steps=t.fit_steps(wait))
    findings, _ = run_rules(facts)
    return next(f for f in findings if f.id == "input.bound")


def test_a_wait_just_over_the_line_is_marked_near_it():
    near = _bound(0.055)  # medium from 5 %: within a fifth of it
    assert near.severity == "medium"
    assert "not at all" in near.evidence[NEAR_KEY]


def test_a_wait_far_over_the_line_is_not_marked():
    far = _bound(0.12)
    assert far.severity == "medium" and NEAR_KEY not in far.evidence


def test_a_wait_just_over_the_high_line_holds_only_at_medium_when_stricter():
    high = InputBound.options["high_at"]
    near = _bound(high * 1.05)
    assert near.severity == "high"
    assert "only at medium" in near.evidence[NEAR_KEY]


def test_floors_rise_and_ceilings_fall_when_stricter():
    options = shifted(InputBound, 0.2)
    assert options is not None
    assert options["medium_at"] == InputBound.options["medium_at"] * 1.2
    assert loosened(InputBound)["medium_at"] == InputBound.options["medium_at"] * 0.8
