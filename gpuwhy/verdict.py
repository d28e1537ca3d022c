"""The one-line verdict that opens every report: the answer before the details."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from gpuwhy.derived import capture as capture_facts
from gpuwhy.derived.cache_passes import cache_passes, cache_read_once, one_element_passes
from gpuwhy.derived.environment import tf_can_use_gpu
from gpuwhy.derived.gpu_busy import steady_differs
from gpuwhy.derived.host_load import judged_for_input
from gpuwhy.derived.pipeline import bottleneck, steady_bottleneck
from gpuwhy.derived.stage import derived
from gpuwhy.derived.steps_input import steps_wait_at
from gpuwhy.derived.worker_times import compare, standing_out
from gpuwhy.facts import (
    CaptureFacts,
    Facts,
    FixTrialFacts,
    FixTried,
    GpuBusy,
    InputFix,
    InputFixFacts,
    PlacementFacts,
    ProgramFacts,
    ProjectionFacts,
    StepFacts,
    WorkersFacts,
)
from gpuwhy.finding import Finding
from gpuwhy.fixes.input_fix_text import LIBRARY_INPUT_HINT
from gpuwhy.fixes.trial_text import NOT_FOUND, PROGRAM_NOTES
from gpuwhy.formatting import duration, stage_label
from gpuwhy.rules.distribute.straggler import Straggler
from gpuwhy.rules.input.bound import InputBound

# the projected step's share in ops that stay on the CPU that the verdict names
CPU_OPS_SHARE = 0.2
# the finding whose projected input wait the verdict states
PROJECTED_INPUT = "input.projected-bound"
# input.bound's options: the verdict asks the steps' wait as the rule asks it
_BOUND = InputBound.options


def gpu_usable(facts: Facts) -> bool | None:
    """True/False when the environment was checked, None when it was not."""
    return tf_can_use_gpu(facts.environment) if facts.environment else None


def verdict(facts: Facts, findings: list[Finding], drawn: Collection[str] = ()) -> str:
    """The verdict. ``drawn``: what the HTML page's picture beside it draws
    (report/run/step_bars.py), which a run's verdict then leaves to the picture so that
    it fits two lines: "step" (the bar of the median step, its time written beside it),
    "projection" (the projected bar, its band and wait written beside it), "busy" (the
    GPU-busy figure under the picture, in these words)."""
    if facts.workers is not None:
        return _merge_verdict(facts.workers, findings)
    if facts.input_fixes is not None:
        return _fix_verdict(facts.input_fixes)
    if facts.fix_trial is not None:
        return _trial_verdict(facts.fixes_tried or (), facts.fix_trial, facts)
    if facts.program is not None:
        return _run_verdict(facts, facts.program, findings, drawn)
    if facts.capture is not None:
        return _capture_verdict(facts.capture, findings)
    usable = gpu_usable(facts)
    if usable is False:
        no_gpu = next((f for f in findings if f.id == "env.no-gpu"), None)
        title = no_gpu.title.split(": ", 1)[-1] if no_gpu else "no GPU"
        return f"No: TensorFlow cannot use a GPU here: {title}."
    tf = facts.environment.tensorflow if facts.environment is not None else None
    if usable and tf is not None:  # a usable GPU was found by importing TensorFlow
        names = ", ".join(
            f"{d.get('device_name', d.get('name'))}"
            + (
                f" (compute capability {'.'.join(map(str, d['compute_capability']))})"
                if isinstance(d.get("compute_capability"), (list, tuple))
                else ""
            )
            for d in tf.gpu_details
        ) or ", ".join(tf.gpus)
        worst = findings[0] if findings else None
        tail = f"; but: {worst.title}" if worst and worst.severity in ("high", "medium") else ""
        return f"Yes: TensorFlow {tf.version} ran a matmul on {tf.confirm_device} [{names}]{tail}."
    if facts.placement is not None:
        return _placement_verdict(facts.placement, findings)
    busy = busy_text(facts)
    if busy is not None:  # a recording of the GPU alone (gpuwhy report RECORDING.jsonl)
        worst = next((f for f in findings if f.severity in ("high", "medium")), None)
        tail = f"; worst: {_headline(worst.title)}" if worst is not None else ""
        text = busy[0].upper() + busy[1:] + tail
        return text if text.endswith(("…", ".")) else text + "."
    if findings:
        return findings[0].title
    return "No problems found."


def _capture_verdict(capture: CaptureFacts, findings: list[Finding]) -> str:
    """A profiler capture: the GPU's measured busy share of its steps, then the worst."""
    worst = next((f for f in findings if f.severity in ("high", "medium")), None)
    steps = len(capture.steps)
    if not steps:
        return (
            "Captured: no steps found (no step markers, no repeated tf.function call, no "
            "kernel the GPU repeats)" + (f"; {_headline(worst.title)}" if worst else "") + "."
        )
    if worst is not None:
        tail = f": {_headline(worst.title)}"
    elif not capture_facts.decides(capture):
        tail = "; " + _too_few(capture)
    else:
        tail = "; no problem found in them"
    what = f"{steps} captured step{'s' if steps != 1 else ''} of {duration(capture.median_step_s)}"
    busy = capture.busy_share
    if busy is None:
        head = f"{what}, no GPU in the capture (host events only)"
    else:
        gpus = len(capture.devices)
        head = (
            f"GPU busy {busy:.0%} of {what} (measured: its kernels)"
            if gpus == 1
            else f"Any of {gpus} GPUs busy {busy:.0%} of {what} (measured: their kernels)"
        )
    text = head + tail
    return text if text.endswith(("…", ".")) else text + "."


