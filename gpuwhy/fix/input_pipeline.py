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
* a stateful random map is never parallelised: parallel calls would hand the random
  numbers to other elements (the check below would catch it). The fix is stateless
  random ops with a seed per element, which changes the numbers: the user's call.
* ``cache()`` after the last stage whose elements are the same on every pass (no
  shuffle, random op, Python call or unknown stage at or below it), when the pipeline
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

import linecache
import math
import os
from dataclasses import dataclass, field
from typing import Any

from gpuwhy.facts import InputFix, PipelineChange, PipelineRate
from gpuwhy.fix import measure as m

DEFAULT_MEMORY_FRACTION = 0.25
INFINITE_PASS_SECONDS = 2.0  # an infinite dataset is timed over ~2 s of the original
LONG_PASS_SECONDS = 120.0  # a finite epoch longer than this is timed on its first part
PARTIAL_PASS_SECONDS = 5.0  # ... on passes of about this long for the original
MIN_SAMPLE_SECONDS = 1.0  # shorter passes of the original are timed several in a row
COMPARE_LIMIT = 1_000_000  # elements fingerprinted per pass at most
_CHEAP_KINDS = frozenset(
    {
        "range",
        "from_tensor_slices",
        "from_tensors",
        "from_sparse_tensor_slices",
        "batch",
        "unbatch",
        "prefetch",
        "options",
        "take",
        "skip",
        "shard",
        "repeat",
        "cache",
        "assert_cardinality",
        "restructured",
    }
)
_COUNT_KEEPING_OR_SHRINKING = frozenset(
    {
        "filter",
        "take_while",
        "ignore_errors",
        "unique",
        "take",
        "skip",
        "shard",
        "map",
        "prefetch",
        "options",
        "cache",
        "assert_cardinality",
    }
)


# -- result --------------------------------------------------------------------------------


@dataclass(frozen=True)
class LeftAlone:
    """A fix gpuwhy did not apply, and why."""

    stage: str
    location: str | None
    reason: str


@dataclass(frozen=True)
class SameElements:
    """Whether the rewritten pipeline gave the original's elements, and how that was checked."""

    same: bool | None  # None: could not be checked
    how: str

    def __bool__(self) -> bool:
        return bool(self.same)


@dataclass
class OptimizeResult:
    """What :func:`optimize` did. ``dataset`` is the pipeline to use (the original when
    nothing changed or the rewrite was refused)."""

    dataset: Any
    original: Any
    changes: list[PipelineChange] = field(default_factory=list)
    left_alone: list[LeftAlone] = field(default_factory=list)
    before: m.Throughput | None = None
    after: m.Throughput | None = None
    ideal: m.Throughput | None = None
    gap_closed: float | None = None
    same_elements: SameElements = SameElements(None, "not checked")
    refused: str | None = None
    notes: list[str] = field(default_factory=list)
    keep_order: bool = True

    @property
    def applied(self) -> bool:
        return bool(self.changes) and self.refused is None

    @property
    def speedup(self) -> float | None:
        if self.before and self.after and self.before.median > 0:
            return self.after.median / self.before.median
        return None

    def report(self) -> str:
        """A short table: throughput before/after/ideal, the changes with their code, and
        what was left as written."""
        from gpuwhy.report.terminal_fix import input_fix_lines

        return "\n".join(input_fix_lines(self.to_facts("this dataset")))

    __str__ = report

    @property
    def worth_it(self) -> bool:
        """False when measuring showed the rewrite no faster than the original (within
        NO_GAIN, the noise of a few timed passes): then the original is the one to keep."""
        if not self.before or not self.after or self.refused:
            return True  # not measured: the changes stand on their reasons
        return self.after.median >= self.before.median * (1 + NO_GAIN)

    def to_facts(
        self, name: str, location: str | None = None, iterated_at: tuple[str, ...] = ()
    ) -> InputFix:
        """This result as the record's ``input_fixes`` facts (what reports render)."""
        return InputFix(
            dataset=name,
            location=location,
            iterated_at=tuple(iterated_at),
            before=_rate_facts(self.before),
            after=_rate_facts(self.after),
            ideal=_rate_facts(self.ideal),
            gap_closed=self.gap_closed,
            speedup=self.speedup,
            same_elements=self.same_elements.same,
            elements_checked=self.same_elements.how,
            changes=tuple(self.changes),
            left_alone=tuple(
                f"{a.location + '  ' if a.location else ''}{a.stage}: {a.reason}"
                for a in self.left_alone
            ),
            refused=self.refused,
            worth_it=self.worth_it,
            notes=tuple(self.notes),
        )


