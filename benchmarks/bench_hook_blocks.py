"""What a timed step costs, with its hooks in place against stepped aside, in one process.

`bench_short_steps.py` pairs a watched loop with a plain one; this pairs the two states
of one watched session: the per-step hooks (the ``next()`` timing and the ``tf.function``
call timing, the ones a pause steps aside) in place, and stepped aside, in alternating
blocks of a few hundred steps of one loop, so that each block has a neighbour a fraction
of a second away. The pauses themselves are held off (every step of the "on" blocks is
timed), and the steps of the "off" blocks are neither timed nor counted: the figures
are for this benchmark only. Printed: per state the median wall and main-thread CPU
time a step, then the median of the paired ratios (on / off) with their range.
``--bare`` adds a third state: pass-through Python wrappers in the hooks' places, what
a Python frame on each call costs without the hooks' bookkeeping.

``--drain-period S`` sets the period of the drain that folds the hooks' records into
steps (0.25 s as a run has it; ``1e6``: no fold during the blocks, the records pile up):
what the folds cost the program's thread, apart from the hooks; with a period of 1,000 s
or more the records of the "on" blocks are folded at once at the end, and that fold's
CPU time a step is printed too.

``--fold-wall``: what the drain's fold costs the program's thread in wall time, apart
from the hooks: the hooks in place in every block (every step timed, as in a loop's
head), the fold run on a thread of its own during the "fold" blocks (the records of the
two blocks before it) and never during the "quiet" ones; printed as the median paired
difference of a block's wall time against the fold's CPU time. (The states above
cannot show the fold: the drain's ticks fall in the blocks of either state.)

``--calls``: each hook's own cost a call, apart from any step's work: ``next()`` on a
``Dataset.range`` iterator and calls of an identity ``tf.function``, each in blocks of
``--block`` calls with its hook in place and stepped aside; printed as the median paired
difference of the main thread's CPU a call (``--size`` and ``--batch`` are the steps' only).

    .venv/bin/python benchmarks/bench_hook_blocks.py [--block 300] [--rounds 80]
        [--collectors steps|all] [--drain-period S] [--bare] [--size 16] [--batch 16]
        [--calls] [--fold-wall]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import threading
import time
from collections.abc import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--block", type=int, default=300, help="steps a block")
    parser.add_argument("--rounds", type=int, default=80, help="pairs of blocks")
    parser.add_argument("--collectors", choices=("steps", "all"), default="steps")
    parser.add_argument("--drain-period", type=float, help="seconds between the folds")
    parser.add_argument(
        "--bare", action="store_true", help="a third state: pass-through wrappers, no hooks"
    )
    parser.add_argument("--calls", action="store_true", help="each hook's cost a call")
    parser.add_argument(
        "--fold-wall", action="store_true", help="the fold's wall cost to the program's thread"
    )
    parser.add_argument("--size", type=int, default=16)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()
    if (args.calls or args.fold_wall) and args.bare:
        parser.error("--calls and --fold-wall time the hooks in place: no --bare")
    if args.calls and args.fold_wall:
        parser.error("--calls or --fold-wall, not both")

    from gpuwhy.collect import registry
    from gpuwhy.collect.inprocess.functions import FunctionWatcher
    from gpuwhy.collect.inprocess.steps import StepCollector
    from gpuwhy.modes.run.session import Session

    kinds = registry.COLLECTORS if args.collectors == "all" else (StepCollector, FunctionWatcher)
    session = Session(command=["bench_hook_blocks.py"], collectors=kinds).start()
    gc.freeze()  # as `gpuwhy run` does with what it made before the program

    import tensorflow as tf

    pauses = session.steps.pauses
    assert pauses is not None
    pauses.refuse("bench_hook_blocks: the blocks decide the hooks' state")
    if args.calls:
        _per_call(tf, pauses.patches, args.block, args.rounds, args.drain_period)
        session.stop()
        return
    size = args.size
    ds = tf.data.Dataset.from_tensor_slices(tf.random.uniform((1024, size), seed=0))
    ds = ds.repeat().batch(args.batch).prefetch(2)
    w = tf.Variable(tf.random.uniform((size, size), seed=1))

    @tf.function
    def train_step(x):
        w.assign_sub(0.0001 * tf.matmul(tf.transpose(x), tf.matmul(x, w)))
        return w

    it = iter(ds)
    for _ in range(2000):  # traced, warmed up, its head of single steps folded
        train_step(next(it))
    if args.fold_wall:
        watcher = next(k for k in session.collectors if isinstance(k, FunctionWatcher))
        _fold_wall(lambda: train_step(next(it)), (watcher.fold, session.steps.fold), args)
        session.stop()
        return
    _set_drain_period(args.drain_period)
    states = ("on", "off", "bare") if args.bare else ("on", "off")
    wall: dict[str, list[float]] = {state: [] for state in states}
    cpu: dict[str, list[float]] = {state: [] for state in states}
    for r in range(args.rounds):
        for state in states[r % len(states) :] + states[: r % len(states)]:
            for patch in pauses.patches:
                patch.step_back() if state == "on" else patch.step_aside()
            if state == "bare":
                bare = _bare_wrappers()
            t, c = time.perf_counter(), time.thread_time()
            for _ in range(args.block):
                train_step(next(it))
            wall[state].append((time.perf_counter() - t) / args.block)
            cpu[state].append((time.thread_time() - c) / args.block)
            if state == "bare":
                bare()
    for patch in pauses.patches:
        patch.step_back()
    if args.drain_period is not None and args.drain_period >= 1e3:
        # the "on" blocks' records piled up: folded at once here, their CPU per step
        watcher = next(k for k in session.collectors if isinstance(k, FunctionWatcher))
        before = time.thread_time()
        watcher.fold()
        session.steps.fold()
        folded = (time.thread_time() - before) / (args.rounds * args.block)
        print(f"the folds of the on blocks' records, at once: {folded * 1e6:.2f} µs a step")
    session.stop()
    for name, figures in (("wall", wall), ("main thread's CPU", cpu)):
        line = [f"{name}:"]
        for state in states:
            line.append(f"{state} {statistics.median(figures[state]) * 1e6:.1f} µs")
        print(" ".join(line) + " a step")
        for state in (s for s in states if s != "off"):
            ratios = [a / b for a, b in zip(figures[state], figures["off"])]
            print(
                f"  paired {state}/off {statistics.median(ratios):.4f} "
                f"({min(ratios):.3f}-{max(ratios):.3f}, {len(ratios)} pairs)"
            )


def _set_drain_period(period: float | None) -> None:
    """After the warm-up (its head of single steps folded as a run folds them): the
    drain's period, and time for its current wait to end."""
    if period is not None:
        from gpuwhy.collect.inprocess import drain

        drain.PERIOD_S = period  # read by the shared drain at each wait
        time.sleep(0.5)


