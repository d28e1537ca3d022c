"""The run mode's registry: a collector declared like the others fills its section, in
order, live and at the end; one that fails leaves a note and every other section. Real
TensorFlow loops in this process, watched by real sessions."""

import dataclasses

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from gpuwhy.collect.inprocess.base import Collector, Gathering  # noqa: E402
from gpuwhy.collect.registry import COLLECTORS  # noqa: E402
from gpuwhy.facts import Facts, TaskFacts  # noqa: E402
from gpuwhy.modes.run.session import Session  # noqa: E402


class StepsSeen(Collector):
    """A test collector in the place of section ``task``: it reads section ``steps``,
    filled before it, and counts the times TensorFlow was announced to it."""

    name = section = "task"
    reads_from = ("steps",)
    what = "steps seen"
    live = True
    needs_tensorflow = True

    def __init__(self) -> None:
        self.announced = 0

    def on_tensorflow(self) -> None:
        self.announced += 1

    def fill(self, gathering: Gathering) -> TaskFacts:
        steps = gathering.facts.steps
        counted = steps.count if steps is not None else 0
        return TaskFacts(name=f"{counted}-steps-{self.announced}", source="test")


class Broken(Collector):
    """Fails in every hook it has and when asked for its section."""

    name = "broken"
    section = "input_fixes"
    what = "broken collector"
    live = True

    def on_tensorflow(self) -> None:
        raise RuntimeError("no hook today")

    def fill(self, gathering: Gathering) -> None:
        raise RuntimeError("nothing to give")


def without_task(*extra: type[Collector]) -> tuple[type[Collector], ...]:
    return (*(kind for kind in COLLECTORS if kind.section != "task"), *extra)


def train(session: Session, live: list | None = None) -> None:
    ds = tf.data.Dataset.from_tensor_slices(np.arange(48, dtype="float32")).batch(4)
    w = tf.Variable(1.0)

    @tf.function
    def step(x):
        w.assign_add(tf.reduce_sum(x) * 1e-3)

    with session:
        for i, x in enumerate(ds):
            step(x)
            if live is not None and i == 9:
                live.append(session.live())


def test_every_collector_declares_a_section_of_facts_once():
    fields = {f.name for f in dataclasses.fields(Facts)}
    sections = [kind.section for kind in COLLECTORS if kind.section is not None]
    assert set(sections) <= fields and len(sections) == len(set(sections))
    assert all(kind.what for kind in COLLECTORS if kind.section is not None)


def test_a_registered_collector_fills_its_section_live_and_at_the_end():
    session = Session(hz=5, audit=False, collectors=without_task(StepsSeen))
    live: list = []
    train(session, live)
    ((facts, loops),) = live
    assert facts.task is not None and facts.task.source == "test"
    published = sum(counted.count for _, counted in loops)
    assert facts.steps is not None and published == facts.steps.count - facts.steps.warmup
    record = session.record
    assert record.facts.task == TaskFacts(name="12-steps-1", source="test")
    assert record.facts.steps.count == 12 and record.facts.program.notes == ()


def test_a_failing_collector_leaves_a_note_and_every_other_section():
    session = Session(hz=5, audit=False, collectors=(*COLLECTORS, Broken))
    live: list = []
    train(session, live)
    assert live[0][0].input_fixes is None  # a live update skips it, silently
    facts = session.record.facts
    assert facts.program.notes == (
        "Broken.on_tensorflow failed: RuntimeError: no hook today",
        "broken collector failed: RuntimeError: nothing to give",
    )
    assert facts.input_fixes is None
    assert facts.steps.count == 12 and facts.tfdata.pipelines and facts.tracing.functions
    assert facts.task is not None and facts.environment is not None


def test_under_gpuwhy_debug_a_section_failing_raises(monkeypatch):
    monkeypatch.setenv("GPUWHY_DEBUG", "1")
    session = Session(hz=5, audit=False, collectors=(*COLLECTORS, Broken))
    with pytest.raises(RuntimeError, match="nothing to give"):
        train(session)
