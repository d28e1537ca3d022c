"""``gpuwhy.optimize(dataset)``: the same pipeline with the fixes that cannot change its
elements, checked element by element and measured against the original.

What it changes, and only where it is safe to do without asking:

* a sequential ``map`` (or ``num_parallel_calls=1``) whose function has no random, Python
  or writing op gets ``num_parallel_calls=AUTOTUNE`` with ``deterministic=True`` (TF's
  parallel map then yields the same sequence). Reading a lookup table or a variable,
  ``Assert`` and ``tf.print`` do not count as state: TF's own map_parallelization
  refuses those maps (every stateful op stops it), this does not. A map TF already
  parallelises by itself (stateless function, autotune on) is left as written.
* a Python function (``py_function``, ``numpy_function``) is parallelised only with
  ``assume_pure=True``: equal outputs over a few hundred elements cannot show that a
  function keeps no state whose result depends on call order (a counter, a
  thread-unsafe decoder), so the caller has to say so. The elements are checked anyway.
  With ``measure``, the map is first timed on its own with and without parallel calls:
  Python that holds the GIL takes turns on one core, and a map that gained less than
  ``MIN_PYTHON_PARALLEL_GAIN`` stays as written, with the figures and the advice to
  write it in TF ops.
* a stateful random map is never parallelised: parallel calls would hand the random
  numbers to other elements (the check below would catch it). The fix is stateless
  random ops with a seed per element, which changes the numbers: the user's call.
* ``cache()`` after the last stage whose elements are the same on every pass (no
  shuffle, random op, Python call or unknown stage at or below it: the judgement of
  ``stages.varies_between_passes``, which ``gpuwhy run`` records for input.no-cache
  too), when the pipeline
  is finite there and the cache fits ``memory_budget_bytes`` (default: a quarter of
  the memory available now, so the model and TF's own buffers still fit). Size =
  cardinality (an upper bound through filters) x bytes per element (from the
  element_spec, else measured on the first 4 elements).
* ``prefetch(AUTOTUNE)`` at the end, when the pipeline does not end with a prefetch.
* with ``keep_order=False`` only: parallel maps and interleaves run with
  ``deterministic=False`` (``options.deterministic = False``), and a TFRecordDataset of
  several files reads them with ``num_parallel_reads=AUTOTUNE``.
* a sequential ``interleave`` of a stateless function becomes a deterministic parallel
  interleave (same sequence), or a non-deterministic one with ``keep_order=False``.

Whatever it cannot rebuild faithfully stays the user's own object, and the result says
what was left and why. The options of the dataset are carried over.

Then it proves it: one pass of each pipeline is fingerprinted element by element
(bitwise) and compared, as a sequence (``keep_order=True``) or a multiset; all of a finite
dataset, the first N elements of an infinite one. If the original itself differs from
pass to pass (a shuffle, a random augmentation), the comparison moves down to the last
stage below the randomness (where the cache went). Any difference, and the result
refuses the rewrite and hands back the original.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from gpuwhy.formatting import byte_size
from gpuwhy.optimize.measure import (
    Digests,
    Drain,
    available_memory_bytes,
    collect,
    compare,
    timed_passes,
)
from gpuwhy.optimize.plan import Plan, Planner, element_bytes
from gpuwhy.optimize.rebuild import StageFailed, build
from gpuwhy.optimize.result import OptimizeResult, SameElements
from gpuwhy.tfapi.tfdata import cache_safety, dataset_size, stages
from gpuwhy.tfapi.tfdata import rewrite as dr

DEFAULT_MEMORY_FRACTION = 0.25
INFINITE_PASS_SECONDS = 2.0  # an infinite dataset is timed over ~2 s of the original
LONG_PASS_SECONDS = 120.0  # a finite epoch longer than this is timed on its first part
# a dataset of unknown size (a from_generator source: Keras' flow_from_directory never
# ends) whose first pass has not ended by then is timed on its first part: read as a
# known-finite one (up to LONG_PASS_SECONDS a read), an endless generator took 5.5 min
UNKNOWN_PASS_SECONDS = 15.0
PARTIAL_PASS_SECONDS = 5.0  # ... on passes of about this long for the original
MIN_SAMPLE_SECONDS = 1.0  # shorter passes of the original are timed several in a row
COMPARE_LIMIT = 1_000_000  # elements fingerprinted per pass at most


def optimize(
    dataset: Any,
    *,
    keep_order: bool = True,
    cache: str | bool = "auto",
    measure: bool = True,
    elements: int | None = None,
    repeats: int = 5,
    warmup: int = 1,
    memory_budget_bytes: int | None = None,
    assume_pure: bool = False,
) -> OptimizeResult:
    """Rewrite ``dataset`` with the fixes that cannot change its elements, check that
    they did not, and measure before/after/ideal.

    ``keep_order``: False allows the order of elements to change (non-deterministic
    parallel stages, parallel file reads); the check then compares multisets.
    ``cache``: "auto" (insert where safe, worthwhile and within the budget), True (also
    when the stages it saves look cheap), False (never). ``measure``: time the pipelines
    (False: still check the elements, one pass each). ``elements``: elements per pass
    (default: a whole epoch of a finite dataset, ~2 s of the original for an infinite
    one). ``repeats``: timed passes per pipeline, interleaved; ``warmup``: untimed passes
    before them (the first also fills the caches and is the one compared).
    ``memory_budget_bytes``: largest cache to insert (default: a quarter of the memory
    available now). ``assume_pure``: the pipeline's Python functions (py_function,
    numpy_function, from_generator) return the same outputs for the same inputs and keep
    no state: they may then run in parallel and be cached.
    """

    if repeats < 1 or warmup < 0:
        raise ValueError("repeats must be >= 1 and warmup >= 0")
    if elements is not None and elements < 1:
        raise ValueError("elements must be a positive number of elements per pass")
    if cache not in ("auto", True, False):
        raise ValueError('cache must be "auto", True or False')
    _require_eager(dataset)
    budget = memory_budget_bytes
    if budget is None:
        available = available_memory_bytes()
        budget = int(available * DEFAULT_MEMORY_FRACTION) if available else 2 << 30
    chain = stages.read_chain(dataset)
    options = dataset.options()
    result = OptimizeResult(dataset=dataset, original=dataset, keep_order=keep_order)

    serial: dict[int, str] = {}  # Python maps whose parallel calls measured no gain
    kept: dict[int, str] = {}  # ... and those that gained: the figures
    for _ in range(2 * len(chain) + 1):  # a stage that fails to rebuild is frozen; plan again
        plan = Planner(
            chain,
            options,
            keep_order=keep_order,
            cache=cache,
            assume_pure=assume_pure,
            budget=budget,
            measured_serial=serial,
            measured_parallel=kept,
        ).plan()
        if measure and _python_parallel_gains(chain, plan, keep_order, serial, kept):
            continue  # measured: planned again without it, or with its figures
        if not plan.changes:
            rewritten, counterpart = dataset, dict[int, Any]()
            break
        try:
            rewritten, counterpart = build(chain, plan, dataset, keep_order)
            break
        except StageFailed as e:
            chain[e.index].rebuildable = False
            chain[e.index].why_not = e.reason
    result.changes, result.left_alone, result.notes = plan.changes, plan.left_alone, plan.notes
    if plan.changes:
        result.dataset = rewritten
    _check_and_time(
        result,
        chain,
        plan,
        counterpart,
        keep_order=keep_order,
        measure=measure,
        elements=elements,
        repeats=repeats,
        warmup=warmup,
        budget=budget,
        assume_pure=assume_pure,
    )
    return result


# Parallel calls of a Python map must make it at least this much faster, measured on its
# own, to be kept: Python that holds the GIL takes turns on one core however many calls.
MIN_PYTHON_PARALLEL_GAIN = 1.25
PYTHON_PROBE_SECONDS = 1.0  # the map as written is timed over about this long per pass
PYTHON_PROBE_ROUNDS = 5
# Parallel passes of a map that computes (CPU time per element near its wall time) that
# keep the process below this many cores held the GIL, whatever the wall clock said.
GIL_CORES = 1.3


def _python_parallel_gains(
    chain: list, plan: Plan, keep_order: bool, serial: dict, kept: dict
) -> bool:
    """Time each Python map the plan makes parallel (assume_pure) against itself as
    written, on the same input; one whose parallel calls gain less than
    MIN_PYTHON_PARALLEL_GAIN is put in ``serial`` with the figures, one that gains in
    ``kept``. True: something new was measured (plan again)."""

    for i in sorted(plan.parallel):
        stage = chain[i]
        if plan.parallel[i] != "map" or not any(f.python for f in stage.functions):
            continue
        below = getattr(stage.dataset, "_input_dataset", None)
        if below is None or i in serial or i in kept:
            continue
        try:
            parallel = dr.make_parallel_map(stage.dataset, below, deterministic=keep_order)
            gain, held_gil, figures = _measured_gain(stage.dataset, parallel)
        except Exception:  # noqa: BLE001 - not measured: the rewrite's own check decides
            continue
        if gain < MIN_PYTHON_PARALLEL_GAIN or held_gil:
            serial[i] = (
                f"its Python gained nothing from parallel calls, measured: x{gain:.2f} "
                f"({figures}); it holds the GIL, so the calls take turns on one core. "
                "Write it in TF ops (tf.io, tf.image, tf.strings, tf.math), which run in "
                "C++ on every core"
            )
            return True
        kept[i] = f"measured on its own: x{gain:.2f} ({figures})"
        return True
    return False


def _measured_gain(written: Any, parallel: Any) -> tuple[float, bool, str]:
    """Elements per second of ``parallel`` over ``written`` (the lower of the fastest
    passes' ratio and the median of each round's pair) over interleaved passes over the
    same first elements (as many as ``written`` gives in about PYTHON_PROBE_SECONDS),
    and whether the Python held the GIL: it computes (its
    CPU time per element is at least half its fastest wall time per element) and the
    parallel passes kept the process on about one core. On a busy host the wall-clock
    gain is noisy; the CPU time is the process's own, so the second test is not."""
    import statistics
    import time

    start, count = time.perf_counter(), 0
    for _ in written:
        count += 1
        if time.perf_counter() - start > PYTHON_PROBE_SECONDS:
            break
    if count < 4:
        raise ValueError("too few elements to time")
    drains = {"written": Drain(written, count), "parallel": Drain(parallel, count)}
    cpu = dict.fromkeys(drains, 0.0)
    wall = dict.fromkeys(drains, 0.0)
    rates: dict[str, list[float]] = {name: [] for name in drains}
    for r in range(PYTHON_PROBE_ROUNDS):
        for name in ("written", "parallel") if r % 2 == 0 else ("parallel", "written"):
            before = time.process_time()
            n, seconds = drains[name]()
            cpu[name] += time.process_time() - before
            wall[name] += seconds
            rates[name].append(n / seconds if seconds > 0 else float("inf"))
    written_rate, parallel_rate = max(rates["written"]), max(rates["parallel"])
    # the gain both ways, the fastest passes' and the median of each round's pair: a
    # busy host's luck on one pass does not make a gain
    paired = statistics.median(p / w for p, w in zip(rates["parallel"], rates["written"]))
    gain = min(parallel_rate / written_rate, paired)
    cores = cpu["parallel"] / wall["parallel"] if wall["parallel"] > 0 else 0.0
    cpu_per_element = cpu["written"] / (count * PYTHON_PROBE_ROUNDS)
    computes = cpu_per_element >= 0.5 / written_rate
    held_gil = computes and cores < GIL_CORES
    figures = (
        f"{written_rate:,.0f} elements/s as written, {parallel_rate:,.0f} with "
        f"num_parallel_calls=AUTOTUNE: the fastest of {PYTHON_PROBE_ROUNDS} interleaved "
        f"passes over its first {count} elements, x{paired:.2f} in the median pair; "
        f"{cpu_per_element * 1e3:,.1f} ms of CPU "
        f"per element, {cores:.2f} cores busy during the parallel passes"
    )
    return gain, held_gil, figures