def _too_few(capture: CaptureFacts) -> str:
    """What a capture of fewer steps than the rules judge (a single profiled batch)
    can say, and how to capture enough."""
    more = f"capture {capture_facts.MIN_STEPS} or more to judge them"
    if capture.step_name == "Profiled batch":  # Keras' TensorBoard callback
        more += ", TensorBoard(profile_batch=(3, 5))"
    return f"too few steps for the rules that need several ({more})"


def _placement_verdict(placement: PlacementFacts, findings: list[Finding]) -> str:
    nodes = sum(f.nodes for f in placement.functions)
    gpu = sum(f.gpu for f in placement.functions)
    host = sum(f.host for f in placement.functions)
    cpu = sum(f.cpu for f in placement.functions)
    if placement.predicted:
        where = (
            f"Predicted for this machine's {placement.gpu_name}"
            if placement.gpu_name
            else "Predicted for a GPU machine (none here)"
        )
    else:
        where = f"Seen on {placement.gpu_name or 'the GPU'}"
    text = f"{where}: {gpu:,} of {nodes:,} ops compute on the GPU, {cpu:,} on the CPU"
    if host:
        text += f", {host:,} in host memory by design"
    worst = findings[0] if findings else None
    if worst and worst.severity in ("high", "medium"):
        return f"{text}; worst: {worst.title}"
    return text + ("; no placement problems found." if not findings else ".")


def _run_verdict(
    facts: Facts, program: ProgramFacts, findings: list[Finding], drawn: Collection[str] = ()
) -> str:
    """A watched run: where it ran, how fast a step was, and the worst problem."""
    usable = gpu_usable(facts)
    worst = next(
        (
            f
            for f in findings
            if f.severity in ("high", "medium") and not (usable is False and f.id == "env.no-gpu")
        ),
        None,
    )
    details = []
    steps = facts.steps
    if steps is not None and steps.median_s is not None:
        details.append(_steps_clause(facts, steps, steps.median_s, findings, "step" in drawn))
    elif program.tensorflow_imported:
        details.append("no training steps found")
    busy = busy_text(facts)
    if busy is not None and program.tensorflow_imported and "busy" not in drawn:
        details.append(busy)
    projection = derived(facts).projection
    if projection is not None and "projection" not in drawn:
        details.append(projection_clause(projection, findings))
    if program.ended == "exit":
        details.append(f"exit status {program.exit_code}")
    text = _run_head(facts, program, findings, usable, worst) + (
        ": " + ", ".join(details) if details else ""
    )
    text += _worst_clause(facts, findings, worst, text)
    return text if text.endswith(("…", ".")) else text + "."


