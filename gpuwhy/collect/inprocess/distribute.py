"""tf.distribute in a watched run: the strategies the program makes, how its loops feed
the replicas (a distributed dataset, or a plain one passed to ``strategy.run``), and
the global batch each step takes; what crosses devices each step (the values each
traced step all-reduces, gpuwhy.tfapi.reductions), the link it crosses and the
predicted all-reduce time (collective_link), the measured time in collectives
(collective_time, a reading of step_profile), and the variable bytes on each parameter server. The hooks only
keep weak references and small tuples; :meth:`facts` reads them once, after the
program."""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gpuwhy.collect import nvml
from gpuwhy.collect.inprocess.base import Collector, Gathering, RunOptions
from gpuwhy.collect.inprocess.collective_link import link_for, ring_allreduce_s
from gpuwhy.collect.inprocess.collective_time import collective_time, not_measured
from gpuwhy.collect.inprocess.profiler import MULTI_WORKER
from gpuwhy.collect.inprocess.step_profile import StepSampler
from gpuwhy.facts import DistributedInput, DistributeFacts, Facts, ReducedValue
from gpuwhy.source_calls import once_per_version, scaled_by, written_call
from gpuwhy.tfapi import distribute, reductions
from gpuwhy.tfapi.graph_ops import relative
from gpuwhy.tfapi.tfdata import sharding
from gpuwhy.tfapi.tfdata.classes import READERS
from gpuwhy.tfapi.tfdata.dataset_chain import written_chain

MAX_INPUTS = 16  # distributed datasets kept (a loop re-distributing per epoch repeats one)
SCALED = "num_replicas_in_sync"
MAX_REDUCED = 20  # reduced values kept in the facts, largest first (totals are whole)
MAX_TRACED_VALUES = 20_000  # values recorded per traced graph (memory bound)


