"""host.memory-growth from constructed facts: the memory's line over the training
windows, and what the heap censuses named: the finding names the container and its
growth per step, and its fix is written in the program's own names; without a named
container (or one that explains too little of the growth) it says what it said before."""

from dataclasses import replace

from gpuwhy.facts import Facts, GrowingObject, RunTimeline, RunWindow, StepFacts
from gpuwhy.rules.host.memory_growth import FIX, MemoryGrowth

MiB = 2**20


def facts(*growing: GrowingObject, per_s: float = 8 * MiB) -> Facts:
    """60 windows of 1 s, 20 steps each, memory from 600 MiB rising ``per_s``."""
    windows = tuple(
        RunWindow(start_s=float(i), steps=20, host_rss_max_bytes=int(600 * MiB + per_s * i))
        for i in range(60)
    )
    timeline = RunTimeline(width_s=1.0, run_s=60.0, windows=windows, growing=growing)
    steps = StepFacts(source="tf-data", marker="x", count=1200, first_step_s=0.0)
    return Facts(steps=steps, timeline=timeline)


def check(f: Facts, **options):
    return MemoryGrowth().check(f, {**MemoryGrowth.options, **options})


LOSSES = GrowingObject(
    what="list", name="losses", holder="global of train.py", where="train.py:41",
    written="losses.append(loss)", length_first=200, length_last=1000, first_at_s=10.0,
    last_at_s=50.0, element_type="EagerTensor", element_detail="float32 ()",
    element_bytes=400_000,  # as if each held what the memory gains a step (8 MiB/s, 20 steps/s)
)  # fmt: skip


def test_a_list_of_scalar_tensors_is_named_and_fixed_with_float_of_the_program_s_value():
    (finding,) = check(facts(LOSSES))
    assert finding.title.endswith(
        "the list `losses` (global of train.py, added to at train.py:41) holds 1,000 "
        "EagerTensor objects (float32 () each), +1 per step"
    )
    assert "losses.append(float(loss))   # instead of losses.append(loss)" in finding.fix
    assert finding.evidence["growing_per_step"] == 1.0
    assert finding.evidence["growing_where"] == "train.py:41"


def test_an_attribute_keeps_its_receiver_as_written():
    grown = replace(LOSSES, holder="attribute of Trainer", written="self.losses.append(out)")
    (finding,) = check(facts(grown))
    assert "self.losses.append(float(out))" in finding.fix
    larger = replace(grown, element_detail="float32 (1024, 512)")
    (finding,) = check(facts(larger))
    assert "self.losses_mean.update_state(out)   # instead of self.losses.append(out)" in (
        finding.fix
    )
    assert "self.losses.append(out.numpy())" in finding.fix


def test_a_dict_keyed_per_step_is_fixed_by_keeping_its_last_entries():
    grown = replace(
        LOSSES, what="dict", name="seen", written="seen[step] = logs", element_type="dict",
        element_detail=None, element_bytes=400_000, key_type="int",
    )  # fmt: skip
    (finding,) = check(facts(grown))
    assert "the dict `seen`" in finding.title
    assert "while len(seen) > 100:" in finding.fix and "del seen[next(iter(seen))]" in finding.fix
    grown = replace(grown, written="self.seen[step] = out.numpy()", element_type="ndarray")
    (finding,) = check(facts(grown))
    assert "while len(self.seen) > 100:" in finding.fix


def test_a_container_that_explains_little_of_the_growth_is_not_named():
    small = replace(LOSSES, element_type="float", element_detail=None, element_bytes=24)
    (finding,) = check(facts(small))
    assert finding.title.endswith("something keeps what each step makes")
    assert finding.fix == FIX and "growing" not in finding.evidence


def test_nothing_named_keeps_the_finding_as_it_was():
    (finding,) = check(facts())
    assert finding.title.endswith("something keeps what each step makes") and finding.fix == FIX
    assert check(facts(LOSSES, per_s=0.0)) == []  # no growth: nothing, named or not