def _run_head(
    facts: Facts,
    program: ProgramFacts,
    findings: list[Finding],
    usable: bool | None,
    worst: Finding | None,
) -> str:
    """How the run ended, or where it ran."""
    if program.ended == "exception":
        return f"The program failed ({program.error}) after {program.seconds:.1f} s"
    if program.ended == "interrupted":
        return f"Interrupted after {program.seconds:.1f} s"
    if program.ended == "terminated":
        return f"Terminated (SIGTERM) after {program.seconds:.1f} s"
    if usable is False:
        no_gpu = next((f for f in findings if f.id == "env.no-gpu"), None)
        cause = no_gpu.title.split(": ", 1)[-1] if no_gpu else "no GPU"
        return f"Ran on the CPU: TensorFlow cannot use a GPU here ({cause})"
    if usable:
        return "Ran on the GPU" if worst is None else "GPU underused"
    if not program.tensorflow_imported:
        # any program (PyTorch, JAX ...): its GPU first
        busy = busy_text(facts)
        return busy[0].upper() + busy[1:] if busy else "The program never imported TensorFlow"
    return "Ran"


def _steps_clause(
    facts: Facts, steps: StepFacts, median_s: float, findings: list[Finding], drawn: bool = False
) -> str:
    """The steps, their median (unless ``drawn`` beside the verdict), and how much of
    their time waited for input (and on what): a share of their total, not of the
    median step (which the gap between the mean and the median would misstate)."""
    text = f"{steps.count:,} steps" + ("" if drawn else f", median {median_s * 1000:,.1f} ms")
    bound = next((f for f in findings if f.id == "input.bound"), None)
    # what input.bound found the wait to be, asked as it asks it (never read back from
    # its evidence): a steps' wait it reported is one of these
    reading = steps_wait_at(facts, _BOUND["medium_at"]) if bound is not None else None
    others = _others_load(facts) if bound is not None else None
    # input.bound: the host was loaded, not (only) the input
    loaded = (
        ""
        if others is None
        else f" while other processes kept {others:.0%} of the host's cores busy"
    )
    if reading is not None and reading.fetch_overhead_s is not None:
        # the wait is the iterator call, not the pipeline (input.bound says why)
        text += (
            f", {steps.input_wait_fraction:.0%} of their time in next() "
            "(the Python call per step, not the pipeline)"
        )
        return text + loaded
    if reading is not None and reading.cache_filling is not None:
        # the first pass filled the cache; the passes after it keep up (input.bound)
        return text + (
            f", {steps.input_wait_fraction:.0%} of their time waiting for input, in the first "
            "pass (it fills the cache)"
        )
    if steps.input_wait_fraction is None:
        return text
    if not steps.input_wait_resolved and steps.input_wait_error is not None:
        # a difference of two means within its uncertainty: said as the Steps line says
        # it, never as a wait the headline stands by
        return text + (
            f", no wait for input shown (measured {steps.input_wait_fraction:.0%} of their "
            f"time, ±{steps.input_wait_error:.1%}: not told from none)"
        )
    text += f", {steps.input_wait_fraction:.0%} of their time waiting for input"
    stage = _bottleneck(facts) if steps.input_wait_fraction >= 0.05 else None
    if stage and not (others is not None and bound and bound.severity == "low"):
        text += f" (slowest stage: {stage})"
    return text + loaded


def _worst_clause(
    facts: Facts, findings: list[Finding], worst: Finding | None, said: str = ""
) -> str:
    """ "; worst: ..." naming the worst problem the clauses before (``said``) have not
    said, a stage they named called "the slowest stage"."""
    steps = facts.steps
    label = "worst"
    if (
        worst is not None
        and worst.id == "input.bound"
        and steps is not None
        and steps.input_wait_fraction is not None
    ):
        # its wait and stage are already said: name the next problem, as "also" (called
        # "worst", a lesser finding read as worse than the wait said before it)
        label = "also"
        worst = next(
            (
                f
                for f in findings
                if f.severity in ("high", "medium") and f.id not in ("input.bound", "env.no-gpu")
            ),
            None,
        )
    if worst is not None and worst.id == PROJECTED_INPUT and derived(facts).projection:
        # its projected wait is already said in the clause: the worst is the input, named
        # by its slowest stage (a lesser finding named here would read as the worst)
        stage = _steady_bottleneck(facts) or _bottleneck(facts)
        named = stage is None or f"(slowest stage: {stage}" in said  # said once is enough
        return "; worst: the input pipeline" + ("" if named else f" (slowest stage: {stage})")
    if worst is None:
        return ""
    return f"; {label}: {_headline(_said_once(worst.title, _stage_said(facts, said)))}"