def _rate_facts(t: m.Throughput | None) -> PipelineRate | None:
    return None if t is None else t.rate()


# -- the plan ----------------------------------------------------------------------------


@dataclass
class _Plan:
    parallel: dict[int, str] = field(default_factory=dict)  # stage index -> "map" | "interleave"
    cache_after: int | None = None
    prefetch: bool = False
    any_order: bool = False
    parallel_reads: bool = False
    changes: list[PipelineChange] = field(default_factory=list)
    left_alone: list[LeftAlone] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _where(stage) -> str | None:
    if stage.site:
        return stage.site
    if stage.functions and stage.functions[0].location:
        return stage.functions[0].location
    return None


def _source_line(location: str | None) -> str | None:
    if not location or ":" not in location:
        return None
    path, _, line = location.rpartition(":")
    try:
        text = linecache.getline(os.path.abspath(path), int(line)).strip()
    except (ValueError, OSError):
        return None
    return text or None


def _change(kind: str, stage, code: str, why: str, location: str | None = None) -> PipelineChange:
    where = location or _where(stage)
    return PipelineChange(
        kind,
        stage.describe(),
        where,
        code,
        why,
        _source_line(where) if stage.site or location else None,
    )


class _Planner:
    def __init__(
        self,
        chain: list,
        options: Any,
        *,
        keep_order: bool,
        cache: str | bool,
        assume_pure: bool,
        budget: int,
    ) -> None:
        from gpuwhy.tfapi import data_rewrite as dr

        self.dr = dr
        self.chain, self.options = chain, options
        self.keep_order, self.cache, self.assume_pure, self.budget = (
            keep_order,
            cache,
            assume_pure,
            budget,
        )
        self.tf_does = dr.default_optimisations(options)

    def frozen_upto(self) -> int:
        """Highest index that must stay the user's object (it, and all below it)."""
        return max((i for i, stage in enumerate(self.chain) if not stage.rebuildable), default=-1)

    def plan(self) -> _Plan:
        p = _Plan()
        frozen = self.frozen_upto()
        if frozen >= 0:
            top = self.chain[frozen]
            reason = top.why_not or "gpuwhy cannot rebuild it"
            below = " with everything below it" if frozen > 0 or top.kind == "opaque" else ""
            p.left_alone.append(
                LeftAlone(top.describe(), _where(top), f"kept as written{below}: {reason}")
            )
        for i, stage in enumerate(self.chain):
            if stage.kind == "map" and stage.sequential_map:
                self._plan_map(p, i, stage, frozen)
            elif stage.type_name == "_InterleaveDataset":
                self._plan_interleave(p, i, stage, frozen)
            elif stage.kind == "tfrecord":
                self._plan_tfrecord(p, i, stage, frozen)
        self._plan_cache(p, frozen)
        self._plan_prefetch(p)
        self._plan_order(p)
        return p

    # each fix --------------------------------------------------------------------------
    def _plan_map(self, p: _Plan, i: int, stage, frozen: int) -> None:
        fn = stage.functions[0] if stage.functions else None
        if fn is None:
            return
        if stage.params.get("synchronous"):
            p.left_alone.append(
                LeftAlone(stage.describe(), _where(stage), "written with synchronous=True")
            )
            return
        python_ok = fn.python and self.assume_pure and not (fn.random or fn.unsafe_stateful)
        if not (fn.stateless_enough or python_ok):
            p.left_alone.append(LeftAlone(stage.describe(), _where(stage), _why_sequential(fn)))
            return
        if (
            stage.type_name == "_MapDataset"
            and fn.tf_parallelises
            and self.tf_does["map_parallelization"]
        ):
            p.left_alone.append(
                LeftAlone(
                    stage.describe(),
                    _where(stage),
                    "TF already runs it in parallel (map_parallelization: its function is stateless)",
                )
            )
            return
        if i <= frozen:
            p.left_alone.append(
                LeftAlone(
                    stage.describe(),
                    _where(stage),
                    "runs one element at a time, but it is below a stage gpuwhy cannot rebuild",
                )
            )
            return
        p.parallel[i] = "map"
        det = "" if self.keep_order else ", deterministic=False"
        why = (
            "runs one element at a time"
            if stage.type_name == "_MapDataset"
            else "runs with num_parallel_calls=1"
        )
        if fn.python:
            why += (
                "; parallel because assume_pure=True (Python functions hold the GIL: "
                "it helps when they release it, e.g. in NumPy or I/O)"
            )
        elif fn.ops and not fn.tf_parallelises:
            stateful = sorted(
                set(fn.ops)
                & {"LookupTableFindV2", "LookupTableSizeV2", "ReadVariableOp", "PrintV2"}
            )
            if stateful:
                why += (
                    f"; TF does not parallelise it by itself because of {', '.join(stateful)}, "
                    "which only reads"
                )
        p.changes.append(
            _change(
                "parallel-map",
                stage,
                f".map({_callable(fn)}, num_parallel_calls=tf.data.AUTOTUNE{det})",
                why,
            )
        )

    def _plan_interleave(self, p: _Plan, i: int, stage, frozen: int) -> None:
        fn = stage.functions[0] if stage.functions else None
        if fn is None or i <= frozen:
            return
        if not fn.stateless_enough:
            p.left_alone.append(LeftAlone(stage.describe(), _where(stage), _why_sequential(fn)))
            return
        p.parallel[i] = "interleave"
        det = "True" if self.keep_order else "False"
        cycle = stage.params.get("cycle_length")
        cycle_arg = "" if cycle in (None, -1) else f"cycle_length={cycle}, "
        block = stage.params.get("block_length")
        block_arg = "" if block in (None, 1) else f"block_length={block}, "
        p.changes.append(
            _change(
                "parallel-interleave",
                stage,
                f".interleave({_callable(fn)}, {cycle_arg}{block_arg}num_parallel_calls=tf.data.AUTOTUNE, "
                f"deterministic={det})",
                "opens its inputs one at a time; a deterministic parallel interleave gives the same "
                "sequence"
                if self.keep_order
                else "opens its inputs one at a time",
            )
        )

    def _plan_tfrecord(self, p: _Plan, i: int, stage, frozen: int) -> None:
        files = stage.params.get("files")
        reads = stage.params.get("num_parallel_reads")
        if reads not in (None, 1) or files == 1 or i <= frozen:
            return
        if self.keep_order:
            p.left_alone.append(
                LeftAlone(
                    stage.describe(),
                    _where(stage),
                    f"reads {files if files and files > 0 else 'its'} files one after the other; "
                    "num_parallel_reads would interleave their records (allowed with keep_order=False)",
                )
            )
            return
        p.parallel_reads = True
        p.changes.append(
            _change(
                "parallel-reads",
                stage,
                "tf.data.TFRecordDataset(filenames, num_parallel_reads=tf.data.AUTOTUNE)",
                "reads its files one after the other; parallel reads interleave their records",
            )
        )

    def _plan_cache(self, p: _Plan, frozen: int) -> None:
        dr, chain = self.dr, self.chain
        if self.cache is False or self.cache == "never":
            return
        existing = [s for s in chain if s.kind == "cache"]
        if existing:
            where = _where(existing[-1])
            p.notes.append(
                f"already cached ({existing[-1].describe()}{' at ' + where if where else ''})"
            )
            return
        lowest = max(frozen, 0)
        reproducible_upto = -1
        first_random = None
        for i, stage in enumerate(chain):
            reason = dr.reproducibility(stage.dataset, assume_pure=self.assume_pure)
            if reason:
                first_random = (i, reason)
                break
            reproducible_upto = i
        if reproducible_upto < lowest:
            why = first_random[1] if first_random else "its bottom cannot be rebuilt"
            p.left_alone.append(LeftAlone("cache()", None, f"no stage to cache after: {why}"))
            return
        candidate, why_not = None, None  # why_not: why a higher stage was not chosen
        for j in range(reproducible_upto, lowest - 1, -1):
            if chain[j].kind in ("prefetch", "options") and j > lowest:
                continue
            bound = _count_bound(chain, j, dr)
            if bound is None:
                # TF cannot tell (a file reader, a generator): one pass counts them, if
                # it ends in time; a pipeline that does not is treated as infinite.
                bound = _counted(chain[j].dataset)
                if bound is not None:
                    p.notes.append(
                        f"{bound:,} elements after {chain[j].describe()}, counted in "
                        "one pass (TF does not know the number)"
                    )
            if bound is None:
                why_not = why_not or (
                    f"the number of elements after {chain[j].describe()} is "
                    f"unknown (not counted within {COUNT_LIMIT_S:.0f} s)"
                )
                continue
            if bound < 0:
                why_not = why_not or f"the pipeline is infinite after {chain[j].describe()}"
                continue
            candidate = (j, bound)
            break
        if candidate is None:
            p.left_alone.append(LeftAlone("cache()", None, f"not inserted: {why_not}"))
            return
        j, bound = candidate
        if self.cache == "auto" and all(s.kind in _CHEAP_KINDS for s in chain[: j + 1]):
            higher = why_not or (first_random[1] if first_random else None)
            p.notes.append(
                "no cache: "
                + (f"not higher up, as {higher}; " if higher else "")
                + f"up to {chain[j].describe()} the stages are cheap (sources "
                "already in memory, batching)"
            )
            return
        per_element = _element_bytes(chain[j].dataset, dr)
        if per_element is None:
            p.left_alone.append(
                LeftAlone(
                    "cache()", _where(chain[j]), "not inserted: the size of its elements is unknown"
                )
            )
            return
        size = bound * per_element
        if size > self.budget:
            p.left_alone.append(
                LeftAlone(
                    "cache()",
                    _where(chain[j]),
                    f"not inserted after {chain[j].describe()}: it would hold ~{_bytes(size)} "
                    f"({bound} elements x {_bytes(per_element)}), over the memory budget of "
                    f"{_bytes(self.budget)} (memory_budget_bytes); cache to a file "
                    "(.cache(path)) or a snapshot instead",
                )
            )
            return
        p.cache_after = j
        above = chain[j + 1] if j + 1 < len(chain) else None
        before = ""
        if first_random and first_random[0] == j + 1 and above is not None:
            before = f", before {above.describe()}"
        reason_above = f" ({first_random[1]})" if first_random else ""
        p.changes.append(
            _change(
                "cache",
                chain[j],
                f".cache()   # right after .{chain[j].describe()}{before}",
                f"its elements are the same on every pass, so epochs after the first read them from "
                f"memory (~{_bytes(size)}); the stages above stay live{reason_above}"
                if first_random
                else f"the whole pipeline gives the same elements on every pass, so epochs after the "
                f"first read them from memory (~{_bytes(size)})",
            )
        )

    def _plan_prefetch(self, p: _Plan) -> None:
        top = self.chain[-1]
        i = len(self.chain) - 1
        while i > 0 and self.chain[i].kind == "options":
            i -= 1
        if self.chain[i].kind == "prefetch":
            return
        p.prefetch = True
        injected = (
            " (TF injects one when autotune is on; writing it keeps it there)"
            if self.tf_does["inject_prefetch"]
            else ""
        )
        p.changes.append(
            _change(
                "prefetch",
                top,
                ".prefetch(tf.data.AUTOTUNE)   # the last transformation",
                "the pipeline does not end with prefetch: the next element is not prepared while "
                f"the model works on this one{injected}",
            )
        )

    def _plan_order(self, p: _Plan) -> None:
        if self.keep_order:
            return
        written = self.options.deterministic
        if written is False:
            return
        if written is True:
            p.left_alone.append(
                LeftAlone("options", None, "options.deterministic=True is set explicitly")
            )
            return
        has_parallel = (
            bool(p.parallel)
            or p.parallel_reads
            or any(s.params.get("num_parallel_calls") not in (None, 1) for s in self.chain)
        )
        if not has_parallel:
            return
        p.any_order = True
        p.changes.append(
            PipelineChange(
                "any-order",
                "options",
                None,
                "options = tf.data.Options()\noptions.deterministic = False\n"
                "ds = ds.with_options(options)",
                "keep_order=False: parallel stages hand out elements as soon as they are ready",
            )
        )