def _require_eager(dataset: Any) -> None:
    import tensorflow as tf

    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(f"optimize() takes a tf.data.Dataset, not {type(dataset).__name__}")
    if not tf.executing_eagerly():
        raise RuntimeError("optimize() runs eagerly: call it outside tf.function")


def _check_and_time(
    result: OptimizeResult,
    chain: list,
    plan: Plan,
    counterpart: dict,
    *,
    keep_order: bool,
    measure: bool,
    elements: int | None,
    repeats: int,
    warmup: int,
    budget: int,
    assume_pure: bool,
) -> None:
    original, rewritten = result.original, result.dataset
    has_changes = rewritten is not original
    if not has_changes:
        result.same_elements = SameElements(True, "nothing was changed")
        if not measure:
            return
    card = dataset_size.cardinality(original)
    finite = card != dataset_size.INFINITE
    limit: int | None
    if elements is not None:
        limit = elements
    elif finite:
        limit = COMPARE_LIMIT if card > COMPARE_LIMIT else None
    else:
        limit = COMPARE_LIMIT
    time_limit = (
        None
        if elements is not None
        else INFINITE_PASS_SECONDS
        if not finite
        else UNKNOWN_PASS_SECONDS
        if card < 0
        else LONG_PASS_SECONDS
    )

    o1 = collect(original, limit, time_limit_s=time_limit)
    full = o1.complete or (card >= 0 and o1.count == card)
    per_pass = None if full else o1.count  # None: whole epochs
    if not full and finite and elements is None:
        # a long epoch: compared over what was read, timed over ~PARTIAL_PASS_SECONDS passes
        per_pass = max(
            20, min(o1.count, int(o1.count * PARTIAL_PASS_SECONDS / max(o1.seconds, 1e-3)))
        )
        result.notes.append(
            f"an epoch takes over {time_limit or LONG_PASS_SECONDS:.0f} s"
            + (" or never ends (its size is unknown)" if card < 0 else "")
            + f": elements were compared over its first {o1.count}, and timed passes read "
            f"its first {per_pass} "
            "(elements= sets the pass length)"
            + (
                "; the cache was filled by one whole pass of the stages below it first"
                if plan.cache_after is not None
                else ""
            )
        )
    r1 = None
    if has_changes:
        if plan.cache_after is not None and not full:
            collect(counterpart[plan.cache_after], None, fingerprint=False)  # fill the cache
        try:
            r1 = collect(rewritten, o1.count if not full else None)
        except Exception as e:  # noqa: BLE001 - the rewrite broke something: refuse it
            _refuse(result, f"the rewritten pipeline failed: {type(e).__name__}: {e}")
            return
        verdict = _verdict(
            result, chain, plan, counterpart, o1, r1, keep_order=keep_order, assume_pure=assume_pure
        )
        if verdict is not None:
            _refuse(result, verdict)
            return
    if not measure:
        return

    drains = {"before": Drain(original, per_pass, _epochs_for(o1.seconds))}
    if has_changes:
        drains["after"] = Drain(rewritten, per_pass)
    ideal, ideal_elements, note = _ideal(original, per_pass, o1.count, budget)
    if note:
        result.notes.append(note)
    if ideal is not None:
        drains["ideal"] = Drain(ideal, ideal_elements)
        drains["ideal"]()  # fills the ideal's cache
    for _ in range(max(warmup - 1, 0)):
        for drain in drains.values():
            drain()
    for name in ("after", "ideal"):  # warm now: one pass says how long a pass takes
        if name in drains:
            _, seconds = drains[name]()
            drains[name].epochs = _epochs_for(seconds)
    stats = timed_passes(drains, repeats)
    result.before, result.after, result.ideal = (
        stats["before"],
        stats.get("after"),
        stats.get("ideal"),
    )
    _with_first_pass(result, plan.cache_after is None or not full, o1, r1)
    if result.after and result.ideal:
        room = result.ideal.median - result.before.median
        if room > 0.05 * result.before.median:
            result.gap_closed = (result.after.median - result.before.median) / room
        else:
            result.notes.append(
                "the original already runs at the speed of its cached output: no gap to close"
            )