def _stage_said(facts: Facts, said: str) -> str | None:
    """The slowest stage the clauses before have named, where they named it."""
    stage = _bottleneck(facts)
    return stage if stage is not None and f"(slowest stage: {stage}" in said else None


def _said_once(headline: str, stage: str | None) -> str:
    """A worst finding's headline that names the stage the steps clause already named,
    with the stage as "the slowest stage": a long file:line said twice in one line buries
    the answer (issue #48)."""
    if not stage or stage not in headline:
        return headline
    said = next(s for s in (f"Input stage {stage}", f"input stage {stage}", stage) if s in headline)
    headline = headline.replace(said, "the slowest stage", 1)
    # "... runs on one thread and is the slowest stage": said of the slowest stage, the
    # second half says nothing; and the clauses after the first say how long the steps
    # wait for it, which the steps clause said before
    return headline.replace(" and is the slowest stage", "", 1).split("; ", 1)[0]


def _trial_verdict(tried: tuple[FixTried, ...], trial: FixTrialFacts, facts: Facts) -> str:
    """``gpuwhy fix SCRIPT``: what the patch gives, or why there is no patch."""
    if trial.original_error is not None:
        return f"The program did not run ({trial.original_error}): no fix was tried."
    stopped = facts.program is not None and facts.program.ended == "stopped"
    if not tried and stopped and (facts.steps is None or not facts.steps.count):
        # the bound ended the run before its training began (a script that writes its
        # TFRecords first): nothing was judged, which is not "nothing to fix"
        return (
            f"The original reached no training step in its first {trial.bound_s:g} s: "
            f"nothing was judged or tried (a longer --bound, e.g. --bound "
            f"{4 * trial.bound_s:g}, reads into its training)."
        )
    if not tried:
        unfound = [finding for finding, why in trial.not_tried if why.startswith(NOT_FOUND)]
        if unfound and len(unfound) == len(trial.not_tried):
            return (
                f"{', '.join(unfound)} {'was' if len(unfound) == 1 else 'were'} not found in "
                f"the original's first {trial.bound_s:g} s: nothing was tried (a longer "
                f"--bound, e.g. --bound {4 * trial.bound_s:g}, reads more of the run)."
            )
        asked = [finding for finding, why in trial.not_tried if "gpuwhy fix --finding" in why]
        if asked:
            return (
                "No high or medium finding has a fix gpuwhy can apply: nothing was tried "
                f"(low, tried when asked: gpuwhy fix --finding {asked[0]})."
            )
        return "No fix gpuwhy can apply to this program's findings: nothing was tried."
    held = sum(t.held for t in tried)
    patched = [t for t in tried if t.in_patch]
    failed = sum(not t.ran for t in tried)
    changed = sum(t.ran and t.same_results is False for t in tried)
    tail = ""
    if failed or changed:
        tail = "; " + ", ".join(
            part
            for part in (
                f"{failed} crashed" if failed else "",
                f"{changed} changed the results" if changed else "",
            )
            if part
        )
    # ran the same, and no step to time it by (a short run's few calls): not slower
    untimed = sum(
        t.ran and t.same_results is not False and t.speedup is None and not t.projected
        for t in tried
    )
    if untimed:
        tail += (
            f"; {untimed} could not be timed: too few steps in each run's {trial.bound_s:g} s "
            f"(a longer --bound, e.g. --bound {4 * trial.bound_s:g}, reads more of the run)"
        )
    if not patched:
        return f"No fix held: {len(tried)} tried, none both ran the same and was faster{tail}."
    best = trial.combined if trial.combined is not None and trial.combined.in_patch else patched[0]
    if best.speedup is not None and not best.projected:
        measure = "the program" if best.speed_note in PROGRAM_NOTES else "step"
        gain = (
            f"{measure} {best.speedup:.2f}x faster "
            f"({best.speedup_low:.2f}x-{best.speedup_high:.2f}x)"
        )
    elif best.projected_speedup is not None:
        gain = f"step projected {best.projected_speedup:.2f}x faster on {best.projected_gpu}"
    else:
        gain = "held"
    names = " + ".join(t.fix for t in patched)
    # two fixes of one place that both held (a step traced, and traced with XLA): the
    # patch keeps the one proven faster, and says it keeps one of them
    kept = ", in the patch" if len(patched) == held else f"; the patch keeps {len(patched)}"
    return f"{held} of {len(tried)} fixes held{kept}: {names}: {gain}, same results{tail}."