def _callable(fn) -> str:
    """How to name the function in the code to paste: its name when it is the user's
    own plain function; else "..." (a lambda, ``table.lookup``): keep what was written."""
    if fn.name == "<lambda>":
        return "lambda ..."
    if fn.location is None or fn.method:
        return "..."
    return fn.name


def _why_sequential(fn) -> str:
    if fn.random:
        return (
            f"draws random numbers ({', '.join(fn.random)}): in parallel, the numbers would go "
            "to other elements. Use stateless random ops with a seed per element "
            "(tf.random.stateless_uniform; seeds from Dataset.random() or a counter zipped "
            "in), then num_parallel_calls=tf.data.AUTOTUNE"
        )
    if fn.python:
        return (
            f"calls Python ({', '.join(fn.python)}): parallel only with assume_pure=True "
            "(gpuwhy cannot see whether it keeps state); better, write it in TF ops"
        )
    if fn.unsafe_stateful:
        return (
            f"runs stateful ops ({', '.join(fn.unsafe_stateful)}) whose result may depend on "
            "the order of calls"
        )
    return "its function could not be read"


COUNT_LIMIT_S = 30.0
NO_GAIN = 0.05  # a rewrite less than 5% faster than the original is not worth it


def _counted(dataset: Any, limit_s: float = COUNT_LIMIT_S) -> int | None:
    """The elements of one pass, counted by iterating it; None when the pass does not
    end within ``limit_s`` (infinite, or too slow to cache usefully here)."""
    import time

    deadline = time.perf_counter() + limit_s
    count = 0
    for _ in dataset:
        count += 1
        if count % 64 == 0 and time.perf_counter() > deadline:
            return None
    return count