class DistributeCollector(Collector):
    """``calls``: the step clock of the collective-time sample (tf.function calls so
    far); None: collective time not measured. ``sampler``: the run's step profile,
    where others read it too (one profiler session per process)."""

    name = section = "distribute"
    reads_from = ("step_profile",)  # whose profile it reads
    what = "tf.distribute"
    live = True
    needs_tensorflow = True
    shown = 70

    @classmethod
    def report_rows(cls, facts: Facts, html: bool) -> list[tuple[str, str]]:
        if facts.distribute is None:
            return []
        return [("Distribute", distribute_line(facts.distribute))]

    @classmethod
    def create(cls, options: RunOptions, made: Sequence[Collector]) -> DistributeCollector:
        return cls(sampler=cls.peer_of(made, StepSampler))

    def __init__(
        self, calls: Callable[[], int] | None = None, sampler: StepSampler | None = None
    ) -> None:
        # per traced graph (id): its outermost function's name and the values it reduced
        self._reduced: dict[int, tuple[str, list]] = {}
        self._ps_bytes: dict[int, int] = {}
        self._sampler = sampler if sampler is not None else StepSampler(calls)
        self._collectives: str | None = None  # the function whose all-reduce was traced
        self._multi_worker = False
        self._stopped = False
        self._strategies: list[weakref.ref] = []
        self._described: dict[int, dict[str, Any]] = {}  # id -> describe(), made at creation
        self._inputs: list[DistributedInput] = []
        self._files: set[str] = set()  # where the batches were written
        self._runs: dict[int, int] = {}
        self._run_call: tuple[str | None, int | None] | None = None  # (step fn, its args)
        self._patches: list = []
        self._lock = threading.Lock()
        self.notes: list[str] = []

    def on_tensorflow(self) -> None:
        try:
            self._patches = distribute.install(
                self._on_strategy, self._on_distributed, self._on_run
            )
        except Exception as e:  # noqa: BLE001 - a TF version we do not know
            self.notes.append(f"tf.distribute not watched: {type(e).__name__}: {e}")
            return
        for what, install in (
            ("all-reduced values", self._install_reductions),
            ("parameter-server variables", self._install_ps),
        ):
            try:
                self._patches += install()
            except Exception as e:  # noqa: BLE001 - a TF version we do not know
                self.notes.append(f"tf.distribute {what} not watched: {type(e).__name__}: {e}")

    def _install_reductions(self) -> list:
        return reductions.install(self._on_reduce)

    def _install_ps(self) -> list:
        return distribute.install_ps_variables(self._on_ps_variable)

    def stop(self) -> None:
        self._sampler.stop()
        self._stopped = True
        for patch in reversed(self._patches):
            patch.undo()
        self._patches = []

    # -- hooks (the program's threads) -----------------------------------------------
    def _on_strategy(self, strategy: Any) -> None:
        if distribute.is_default(strategy):
            return
        described = distribute.describe(strategy)
        with self._lock:
            self._strategies.append(weakref.ref(strategy))
            self._described[id(strategy)] = described
        if described.get("workers", 0) >= 2:
            self._no_profiler()

    def _on_distributed(
        self, how: str, strategy: Any, dataset: Any, read_pipeline_id: bool = False
    ) -> None:
        from_function = how != "experimental_distribute_dataset"
        batch, filename, line = (
            distribute.batch_of(dataset) if dataset is not None else (None, None, None)
        )
        api = "batch"
        if not from_function:
            fit_batch, fit_file, fit_line = distribute.keras_fit_batch()
            if fit_batch is not None:  # fit(x, y, batch_size=...): Keras batched the arrays
                batch, filename, line, api = fit_batch, fit_file, fit_line, "fit"
        location = relative(filename, line) if filename and line else None
        found = DistributedInput(
            how=how,
            # a dataset function batches per replica (input_context): no global batch
            global_batch=None if from_function else batch,
            location=None if from_function else location,
            auto_shard=distribute.auto_shard_policy(dataset) if dataset is not None else None,
            written=written_call(filename, line, api)
            if filename and line and not from_function
            else None,
            scaled=scaled_by(filename, line, api, SCALED)
            if filename and line and not from_function
            else None,
        )
        with self._lock:
            workers = self._described.get(id(strategy), {}).get("workers", 0)
        if dataset is not None and workers >= 2:
            try:
                found = _with_sharding(found, dataset, workers, from_function, read_pipeline_id)
            except Exception as e:  # noqa: BLE001 - a pipeline we cannot read: no plan
                self.notes.append(f"how the workers shard a dataset not read: {type(e).__name__}")
        with self._lock:
            if filename:
                self._files.add(filename)
            if found not in self._inputs and len(self._inputs) < MAX_INPUTS:
                self._inputs.append(found)

    def _on_run(self, strategy: Any, fn: Any = None, args: Any = ()) -> None:
        key = id(strategy)
        self._runs[key] = self._runs.get(key, 0) + 1
        if self._run_call is None and fn is not None:  # the step function, for fixes
            name = getattr(fn, "__name__", None) or getattr(fn, "name", None)
            count = len(args) if isinstance(args, (tuple, list)) else None
            self._run_call = (str(name) if name else None, count)
        with self._lock:
            self._reduced.pop(0, None)  # an eager loop: each step's reductions anew

    def _on_reduce(self, reduction: Any) -> None:
        """One replica's all-reduce, as traced (or run eagerly: key 0)."""
        from tensorflow.python.distribute import distribute_lib

        strategy = distribute_lib.get_strategy()
        if int(strategy.num_replicas_in_sync) < 2:
            return  # nothing crosses devices
        with self._lock:
            name, values = self._reduced.setdefault(reduction.graph_key, (reduction.graph, []))
            if len(values) < MAX_TRACED_VALUES:
                values.extend(reduction.values)
        local = len(getattr(strategy.extended, "worker_devices", ()) or ()) or 1
        with self._lock:
            workers = self._described.get(id(strategy), {}).get("workers", 0)
        if workers >= 2:
            self._no_profiler()
            return
        if reduction.graph != "eager":
            self._collectives = reduction.graph
        self._sampler.start_after(reduction.graph, local)

    def _no_profiler(self) -> None:
        """TF's profiler started beside a multi-worker process's collectives crashed
        workers here (heap corruption: 4 of 11 two-worker test clusters lost a worker): never risk the
        cluster for a measurement."""
        self._multi_worker = True
        self._sampler.forbid(MULTI_WORKER)

    def _on_ps_variable(self, placed: list[tuple[int, int]]) -> None:
        with self._lock:
            for task, size in placed:
                self._ps_bytes[task] = self._ps_bytes.get(task, 0) + size

    # -- facts -------------------------------------------------------------------------
    def fill(self, gathering: Gathering) -> DistributeFacts | None:
        return self.facts(gathering.options.script)

    def program_notes(self) -> list[str]:
        return list(self.notes)

    def facts(self, script: str | None = None) -> DistributeFacts | None:
        """The section; None when the program made no strategy. ``script``: the file
        whose code tells whether the batch was scaled by the replicas."""
        with self._lock:
            described = list(self._described.items())
            inputs = tuple(self._inputs)
            files = set(self._files)
        if not described:
            return None
        key, main = max(described, key=lambda kv: kv[1]["replicas"])
        if script:
            files.add(script)
        crossing = self._crossing(main)
        return DistributeFacts(
            strategy=main["strategy"],
            replicas=main["replicas"],
            devices=main["devices"],
            cross_device=main["cross_device"],
            cross_device_why=main.get("cross_device_why"),
            communication=main["communication"],
            task_type=main["task_type"],
            task_index=main["task_index"],
            workers=main["workers"],
            parameter_servers=main["parameter_servers"],
            strategies=len(described),
            runs=self._runs.get(key, 0),
            run_function=self._run_call[0] if self._run_call else None,
            run_args=self._run_call[1] if self._run_call else None,
            inputs=inputs,
            scaled_by_replicas=_names_replicas(files) if files else None,
            variable=_variable(files),
            **crossing,
        )

    def _crossing(self, main: dict[str, Any]) -> dict[str, Any]:
        """The facts of what crosses devices: the traced step that reduces most bytes,
        its link and predicted all-reduce time, the measured collective time, and the
        parameter servers' variable bytes."""

        with self._lock:
            traced = [(name, list(values)) for name, values in self._reduced.values()]
            ps = dict(self._ps_bytes)
        found: dict[str, Any] = {}
        if ps:
            count = max(main["parameter_servers"], max(ps) + 1)
            found["ps_bytes"] = tuple(ps.get(i, 0) for i in range(count))
        measured = self._measured()
        if not traced:
            return found
        _, values = max(traced, key=lambda t: sum(v.bytes or 0 for v in t[1]))
        total = sum(v.bytes or 0 for v in values)
        sparse = [v.name for v in values if v.bytes is None]
        if sparse:
            self.notes.append(
                f"all-reduce bytes leave out {len(sparse)} sparse gradient(s) whose size "
                f"depends on the batch ({', '.join(sparse[:3])})"
            )
        kept = sorted(values, key=lambda v: -(v.bytes or 0))[:MAX_REDUCED]
        found["reduced"] = tuple(
            ReducedValue(name=v.name, shape=v.shape, dtype=v.dtype, bytes=v.bytes or 0)
            for v in kept
        )
        found["reduced_values"] = len(values)
        found["reduced_bytes"] = total
        link = link_for(main["devices"], main["workers"], main.get("hosts", ()), _topology(main))
        found["link"], found["link_source"] = link.name, link.source
        if link.bytes_per_s:
            found["link_gb_per_s"] = round(link.bytes_per_s / 1e9, 3)
        found["allreduce_expected_s"] = ring_allreduce_s(total, main["replicas"], link.bytes_per_s)
        if measured is not None:
            found["collective_step_s"] = round(measured.per_step_s, 6)
            found["collective_share"] = round(measured.share, 4)
            found["collective_measured_by"] = measured.measured_by
            if measured.wait_s is not None:
                found["collective_wait_s"] = round(measured.wait_s, 6)
        return found

    def _measured(self):
        """The time in collectives of the profiled steps; once the run ended, a note
        where it was not measured."""
        note = None
        measured = None
        if self._multi_worker:
            note = f"time in collectives not measured: {MULTI_WORKER}"
        elif self._collectives is not None:
            profile = self._sampler.result
            if profile is not None and profile.function == self._collectives:
                measured = collective_time(profile)
            if measured is None:
                note = not_measured(profile, self._collectives, self._sampler.reason)
        if note and self._stopped and note not in self.notes:
            self.notes.append(note)
        return measured