def _over_run(fix: InputFix) -> float:
    """The rewrite's gain as the program sees it: over its passes where a cache's first
    pass is said apart (derived/cache_passes.py), else the timed passes' median."""
    split = cache_passes(fix)
    if split is not None:
        return split.over_run if split.over_run is not None else split.later
    return fix.speedup or 0.0


def _fix_verdict(input_fixes: InputFixFacts) -> str:
    """``gpuwhy fix --input``: the best measured gain, or why there is none."""
    fixes = input_fixes.fixes
    if not fixes:
        if input_fixes.library_only:
            # Keras' fit over a PyDataset, a generator or arrays: a pipeline Keras builds
            return (
                "No tf.data pipeline of the program's own was iterated (a library built the "
                f"one read at {', '.join(input_fixes.library_only)}): nothing for --input to "
                f"rewrite; {LIBRARY_INPUT_HINT}."
            )
        return "No tf.data pipeline of the program's own was iterated: nothing to optimise."
    kept = [
        (f, _over_run(f))
        for f in fixes
        if f.changes
        and not f.refused
        and f.worth_it
        and f.speedup
        and not cache_read_once(f)
        and not one_element_passes(f)
    ]
    if kept:
        best, speedup = max(kept, key=lambda pair: pair[1])
        split = cache_passes(best)
        faster = f"{speedup:,.1f}x faster" if split is None else split.text
        text = (
            f"Input pipeline {faster} with {len(best.changes)} "
            f"change{'s' if len(best.changes) != 1 else ''} ({best.dataset}"
        )
        if best.gap_closed is not None:
            text += f"; {best.gap_closed:.0%} of the way to its output cached in memory"
        text += ")"
        if best.same_elements:
            text += ", elements unchanged (checked bitwise)"
        more = len(kept) - 1
        return (
            text
            + (f"; {more} more pipeline{'s' if more != 1 else ''} improved" if more else "")
            + "."
        )
    failed = [f for f in fixes if f.error]
    if failed and len(failed) == len(fixes):
        return f"Could not optimise the input pipeline: {failed[0].error}."
    if any(f.refused for f in fixes):
        return f"Rewrite refused: {next(f.refused for f in fixes if f.refused)}."
    once = next((f for f in fixes if cache_read_once(f)), None)
    if once is not None:
        return (
            f"No change the program would gain from: the {once.dataset} is read once, and its "
            "rewrite's gain is a cache only later passes read."
        )
    return (
        "No safe change makes the input pipeline measurably faster"
        + ("" if all(not f.changes for f in fixes) else " (the changes tried gave no gain)")
        + "."
    )


def _bottleneck(facts: Facts) -> str | None:
    """The slowest stage of the pipeline the steps read (the one input.bound names), for
    people: ``ParallelMapV2(parse at train.py:41)``."""
    pipeline = derived(facts).steps_pipeline
    stage = bottleneck(pipeline) if pipeline is not None else None
    return stage_label(stage) if stage is not None else None