def _fold_wall(step: Callable[[], object], folds: tuple, args: argparse.Namespace) -> None:
    """Blocks of ``args.block`` timed steps, alternately with the fold of the records
    before them running on another thread and with no fold at all (the drain held off)."""
    _set_drain_period(1e6)
    for fold in folds:  # the warm-up's records: not in the first block's fold
        fold()
    wall: dict[str, list[float]] = {"fold": [], "quiet": []}
    cpu: list[float] = []

    def fold_all() -> None:
        c = time.thread_time()
        for fold in folds:
            fold()
        cpu.append(time.thread_time() - c)

    for r in range(args.rounds):
        for state in ("fold", "quiet") if r % 2 else ("quiet", "fold"):
            thread = threading.Thread(target=fold_all) if state == "fold" else None
            t = time.perf_counter()
            if thread is not None:
                thread.start()
            for _ in range(args.block):
                step()
            wall[state].append(time.perf_counter() - t)
            if thread is not None:
                thread.join()
    extra = statistics.median(a - b for a, b in zip(wall["fold"], wall["quiet"]))
    folded = statistics.median(cpu)
    print(
        f"blocks of {args.block} steps: quiet {statistics.median(wall['quiet']) * 1e3:.1f} ms, "
        f"with a fold {statistics.median(wall['fold']) * 1e3:.1f} ms; paired difference "
        f"{extra * 1e3:+.2f} ms, the fold's CPU {folded * 1e3:.2f} ms "
        f"({folded / (2 * args.block) * 1e6:.1f} µs a step folded; {args.rounds} pairs)"
    )


def _per_call(tf, patches, block: int, rounds: int, drain_period: float | None) -> None:
    """The main thread's CPU a ``next()`` and a ``tf.function`` call take with the hooks
    in place and stepped aside, alternating blocks of ``block`` calls."""
    it = iter(tf.data.Dataset.range(2**62))
    identity = tf.function(lambda x: x)
    x = tf.constant(1.0)
    calls = {"next()": lambda: next(it), "tf.function call": lambda: identity(x)}
    for _ in range(3000):  # the call traced for x, the heads of single reads and calls folded
        for call in calls.values():
            call()
    _set_drain_period(drain_period)
    cpu: dict[tuple[str, str], list[float]] = {}
    for r in range(rounds):
        for state in ("on", "off") if r % 2 else ("off", "on"):
            for patch in patches:
                patch.step_back() if state == "on" else patch.step_aside()
            for name, call in calls.items():
                c = time.thread_time()
                for _ in range(block):
                    call()
                cpu.setdefault((name, state), []).append((time.thread_time() - c) / block)
    for name in calls:
        on, off = cpu[(name, "on")], cpu[(name, "off")]
        extra = statistics.median(a - b for a, b in zip(on, off))
        print(
            f"{name}: hook in place {statistics.median(on) * 1e6:.1f} µs, stepped aside "
            f"{statistics.median(off) * 1e6:.1f} µs; paired difference {extra * 1e6:+.2f} µs "
            f"a call ({rounds} pairs of {block})"
        )


def _bare_wrappers() -> Callable[[], None]:
    """Pass-through Python wrappers in the hooks' places (TF's own methods under them):
    what a Python frame on each call costs, without the hooks' bookkeeping. Returns
    what puts TF's own back."""
    from tensorflow.python.data.ops.iterator_ops import OwnedIterator
    from tensorflow.python.eager.polymorphic_function.polymorphic_function import Function

    call, read = Function.__dict__["__call__"], OwnedIterator.__dict__["__next__"]

    def bare_call(self, *args, **kwds):
        return call(self, *args, **kwds)

    def bare_next(self):
        return read(self)

    Function.__call__ = bare_call
    OwnedIterator.__next__ = bare_next

    def undo() -> None:
        Function.__call__ = call
        OwnedIterator.__next__ = read

    return undo


if __name__ == "__main__":
    main()