def _topology(main: dict[str, Any]) -> dict[str, Any] | None:
    """NVML's topology where the strategy's replicas are local GPUs."""
    if not any("GPU" in d.upper() for d in main["devices"]):
        return None

    return nvml.topology()


def _with_sharding(
    found: DistributedInput,
    dataset: Any,
    workers: int,
    from_function: bool,
    read_pipeline_id: bool = False,
) -> DistributedInput:
    """``found`` with what the auto-shard rewrite does to ``dataset`` across the
    workers; a dataset function's datasets are not rewritten (each worker runs the
    function, which shards by its input_context or not at all). The pipeline shards
    itself where it calls shard() anywhere, or where its dataset function reads its
    pipeline id (to slice its files or records, or filter by it); what it reads is kept
    for the merge to compare with the other workers'."""
    import dataclasses

    graph = sharding.serialized_graph(dataset)
    plan = sharding.plan(
        dataset, found.auto_shard or "AUTO", 1 if from_function else workers, graph
    )
    reads = sharding.reads(dataset, graph)
    sharded_by = "shard()" if plan.sharded_in_code or reads.shards else None
    if sharded_by is None and read_pipeline_id:
        sharded_by = "input_pipeline_id"
    chain = written_chain(dataset)
    applied = "OFF" if from_function else plan.applied
    work = [t for t in chain if sharding.matches(t.op, sharding.WORK_OPS) and not t.by_library]
    repeated = tuple(
        f"{t.call or t.api} ({t.location})" if t.location else (t.call or t.api) for t in work
    )
    heavy = any(t.python or t.codec_ops or t.api in READERS for t in work)
    source = chain[0] if chain else None
    return dataclasses.replace(
        found,
        shard_applied=applied,
        shard_reason=None if from_function else plan.reason,
        shard_error=None if from_function else plan.error,
        shard_files=plan.files,
        sharded_in_code=sharded_by is not None,
        sharded_by=sharded_by,
        reads_digest=reads.digest,
        read_files=reads.files,
        repeated_work=repeated if applied == "DATA" else (),
        repeated_heavy=heavy and applied == "DATA",
        shuffled=any(t.api == "shuffle" for t in chain),
        source=(source.call or source.api) if source else None,
        source_location=source.location if source else None,
    )