def _steady_bottleneck(facts: Facts) -> str | None:
    """The slowest stage of those that run every epoch (the one input.projected-bound
    names), for people."""
    pipeline = derived(facts).steps_pipeline
    index = steady_bottleneck(pipeline) if pipeline is not None else None
    return (
        stage_label(pipeline.stages[index]) if pipeline is not None and index is not None else None
    )


def _others_load(facts: Facts) -> float | None:
    """Other processes' share of the host's cores where input.bound reports it (its
    options decide), rounded as its evidence shows it."""
    result = derived(facts)
    reading = result.steps_wait
    load = judged_for_input(
        result.host_load,
        _BOUND,
        reading.pipeline if reading is not None else None,
        reading.mean_step_s if reading is not None else None,
    )
    return None if load is None else round(load.others, 3)


def _headline(title: str, limit: int = 90) -> str:
    """A finding's title without its list of examples, for the one-line verdict; a head
    still too long ends at its last whole clause, else is cut at a word, never inside
    one."""
    if len(title) <= limit:
        return title
    head = _before_examples(title)
    if len(head) <= limit:
        return head
    cut = head[: limit - 1]
    clause = cut.rfind("; ")
    if clause >= limit // 2:  # a whole clause: "…step); the slowest…" cut nothing in half
        return cut[:clause]
    words = cut.rsplit(" ", 1)[0] if " " in cut else cut
    if words.count("(") > words.count(")"):  # a stage's name cut inside its parentheses
        words = words[: words.rindex("(")]
    return words.rstrip(" ,;:(") + "…"


def _before_examples(title: str) -> str:
    """The title up to its first ``: `` outside parentheses (what follows is its list
    of examples or figures): "The loop calls self.model.predict() every step (a step of
    8 batches: steps_per_execution=8): 60.7 ms a call" is its head up to "=8)", where
    the first ": " left "(a step of 8 batches" open."""
    depth = 0
    for i, char in enumerate(title):
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(0, depth - 1)
        elif depth == 0 and title.startswith(": ", i):
            return title[:i]
    return title


def busy_text(facts: Facts) -> str | None:
    """The busiest GPU the program used, by the one busy figure (derived/gpu_busy.py):
    its share while the program used it, the steady work's where it differs, and why a
    figure that cannot resolve the program is not given."""
    blocks = derived(facts).program_busy
    if not blocks:
        return None
    series, block = blocks[0]
    assert facts.gpu_samples is not None  # the blocks are its GPUs'
    gpu = f"GPU {series.index}" if len(facts.gpu_samples.gpus) > 1 else "GPU"
    if not block.reliable:
        text = (
            f"{gpu} busy: unknown ({block.measure} read {block.share:.0%} but cannot "
            f"resolve this program: {block.why})"
        )
        if block.kernels_share is not None:
            text += (
                f"; its kernels ran {block.kernels_share:.0%} of {block.kernels_steps} "
                "captured steps (measured directly)"
            )
        return text
    text = f"{gpu} busy {block.share:.0%} while the program used it ({block.measure}"
    if block.space_share is not None and block.measure == "SM activity":
        text += f"; engaged {block.time_share:.0%} of the time"
    text += ")"
    if steady_differs(block):
        text += (
            f"; {block.steady_share:.0%} in its {block.steady_span_s:,.0f} s of steady work, "
            f"after {block.startup_s:,.0f} s of start-up and pauses"
        )
    if block.kernels_share is not None:
        text += _kernels_clause(block)
    return text


def _kernels_clause(block: GpuBusy) -> str:
    """The captured steps' kernels beside the sampled figure: the direct measurement of
    those steps, trusted where the two differ by more than a tenth."""
    text = f"; its kernels ran {block.kernels_share:.0%} of {block.kernels_steps} captured steps"
    sampled = block.steady_share if block.steady_share is not None else block.share
    if block.kernels_share is not None and sampled is not None:
        if abs(block.kernels_share - sampled) > 0.1:
            text += f" (measured directly: trusted over the {block.measure} for those steps)"
    return text