def _count_bound(chain: list, j: int, dr) -> int | None:
    """Elements after stage j: exact, an upper bound through filters, -1 infinite, None unknown."""
    n = dr.cardinality(chain[j].dataset)
    if n >= 0 or n == dr.INFINITE:
        return n
    k = j
    while k > 0 and chain[k].kind in _COUNT_KEEPING_OR_SHRINKING:
        k -= 1
        n = dr.cardinality(chain[k].dataset)
        if n >= 0:
            return n
        if n == dr.INFINITE:
            return None
    return None


def _element_bytes(dataset: Any, dr) -> int | None:
    static = dr.static_element_bytes(dataset.element_spec)
    if static is not None:
        return static
    sizes = []
    try:
        for element in dataset.take(4):
            sizes.append(m.element_bytes(element))
    except Exception:  # noqa: BLE001 - the user's pipeline fails: the check will say so
        return None
    return max(sizes) if sizes else 0


def _bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


# -- building ----------------------------------------------------------------------------


class _StageFailed(Exception):
    def __init__(self, index: int, reason: str) -> None:
        super().__init__(reason)
        self.index, self.reason = index, reason


def _build(chain: list, plan: _Plan, original: Any, keep_order: bool) -> tuple[Any, dict[int, Any]]:
    """The rewritten dataset, and each stage's counterpart in it (by chain index)."""
    from gpuwhy.tfapi import data_rewrite as dr

    counterpart: dict[int, Any] = {}
    current: Any = None
    changed = False
    deterministic = True if keep_order else False
    for i, stage in enumerate(chain):
        try:
            if i == 0:
                current = (
                    dr.tfrecord_parallel_reads(stage)
                    if plan.parallel_reads and stage.kind == "tfrecord"
                    else stage.dataset
                )
                changed = current is not stage.dataset
            elif plan.parallel.get(i) == "map":
                current, changed = (
                    dr.make_parallel_map(stage.dataset, current, deterministic=deterministic),
                    True,
                )
            elif plan.parallel.get(i) == "interleave":
                current, changed = (
                    dr.make_parallel_interleave(
                        stage.dataset, current, deterministic=deterministic
                    ),
                    True,
                )
            elif changed:
                current = dr.rebuild(stage, current)
            else:
                current = stage.dataset
        except dr.RebuildError as e:
            raise _StageFailed(i, str(e)) from None
        except Exception as e:  # noqa: BLE001 - a rebuild TF rejected
            raise _StageFailed(i, f"rebuilding it failed: {type(e).__name__}: {e}") from None
        if plan.cache_after == i:
            current, changed = dr.make_cache(current), True
        counterpart[i] = current
    if plan.prefetch:
        current = dr.make_prefetch(current)
    wanted = original.options()
    if plan.any_order:
        import tensorflow as tf

        extra = tf.data.Options()
        extra.deterministic = False
        current = dr.with_options(current, extra)
        wanted = wanted.merge(extra)
    if current.options() != wanted:
        current = dr.with_options(current, wanted)
    return current, counterpart