STRATEGY_ASSIGNED = re.compile(r"^\s*(\w+)\s*=\s*(?:tf\.distribute\.|\w+\.)*\w*Strategy\(", re.M)


@once_per_version(maxsize=32)
def _text(name: str) -> str | None:
    """A source file's text (facts are read at each live-metrics update too)."""
    try:
        return Path(name).read_text(errors="replace")
    except OSError:
        return None


def _variable(files: set[str]) -> str | None:
    """The name the code assigns its strategy to (``strategy = tf.distribute.Mirrored
    Strategy()``), for fixes that use it."""
    for name in sorted(files):
        text = _text(name)
        found = STRATEGY_ASSIGNED.search(text) if text is not None else None
        if found:
            return found.group(1)
    return None


def _names_replicas(files: set[str]) -> bool | None:
    """Whether the code that batched (or the script) uses num_replicas_in_sync."""
    texts = [text for text in map(_text, files) if text is not None]
    if any(SCALED in text for text in texts):
        return True
    return False if texts else None


# -- its rows in the reports ------------------------------------------------------
def distribute_line(distribute: DistributeFacts) -> str:
    """The strategy, how it reduces, and how the loops feed its replicas."""
    devices = ", ".join(d.rsplit("/", 1)[-1].removeprefix("device:") for d in distribute.devices)
    text = f"{distribute.strategy}, {distribute.replicas} replica(s)" + (
        f" ({devices})" if devices else ""
    )
    reduce = distribute.cross_device or ""
    if distribute.communication:
        reduce += f"{', ' if reduce else ''}collectives {distribute.communication}"
    if reduce:
        text += f"; all-reduce by {reduce}"
    if distribute.task_type is not None:
        text += f"; task {distribute.task_type} {distribute.task_index} of {distribute.workers} worker(s)"
    if distribute.parameter_servers:
        text += f", {distribute.parameter_servers} parameter server(s)"
    fed = []
    for given in distribute.inputs:
        fed.append(_distributed_input(given, distribute.replicas))
    if fed:
        text += "; distributed datasets: " + "; ".join(fed)
    elif distribute.runs:
        text += "; no dataset distributed"
    return text + _crossing(distribute)


def _distributed_input(given: DistributedInput, replicas: int) -> str:
    """One distributed dataset: its batch and how the workers divide it."""
    if given.how == "distribute_datasets_from_function":
        text = "from a dataset function" + (
            f" ({given.source} at {given.source_location})" if given.source_location else ""
        )
        if given.shard_applied is not None:
            text += ", sharded by its input context" if given.sharded_in_code else ", never sharded"
        return text
    text = (
        f"global batch {given.global_batch} ({given.global_batch / replicas:g} per replica)"
        if given.global_batch
        else "batch unknown"
    )
    text += f" at {given.location or '?'}"
    if given.shard_applied is not None:
        asked = given.auto_shard or "AUTO"
        text += f", auto-shard {asked}" + (
            f" -> {given.shard_applied}" if given.shard_applied != asked else ""
        )
        if given.shard_files is not None:
            text += f" over {given.shard_files} file(s)"
        if given.sharded_in_code:
            text += ", sharded in code"
    elif given.auto_shard:
        text += f", auto-shard {given.auto_shard}"
    return text


def _crossing(distribute: DistributeFacts) -> str:
    """What crosses devices each step: bytes all-reduced, the link, the predicted and the
    measured all-reduce time; the parameter servers' variable bytes."""
    text = ""
    if distribute.reduced_bytes is not None:
        text += (
            f"; all-reduces {distribute.reduced_bytes / 2**20:.2f} MiB a step in "
            f"{distribute.reduced_values} value(s)"
        )
        if distribute.link:
            text += f" over {distribute.link}"
        if distribute.allreduce_expected_s is not None:
            text += f", {distribute.allreduce_expected_s * 1000:.2f} ms predicted"
    if distribute.collective_step_s is not None and distribute.collective_share is not None:
        text += (
            f"; in collectives {distribute.collective_step_s * 1000:.2f} ms a step "
            f"({distribute.collective_share:.0%}, measured)"
        )
    if distribute.ps_bytes:
        text += (
            "; parameter servers hold "
            + ", ".join(f"{b / 2**20:.1f}" for b in distribute.ps_bytes)
            + " MiB"
        )
    return text