def projection_clause(projection: ProjectionFacts, findings: Sequence[Finding] = ()) -> str:
    """For the verdict: on an A100 (projected): step ... (its band), and the projected
    input wait only where input.projected-bound reports it (a share the findings do not
    support is never stated)."""
    # a lower bound: no graph to cost, or matmuls of unknown size left out of it
    at_least = "" if projection.graph and not projection.tensor_ops_unsized else "at least "
    alone = (
        f"{at_least}{duration(projection.step_s)} ({duration(projection.step_low_s)}–"
        f"{duration(projection.step_high_s)})"
    )
    head = f"on {_article(projection.gpu)} {projection.gpu} (projected): step "
    waits = any(f.id == PROJECTED_INPUT for f in findings)
    paced = projection.paced_step_s if waits else None
    if paced is None or projection.input_wait_fraction is None:
        # a step that waits for its input is said to wait, not what it computes
        return head + alone + ("" if waits else _what_sets_the_step(projection))
    low, high = projection.input_wait_low or 0.0, projection.input_wait_high or 0.0
    return (
        f"{head}{duration(paced)}, {projection.input_wait_fraction:.0%} ({low:.0%}–{high:.0%}) "
        f"of it waiting for input (the step alone {alone})"
    )


def _what_sets_the_step(projection: ProjectionFacts) -> str:
    """The part that sets the projected step, where one does: the host's own work where
    it is the step's middle (the larger of it and the GPU's), Python's eager ops in a
    step without a traced function, else ops that stay on the CPU."""
    cpu_ops = projection.cpu_ops_s >= CPU_OPS_SHARE * projection.step_s > 0
    host_paced = projection.host_s >= 0.999 * projection.step_s > 0
    if host_paced and not (cpu_ops and projection.cpu_ops_s >= projection.host_s):
        return ", most of it the host's own work between and in its calls (measured here)"
    if projection.eager_s >= 0.5 * projection.step_s > 0:
        return ", most of it Python issuing eager ops"
    if cpu_ops:
        return f", {duration(projection.cpu_ops_s)} of it ops that stay on the CPU (measured here)"
    return ""


def _article(name: str) -> str:
    return "an" if name[:1].upper() in "AEFHILMNORSX" else "a"


def _merge_verdict(workers: WorkersFacts, findings: list[Finding]) -> str:
    """``gpuwhy merge``: how many workers reported, the straggler or that the load is
    even, who is missing or unreadable, and the worst other problem."""
    read = [w for w in workers.workers if w.state not in ("missing", "unreadable")]
    text = f"{len(read)} worker record{'' if len(read) == 1 else 's'} merged"
    straggler = next((f for f in findings if f.id == "distribute.straggler"), None)
    # the comparison distribute.straggler made, asked as it asks it
    options = Straggler.options
    comparison = compare(workers.workers, options["min_steps"]) if straggler else None
    straggling = (
        standing_out(comparison, options["min_ratio"], options["min_extra_ms"] / 1000)
        if comparison is not None
        else None
    )
    if straggler is not None and straggler.severity == "info":
        # its info finding: hosts saturated where the workers compared, else not measured
        why = (
            "the hosts' cores were all busy"
            if comparison is not None
            else "own work per step not measurable"
        )
        text += f": no straggler can be told apart ({why})"
    elif straggling is not None:
        where = {"input": ", in its input", "compute": ", in its compute"}
        text += (
            f": {straggling.slow.worker.name} is the straggler ({round(straggling.slow.score, 2)}x"
            f" the others' own work per step{where.get(straggling.cause, '')})"
        )
    elif sum(w.state in ("ok", "interrupted") and w.counted_steps > 0 for w in read) >= 2:
        text += ": no straggler (no worker's own work per step stands out)"
    lost = [
        f"{w.name} {w.state}"
        for w in workers.workers
        if w.state in ("missing", "unreadable", "interrupted", "failed")
    ]
    if lost:
        text += "; " + ", ".join(lost[:6]) + (f" and {len(lost) - 6} more" if len(lost) > 6 else "")
    worst = next(
        (
            f
            for f in findings
            if f.severity in ("high", "medium")
            and f.id not in ("distribute.straggler", "env.no-gpu")
        ),
        None,
    )
    if worst is not None:
        text += f"; worst: {_headline(worst.title)}"
    return text
