"""The collectors' registry: the run order follows from what each collector reads, a
read that names no collector (or a circle) is refused, a read not declared fails, and
each option is declared once, by the collector that takes it, for the command line, the
Python API and RunOptions alike. Real collector classes and a real argparse parser."""

import argparse
import subprocess
import sys

import pytest

from gpuwhy.collect.inprocess.base import Collector, Gathering, Option, RunOptions
from gpuwhy.collect.inprocess.guard import Guard, Policy
from gpuwhy.collect.registry import (
    COLLECTORS,
    RegistryError,
    checked_options,
    run_options,
    run_order,
)
from gpuwhy.facts import Facts, ProgramFacts, TaskFacts


def kind(name: str, reads: tuple[str, ...] = (), section: str | None = None, **more):
    return type(name, (Collector,), {"name": name, "reads_from": reads, "section": section, **more})


def test_every_collector_comes_after_the_collectors_it_reads():
    names = [k.name for k in COLLECTORS]
    for k in COLLECTORS:
        for read in k.reads_from:
            assert names.index(read) < names.index(k.name), (k.name, read)
    assert names[0] == "steps"  # first to start: the others' hooks feed its loops
    assert len(set(names)) == len(names)


def test_the_order_is_the_listing_where_no_read_decides():
    a, b, c = kind("a", ("c",)), kind("b"), kind("c")
    assert [k.name for k in run_order([a, b, c])] == ["b", "c", "a"]
    assert [k.name for k in run_order([b, c])] == ["b", "c"]


def test_a_read_of_no_collector_a_circle_and_a_name_used_twice_are_refused():
    with pytest.raises(RegistryError, match="no collector has that name: a reads 'gone'"):
        run_order([kind("a", ("gone",))])
    with pytest.raises(RegistryError, match="in a circle: a reads b, b reads a"):
        run_order([kind("a", ("b",)), kind("b", ("a",))])
    with pytest.raises(RegistryError, match=r"one name each: \['a'\]"):
        run_order([kind("a"), kind("a")])
    steps = kind("steps", section="steps")
    with pytest.raises(RegistryError, match="amends only a section it reads: b amends 'steps'"):
        run_order([steps, kind("b", amends=("steps",))])
    run_order([steps, kind("b", ("steps",), amends=("steps",))])


def _gathering(collectors, facts: Facts) -> Gathering:
    return Gathering(RunOptions(), collectors, Guard(Policy.REPORT, []), 0.0, 1.0, facts)


def test_a_collector_sees_only_the_sections_it_reads_and_fills_only_its_own():
    program = kind("program", section="program")
    task = kind("task", ("program",), section="task")
    other = kind("other", section="stalls")
    made = [program(), task(), other()]
    facts = Facts(
        program=ProgramFacts(command=("x.py",)), task=TaskFacts(name="w-0", source="test")
    )
    gathering = _gathering(made, facts)
    gathering.ask(made[2])  # reads nothing
    assert gathering.facts.program is None and gathering.facts.task is None
    with pytest.raises(LookupError, match="other reads 'program' without declaring it"):
        gathering.peer(program)
    with pytest.raises(LookupError, match="other fills 'task' without declaring it"):
        gathering.fill("task", None)
    gathering.ask(made[1])
    assert gathering.facts.program == facts.program and gathering.peer(program) is made[0]
    gathering.ask(None)  # the session sees everything
    assert gathering.facts == facts


def test_each_option_is_declared_once_and_checked_where_it_is_given():
    options = run_options()
    names = [o.name for o in options]
    assert len(set(names)) == len(names) and len({o.flag for o in options}) == len(names)
    assert {"audit", "eager", "eager_duty", "hz", "target"} <= set(names)
    parser = argparse.ArgumentParser()
    for option in options:
        option.add_to(parser)
    given = vars(parser.parse_args(["--no-audit", "--hz", "5", "--target", "H100"]))
    chosen = RunOptions(("train.py",), checked_options({n: given[n] for n in names}))
    hz = next(o for o in options if o.name == "hz")
    assert chosen[hz] == 5.0 and chosen.values["audit"] is False
    assert RunOptions()[hz] == 10.0  # not given: its default
    with pytest.raises(ValueError, match="--hz must be between 0 and 100"):
        checked_options({"hz": 0})
    with pytest.raises(ValueError, match="no GPU named 'Voodoo 2'"):
        checked_options({"target": "Voodoo 2"})
    with pytest.raises(TypeError, match="unknown option hertz; the options are"):
        checked_options({"hertz": 5})


def test_an_option_declared_by_a_new_collector_reaches_the_parser_and_the_session():
    loud = Option("loud", "--loud", False, "say more", type=lambda text: text == "yes")
    extra = kind("extra", options=(loud,))
    parser = argparse.ArgumentParser()
    for option in run_options((*COLLECTORS, extra)):
        option.add_to(parser)
    assert parser.parse_args(["--loud", "yes"]).loud is True
    assert checked_options({"loud": True}, (*COLLECTORS, extra)) == {"loud": True}


def test_the_registry_and_every_collector_import_no_tensorflow():
    """The reports read the collectors' rows: ``gpuwhy report`` on a machine without
    TensorFlow imports them all (in a fresh interpreter, nothing imported before)."""
    code = (
        "import sys, gpuwhy.collect.registry\n"
        "print(sorted(m for m in ('tensorflow', 'keras', 'numpy') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