def _with_first_pass(
    result: OptimizeResult, no_fill: bool, o1: Digests, r1: Digests | None
) -> None:
    """The rewrite's element check was its first whole pass: it filled the cache that the
    timed passes then read. Kept as the rewrite's first-pass rate: its rate against the
    original's first pass (both checked element by element), scaled to the timed
    passes' original (derived/cache_passes.py says it apart). ``no_fill``: no cache, or
    one a partial pass could not fill (an explicit fill pass did)."""
    if no_fill or result.after is None or result.before is None or r1 is None or not r1.complete:
        return
    first = (r1.count / max(r1.seconds, 1e-9)) / (o1.count / max(o1.seconds, 1e-9))
    result.after = dataclasses.replace(result.after, first=first * result.before.median)


def _epochs_for(seconds: float) -> int:
    """Passes per timed sample: a pass shorter than MIN_SAMPLE_SECONDS is timed several in
    a row (a fresh iterator each), so that fixed costs and a busy machine's hiccups do not
    dominate it."""
    if seconds >= MIN_SAMPLE_SECONDS:
        return 1
    return min(1000, math.ceil(MIN_SAMPLE_SECONDS / max(seconds, 1e-4)))


def _refuse(result: OptimizeResult, reason: str) -> None:
    result.refused = reason
    result.dataset = result.original
    result.same_elements = SameElements(False, reason)


