"""The plan of a rewrite: for each stage of the pipeline as written, which fix is safe
(parallel map or interleave, parallel reads, cache, prefetch, any order) and which is
left as written, with the reason and the line to paste. Reads the parsed chain; builds
nothing (gpuwhy.optimize.rebuild does)."""

from __future__ import annotations

import linecache
import os
from dataclasses import dataclass, field, replace
from typing import Any

from gpuwhy.facts import PipelineChange
from gpuwhy.formatting import byte_size
from gpuwhy.optimize.measure import element_bytes as measured_bytes
from gpuwhy.optimize.result import LeftAlone
from gpuwhy.tfapi.tfdata import cache_safety, dataset_size, stages
from gpuwhy.tfapi.tfdata import rewrite as dr

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


@dataclass
class Plan:
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


class Planner:
    def __init__(
        self,
        chain: list,
        options: Any,
        *,
        keep_order: bool,
        cache: str | bool,
        assume_pure: bool,
        budget: int,
        measured_serial: dict[int, str] | None = None,
        measured_parallel: dict[int, str] | None = None,
    ) -> None:
        # Python maps whose parallel calls were measured to gain nothing: index -> why
        self.measured_serial = measured_serial or {}
        self.measured_parallel = measured_parallel or {}  # ... and those that gained

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

    def plan(self) -> Plan:
        p = Plan()
        frozen = self.frozen_upto()
        reason = below = ""
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
            elif stage.sequential_interleave:
                self._plan_interleave(p, i, stage, frozen)
            elif stage.kind == "tfrecord":
                self._plan_tfrecord(p, i, stage, frozen)
        self._plan_cache(p, frozen)
        self._plan_prefetch(p)
        self._plan_order(p)
        if frozen >= 0 and p.cache_after == frozen:
            # the cache goes on the stage kept as written: said with it, not as a
            # contradiction of the change that adds it
            p.left_alone[0] = replace(
                p.left_alone[0],
                reason=f"kept as written{below}, the cache added after it: {reason}",
            )
        return p

    # each fix --------------------------------------------------------------------------
    def _plan_map(self, p: Plan, i: int, stage, frozen: int) -> None:
        fn = stage.functions[0] if stage.functions else None
        if fn is None:
            return
        if stage.params.get("synchronous"):
            p.left_alone.append(
                LeftAlone(stage.describe(), _where(stage), "written with synchronous=True")
            )
            return
        if i in self.measured_serial:
            p.left_alone.append(LeftAlone(stage.describe(), _where(stage), self.measured_serial[i]))
            return
        python_ok = fn.python and self.assume_pure and not (fn.random or fn.unsafe_stateful)
        if not (fn.stateless_enough or python_ok):
            p.left_alone.append(LeftAlone(stage.describe(), _where(stage), _why_sequential(fn)))
            return
        if stage.written_sequential and fn.tf_parallelises and self.tf_does["map_parallelization"]:
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
            if stage.written_sequential
            else "runs with num_parallel_calls=1"
        )
        if fn.python:
            why += (
                "; parallel because assume_pure=True (Python functions hold the GIL: "
                "it helps when they release it, e.g. in NumPy or I/O)"
            )
            if i in self.measured_parallel:
                why += f"; {self.measured_parallel[i]}"
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

    def _plan_interleave(self, p: Plan, i: int, stage, frozen: int) -> None:
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

    def _plan_tfrecord(self, p: Plan, i: int, stage, frozen: int) -> None:
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

    def _plan_cache(self, p: Plan, frozen: int) -> None:
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
        first_random = cache_safety.first_varying(chain, assume_pure=self.assume_pure)
        reproducible_upto = first_random[0] - 1 if first_random else len(chain) - 1
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
        inside = _inside_library(chain, j)
        if inside is not None:
            p.left_alone.append(
                LeftAlone(
                    "cache()",
                    None,
                    f"not inserted: the last stage whose elements repeat, {chain[j].describe()}, "
                    f"is inside a dataset a library built ({inside}): the program has no line "
                    "to cache it at",
                )
            )
            return
        if self.cache == "auto" and all(s.kind in _CHEAP_KINDS for s in chain[: j + 1]):
            higher = why_not or (first_random[1] if first_random else None)
            p.notes.append(
                "no cache: "
                + (f"not higher up, as {higher}; " if higher else "")
                + f"up to {chain[j].describe()} the stages are cheap (sources "
                "already in memory, batching)"
            )
            return
        per_element = element_bytes(chain[j].dataset, dr)
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
                    f"not inserted after {chain[j].describe()}: it would hold ~{byte_size(size)} "
                    f"({bound} elements x {byte_size(per_element)}), over the memory budget of "
                    f"{byte_size(self.budget)} (memory_budget_bytes); cache to a file "
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
                f"memory (~{byte_size(size)}); the stages above stay live{reason_above}"
                if first_random
                else f"the whole pipeline gives the same elements on every pass, so epochs after the "
                f"first read them from memory (~{byte_size(size)})",
            )
        )

    def _plan_prefetch(self, p: Plan) -> None:
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

    def _plan_order(self, p: Plan) -> None:
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


def _inside_library(chain: list, j: int) -> str | None:
    """Where stage ``j`` and the one after it were both made by a library (Keras'
    ``text_dataset_from_directory`` zips, shuffles and batches inside one call): a cache
    between them cannot be written in the program; what the library stage is, else None."""
    if j + 1 >= len(chain):
        return None
    made = stages.made_by_user
    if made(chain[j].dataset) is False and made(chain[j + 1].dataset) is False:
        return f"{chain[j + 1].describe()} follows it there"
    return None


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
    n = dataset_size.cardinality(chain[j].dataset)
    if n >= 0 or n == dataset_size.INFINITE:
        return n
    k = j
    while k > 0 and chain[k].kind in _COUNT_KEEPING_OR_SHRINKING:
        k -= 1
        n = dataset_size.cardinality(chain[k].dataset)
        if n >= 0:
            return n
        if n == dataset_size.INFINITE:
            return None
    return None


def element_bytes(dataset: Any, dr) -> int | None:
    static = dataset_size.element_bytes(dataset)
    if static is not None:
        return static
    sizes = []
    try:
        for element in dataset.take(4):
            sizes.append(measured_bytes(element))
    except Exception:  # noqa: BLE001 - the user's pipeline fails: the check will say so
        return None
    return max(sizes) if sizes else 0