# -- optimize ------------------------------------------------------------------------------


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
    from gpuwhy.tfapi import data_rewrite as dr

    if repeats < 1 or warmup < 0:
        raise ValueError("repeats must be >= 1 and warmup >= 0")
    if elements is not None and elements < 1:
        raise ValueError("elements must be a positive number of elements per pass")
    if cache not in ("auto", True, False):
        raise ValueError('cache must be "auto", True or False')
    _require_eager(dataset)
    budget = memory_budget_bytes
    if budget is None:
        available = m.available_memory_bytes()
        budget = int(available * DEFAULT_MEMORY_FRACTION) if available else 2 << 30
    chain = dr.read_chain(dataset)
    options = dataset.options()
    result = OptimizeResult(dataset=dataset, original=dataset, keep_order=keep_order)

    for _ in range(len(chain) + 1):  # a stage that fails to rebuild is frozen; plan again
        plan = _Planner(
            chain,
            options,
            keep_order=keep_order,
            cache=cache,
            assume_pure=assume_pure,
            budget=budget,
        ).plan()
        if not plan.changes:
            rewritten, counterpart = dataset, dict[int, Any]()
            break
        try:
            rewritten, counterpart = _build(chain, plan, dataset, keep_order)
            break
        except _StageFailed as e:
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