def _verdict(
    result: OptimizeResult,
    chain: list,
    plan: Plan,
    counterpart: dict,
    o1: Digests,
    r1: Digests,
    *,
    keep_order: bool,
    assume_pure: bool,
) -> str | None:
    """None when the rewrite keeps the elements (result.same_elements says how that was
    checked); else why it is refused."""

    if o1.skipped or r1.skipped:
        result.same_elements = SameElements(None, f"not compared: {o1.skipped or r1.skipped}")
        return None
    complete = o1.complete and r1.complete
    span = f"all {len(o1.values)} elements" if complete else f"the first {len(o1.values)} elements"
    diff = compare(o1.values, r1.values, keep_order=True)
    if diff is None:
        result.same_elements = SameElements(True, f"same sequence, {span}, bitwise")
        return None
    if not keep_order:
        if complete:
            diff = compare(o1.values, r1.values, keep_order=False)
            if diff is None:
                result.same_elements = SameElements(True, f"same multiset, {span}, bitwise")
                return None
        else:
            result.same_elements = SameElements(
                None, f"not proven: the order may change and the passes covered only {span}"
            )
            return None
    # Where a stage of the original differs from pass to pass by design (a shuffle, a
    # random map), the rewrite's first pass is another pass: compared below that stage.
    # Two passes of the original agreeing prove nothing then: a cache the program wrote
    # above the shuffle replays the first pass, where the rewrite's own cache runs a new one.
    varying = cache_safety.first_varying(chain, assume_pure=assume_pure, rebuilt=True)
    if varying is None:
        o2 = collect(result.original, len(o1.values) if not o1.complete else None)
        if compare(o1.values, o2.values, keep_order=True) is None:
            return f"the rewritten pipeline gives other elements than the original ({diff})" + (
                _order_hint(result.original, o1, r1) if keep_order else ""
            )
    # The original differs from pass to pass: check where its randomness starts.
    below, random_reason = varying or (len(chain), "something gpuwhy cannot see")
    changed = [
        i
        for i in range(below)
        if counterpart.get(i) is not None and counterpart[i] is not chain[i].dataset
    ]
    if not changed:
        result.same_elements = SameElements(
            None,
            f"not compared: the original's elements differ from pass to pass "
            f"({random_reason}); the changes above it keep elements by construction "
            "(same functions, deterministic order, prefetch)",
        )
        return None
    point = changed[-1]
    if plan.cache_after is not None and plan.cache_after < below:
        point = max(point, plan.cache_after)
    label = chain[point].describe()
    limit = None if dataset_size.cardinality(chain[point].dataset) >= 0 else COMPARE_LIMIT
    p_o = collect(chain[point].dataset, min(limit or COMPARE_LIMIT, COMPARE_LIMIT))
    p_r = collect(counterpart[point], len(p_o.values) if not p_o.complete else None)
    if p_o.skipped or p_r.skipped:
        return (
            f"the original differs from pass to pass ({random_reason}) and the elements "
            f"below it cannot be compared ({p_o.skipped or p_r.skipped})"
        )
    p_diff = compare(p_o.values, p_r.values, keep_order=keep_order or not p_o.complete)
    p_span = f"all {len(p_o.values)}" if p_o.complete else f"the first {len(p_o.values)}"
    if p_diff is None:
        result.same_elements = SameElements(
            True,
            f"same {'sequence' if keep_order else 'multiset'} after {label} ({p_span} "
            f"elements, bitwise); the stages above differ from pass to pass by design "
            f"({random_reason})",
        )
        return None
    p_o2 = collect(chain[point].dataset, len(p_o.values) if not p_o.complete else None)
    if compare(p_o.values, p_o2.values, keep_order=True) is not None:
        return (
            f"the original's elements differ from pass to pass even after {label}, which "
            "gpuwhy judged reproducible: nothing was changed"
        ) + (_order_hint(result.original, p_o, p_o2) if keep_order else "")
    return f"after {label} the rewritten pipeline gives other elements ({p_diff})" + (
        _order_hint(result.original, p_o, p_r) if keep_order else ""
    )


def _order_hint(original: Any, a: Digests, b: Digests) -> str:
    """How to let the order change, where that is what differs: the program asked for
    no fixed order (``deterministic=False`` in its options: a parallel map then hands
    its elements out as they finish), or two complete passes hold the same elements in
    another order. Empty otherwise."""
    try:
        unordered = original.options().deterministic is False
    except Exception:  # noqa: BLE001 - a dataset whose options cannot be read: no hint
        unordered = False
    reordered = a.complete and b.complete and compare(a.values, b.values, keep_order=False) is None
    if not (unordered or reordered):
        return ""
    why = (
        "the program sets deterministic=False in the dataset's options, so its order "
        "changes from pass to pass"
        if unordered
        else "the same elements, in another order"
    )
    return f"; {why}: --any-order compares the elements as a multiset"


def _ideal(original: Any, per_pass: int | None, count: int, budget: int):
    """The original's output cached in memory: the most a pipeline fix can give."""

    per_element = element_bytes(original, dr) or 0
    n = per_pass or count
    note = None
    if per_element and n * per_element > budget:
        n = max(1, budget // per_element)
        note = (
            f"the ideal is measured over {n} cached elements (all of them would not fit the "
            f"memory budget of {byte_size(budget)})"
        )
        return original.take(n).cache(), None, note
    if per_pass is None:
        return original.cache(), None, None
    return original.take(per_pass).cache(), None, note