def _require_eager(dataset: Any) -> None:
    import tensorflow as tf

    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(f"optimize() takes a tf.data.Dataset, not {type(dataset).__name__}")
    if not tf.executing_eagerly():
        raise RuntimeError("optimize() runs eagerly: call it outside tf.function")


def _check_and_time(
    result: OptimizeResult,
    chain: list,
    plan: _Plan,
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
    from gpuwhy.tfapi import data_rewrite as dr

    original, rewritten = result.original, result.dataset
    has_changes = rewritten is not original
    if not has_changes:
        result.same_elements = SameElements(True, "nothing was changed")
        if not measure:
            return
    card = dr.cardinality(original)
    finite = card != dr.INFINITE
    limit: int | None
    if elements is not None:
        limit = elements
    elif finite:
        limit = COMPARE_LIMIT if card > COMPARE_LIMIT else None
    else:
        limit = COMPARE_LIMIT
    time_limit = (
        None if elements is not None else (LONG_PASS_SECONDS if finite else INFINITE_PASS_SECONDS)
    )

    o1 = m.collect(original, limit, time_limit_s=time_limit)
    full = o1.complete or (card >= 0 and o1.count == card)
    per_pass = None if full else o1.count  # None: whole epochs
    if not full and finite and elements is None:
        # a long epoch: compared over what was read, timed over ~PARTIAL_PASS_SECONDS passes
        per_pass = max(
            20, min(o1.count, int(o1.count * PARTIAL_PASS_SECONDS / max(o1.seconds, 1e-3)))
        )
        result.notes.append(
            f"an epoch takes over {LONG_PASS_SECONDS:.0f} s: elements were compared "
            f"over its first {o1.count}, and timed passes read its first {per_pass} "
            "(elements= sets the pass length)"
            + (
                "; the cache was filled by one whole pass of the stages below it first"
                if plan.cache_after is not None
                else ""
            )
        )
    if has_changes:
        if plan.cache_after is not None and not full:
            m.collect(counterpart[plan.cache_after], None, fingerprint=False)  # fill the cache
        try:
            r1 = m.collect(rewritten, o1.count if not full else None)
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

    drains = {"before": m.Drain(original, per_pass, _epochs_for(o1.seconds))}
    if has_changes:
        drains["after"] = m.Drain(rewritten, per_pass)
    ideal, ideal_elements, note = _ideal(original, per_pass, o1.count, budget)
    if note:
        result.notes.append(note)
    if ideal is not None:
        drains["ideal"] = m.Drain(ideal, ideal_elements)
        drains["ideal"]()  # fills the ideal's cache
    for _ in range(max(warmup - 1, 0)):
        for drain in drains.values():
            drain()
    for name in ("after", "ideal"):  # warm now: one pass says how long a pass takes
        if name in drains:
            _, seconds = drains[name]()
            drains[name].epochs = _epochs_for(seconds)
    stats = m.timed_passes(drains, repeats)
    result.before, result.after, result.ideal = (
        stats["before"],
        stats.get("after"),
        stats.get("ideal"),
    )
    if result.after and result.ideal:
        room = result.ideal.median - result.before.median
        if room > 0.05 * result.before.median:
            result.gap_closed = (result.after.median - result.before.median) / room
        else:
            result.notes.append(
                "the original already runs at the speed of its cached output: no gap to close"
            )


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
    plan: _Plan,
    counterpart: dict,
    o1: m.Digests,
    r1: m.Digests,
    *,
    keep_order: bool,
    assume_pure: bool,
) -> str | None:
    """None when the rewrite keeps the elements (result.same_elements says how that was
    checked); else why it is refused."""
    from gpuwhy.tfapi import data_rewrite as dr

    if o1.skipped or r1.skipped:
        result.same_elements = SameElements(None, f"not compared: {o1.skipped or r1.skipped}")
        return None
    complete = o1.complete and r1.complete
    span = f"all {len(o1.values)} elements" if complete else f"the first {len(o1.values)} elements"
    diff = m.compare(o1.values, r1.values, keep_order=True)
    if diff is None:
        result.same_elements = SameElements(True, f"same sequence, {span}, bitwise")
        return None
    if not keep_order:
        if complete:
            diff = m.compare(o1.values, r1.values, keep_order=False)
            if diff is None:
                result.same_elements = SameElements(True, f"same multiset, {span}, bitwise")
                return None
        else:
            result.same_elements = SameElements(
                None, f"not proven: the order may change and the passes covered only {span}"
            )
            return None
    o2 = m.collect(result.original, len(o1.values) if not o1.complete else None)
    if m.compare(o1.values, o2.values, keep_order=True) is None:
        return f"the rewritten pipeline gives other elements than the original ({diff})"
    # The original differs from pass to pass: check where its randomness starts.
    first_random = None
    for i, stage in enumerate(chain):
        if dr.reproducibility(stage.dataset, assume_pure=assume_pure):
            first_random = i
            break
    random_reason = (
        dr.reproducibility(chain[first_random].dataset, assume_pure=assume_pure)
        if first_random is not None
        else "something gpuwhy cannot see"
    )
    below = first_random if first_random is not None else len(chain)
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
    limit = None if dr.cardinality(chain[point].dataset) >= 0 else COMPARE_LIMIT
    p_o = m.collect(chain[point].dataset, min(limit or COMPARE_LIMIT, COMPARE_LIMIT))
    p_r = m.collect(counterpart[point], len(p_o.values) if not p_o.complete else None)
    if p_o.skipped or p_r.skipped:
        return (
            f"the original differs from pass to pass ({random_reason}) and the elements "
            f"below it cannot be compared ({p_o.skipped or p_r.skipped})"
        )
    p_diff = m.compare(p_o.values, p_r.values, keep_order=keep_order or not p_o.complete)
    p_span = f"all {len(p_o.values)}" if p_o.complete else f"the first {len(p_o.values)}"
    if p_diff is None:
        result.same_elements = SameElements(
            True,
            f"same {'sequence' if keep_order else 'multiset'} after {label} ({p_span} "
            f"elements, bitwise); the stages above differ from pass to pass by design "
            f"({random_reason})",
        )
        return None
    p_o2 = m.collect(chain[point].dataset, len(p_o.values) if not p_o.complete else None)
    if m.compare(p_o.values, p_o2.values, keep_order=True) is not None:
        return (
            f"the original's elements differ from pass to pass even after {label}, which "
            "gpuwhy judged reproducible: nothing was changed"
        )
    return f"after {label} the rewritten pipeline gives other elements ({p_diff})"


def _ideal(original: Any, per_pass: int | None, count: int, budget: int):
    """The original's output cached in memory: the most a pipeline fix can give."""
    from gpuwhy.tfapi import data_rewrite as dr

    per_element = _element_bytes(original, dr) or 0
    n = per_pass or count
    note = None
    if per_element and n * per_element > budget:
        n = max(1, budget // per_element)
        note = (
            f"the ideal is measured over {n} cached elements (all of them would not fit the "
            f"memory budget of {_bytes(budget)})"
        )
        return original.take(n).cache(), None, note
    if per_pass is None:
        return original.cache(), None, None
    return original.take(per_pass).cache(), None, note
