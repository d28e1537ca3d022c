"""placement.float64: the step computes in float64."""

from __future__ import annotations

from typing import Any

from gpuwhy.facts import EagerFacts, EagerOpSite, Facts, PlacementFacts, is_input_boundary
from gpuwhy.finding import Finding
from gpuwhy.fixes.dataset_calls import with_keywords
from gpuwhy.fixes.op_groups import group_row, op_list, prediction_note, size_text
from gpuwhy.fixes.pipeline_code import IN_PLACE_OF
from gpuwhy.fixes.program_files import located_files
from gpuwhy.rules.base import Rule
from gpuwhy.source_calls import numpy_float64_calls

# Ops that move or hold float64 values without computing on them.
_NOT_COMPUTE = frozenset(
    {
        "Const",
        "Identity",
        "IdentityN",
        "Placeholder",
        "ReadVariableOp",
        "AssignVariableOp",
        "Cast",
        "NoOp",
        "StopGradient",
        "Reshape",
        "Shape",
        "Squeeze",
        "ExpandDims",
        "VarHandleOp",
        "Pack",
        "Unpack",
        "ConcatV2",
        "StridedSlice",
        "Slice",
        "Transpose",
        "GatherV2",
        "ZerosLike",
        "OnesLike",
        "Fill",
        "Switch",
        "Merge",
        "Enter",
        "Exit",
        "NextIteration",
        "PreventGradient",
        "EnsureShape",
        "CheckNumerics",
        "Snapshot",
    }
)
_GAIN = "float32 runs 2x (data-centre GPUs) to 32-64x (consumer GPUs) faster than float64"
_SMALL_GAIN = (
    "little at this size: a float64 op on so few values takes a kernel launch's time on "
    "any GPU, as its float32 twin does; float32 halves their bytes"
)
_FLOATX_LINE = "keras.config.set_floatx('float32')          # if the model was made float64"
_HEAVY = ("MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Conv2D", "Conv3D", "Einsum")
# A float64 tensor of at most this many values (512 KiB) is read, computed and written in
# less than a kernel launch's few microseconds on any GPU, even at a consumer part's 1/64
# float64 rate: its op costs what its float32 twin costs
SMALL_ELEMENTS = 65_536
# The same per row of a batch the trace does not size (fit's steps): one-hot labels and
# class scores of up to a thousand classes, SMALL_ELEMENTS at a batch of 64
SMALL_ROW = 1_024


class Float64(Rule):
    """The step computes in float64, which GPUs run slowly and some ops not at all.

    ## What it detects
    Compute ops in the step (matmul, convolution, element-wise math, reductions) whose
    dtype is float64. The usual sources: `keras.config.set_floatx("float64")`, a layer
    built with `dtype="float64"`, `tf.constant` / `tf.convert_to_tensor` on a NumPy
    array (NumPy defaults to float64), or an explicit `tf.cast(x, tf.float64)`. Keras
    layers cast float inputs to their own dtype, so float64 NumPy data alone only
    doubles the bytes copied; float64 weights or custom math are what trigger this.
    Ops whose float64 tensors are all scalars are left out (a scalar costs its launch,
    whatever its dtype), and so is float64 that only enters the step, cast at once:
    that is data, reported low with the bytes it adds to each step's input copy.
    Float64 ops whose tensors are all small (at most 65,536 values, or 1,024 a batch
    row where the trace leaves the batch unsized: one-hot labels from
    `keras.utils.to_categorical`, which returns float64, meeting a metric's `argmax`)
    are low: each takes a kernel launch's time on any GPU, float64 or not.
    The ops are read from the placement audit of the `tf.function`s the program ran;
    a program that runs its step eagerly (no `tf.function`: a `GradientTape` loop on
    NumPy arrays and variables made from them) is read from the eager op counter
    instead: the ops of its sampled steps whose output is float64, measured as they ran;
    where no training step is found (a loop over NumPy slices), the ops in the lines
    that issue the loop's work, per second of the run.
    Where Keras' float type itself is float64, the finding points at the program's
    `set_floatx` call that made it so (the ops' own line is the `fit` that built the
    layers), and its fix is that call with float32.

    ## Why is this slow?
    Consumer and most inference GPUs (GeForce, T4, L4, L40) run float64 at 1/32 to
    1/64 of their float32 rate; only data-centre parts (A100, H100) reach 1/2. Float64
    never uses the TF32 or 16-bit tensor-core paths, moves twice the bytes of float32
    through memory and PCIe, and a few ops register GPU kernels only for 16/32-bit
    types, so their float64 variants are placed on the CPU with copies around them.

    ## Example
    ```python
    keras.config.set_floatx("float64")        # "for precision"
    model = keras.Sequential([keras.layers.Dense(512, activation="tanh")
                              for _ in range(8)] + [keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    model.fit(x_train, y_train, batch_size=1024)   # x_train: float64 NumPy array
    ```

    Use instead:
    ```python
    keras.config.set_floatx("float32")        # the default; keep float64 only where
    x_train = x_train.astype("float32")       # a measured loss of accuracy needs it
    model = keras.Sequential([keras.layers.Dense(512, activation="tanh")
                              for _ in range(8)] + [keras.layers.Dense(1)])
    ```

    ## Options
    - `min_ops`: float64 compute ops in one step that make the finding (1).
    """

    id = "placement.float64"
    severity = "medium"
    status = "stable"
    needs_any = ("placement", "eager")  # the traced functions' ops, or the eager ones
    options = {"min_ops": 1}
    question = "Why are ops slow / on the CPU?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        placement = facts.placement
        traced = self._traced(facts, placement, options) if placement is not None else []
        if traced:
            return traced
        eager = self._eager(facts.eager, options) if facts.eager is not None else []
        if eager:
            return eager
        return self._data_only(facts, placement) if placement is not None else []

    def _traced(
        self, facts: Facts, placement: PlacementFacts, options: dict[str, Any]
    ) -> list[Finding]:
        """The float64 compute of the traced functions (the placement audit's)."""
        groups = [
            g
            for g in placement.groups
            if "float64" in g.in_dtypes + g.out_dtypes
            and g.op not in _NOT_COMPUTE
            and not is_input_boundary(g.op)  # the iterator delivering the batch: data
            # a scalar's float64 math (a library's log of a constant) costs a launch,
            # like float32's: the rate that float64 loses needs elements to lose it on
            and (g.float64_elements is None or g.float64_elements > 1)
        ]
        total = sum(g.count for g in groups)
        if not groups or total < options["min_ops"]:
            return []
        groups.sort(key=lambda g: (g.op not in _HEAVY, -g.count, g.op))
        on_cpu = sum(g.count for g in groups if g.computes_on == "CPU")
        heavy = sum(g.count for g in groups if g.op.startswith(_HEAVY))
        evidence: dict[str, Any] = {
            "float64_ops": total,
            "float64_matmuls_and_convs": heavy,
            "float64_ops_on_cpu": on_cpu,
            "ops": [group_row(g) for g in groups],
            **prediction_note(placement),
        }
        location = next((g.locations[0] for g in groups if g.locations), None)
        # Keras' float type, where the audit read it, is float32: its line would not help
        floatx = [] if placement.keras_floatx == "float32" else [_FLOATX_LINE]
        fix = "\n".join([*floatx, *_numpy_fix(facts)])
        title = f"{total} float64 op{'s' if total > 1 else ''} in the step: {op_list(groups)}"
        small = _small_size(groups) if not heavy else None
        if small is not None:
            most, per_row = small
            title += f"; each on at most {most:,} float64 values{' a batch row' if per_row else ''}"
            evidence["float64_values_at_most"] = most
            evidence["float64_values_per"] = "batch row" if per_row else "tensor"
        if placement.keras_floatx == "float64":
            set_at = placement.floatx_set_at
            title += "; Keras' float type is float64" + (f" (set at {set_at})" if set_at else "")
            evidence["keras_floatx"] = "float64"
            if set_at:
                evidence["floatx_set_at"] = set_at
            location, fix = set_at or location, _floatx_fix(placement)
        return [self._compute(title, bool(heavy), evidence, fix, location, small is not None)]

    def _compute(
        self,
        title: str,
        heavy: bool,
        evidence: dict[str, Any],
        fix: str,
        location: str | None,
        small: bool = False,
    ) -> Finding:
        """The finding of float64 compute: high where matmuls or convolutions are, low
        where every tensor is small (a launch's work, float64 or not)."""
        return self.finding(
            title,
            severity="high" if heavy else "low" if small else self.severity,
            evidence=evidence,
            fix=fix,
            estimated_gain=_SMALL_GAIN if small else _GAIN,
            location=location,
        )

    def _eager(self, eager: EagerFacts, options: dict[str, Any]) -> list[Finding]:
        """The float64 compute of a step run eagerly: the eager op counter's sites in
        the sampled steps whose output was float64."""
        if not eager.sampled_steps:
            return self._eager_unstepped(eager, options)
        sites = _float64_sites(eager.sites)
        per_step = sum(site.count for site in sites) / eager.sampled_steps
        if not sites or per_step < options["min_ops"]:
            return []
        sites.sort(key=lambda site: (not site.op.startswith(_HEAVY), -site.count, site.op))
        heavy = any(site.op.startswith(_HEAVY) for site in sites)
        shown = ", ".join(
            f"{site.op} ×{site.count / eager.sampled_steps:g}"
            + (f" at {site.location}" if site.location else "")
            for site in sites[:4]
        )
        more = f", {len(sites) - 4} more" if len(sites) > 4 else ""
        evidence: dict[str, Any] = {
            "float64_ops_per_step": round(per_step, 1),
            "sampled_steps": eager.sampled_steps,
            "ops": [
                {
                    "op": site.op,
                    "location": site.location,
                    "per_step": round(site.count / eager.sampled_steps, 2),
                    "median_elements": site.median_elements,
                    "device": site.device,
                }
                for site in sites
            ],
            "measured": "the eager op counter's sampled steps: each op's output dtype as it ran",
        }
        title = f"~{per_step:.0f} float64 ops per step, run eagerly: {shown}{more}"
        return [self._compute(title, heavy, evidence, _EAGER_FIX, sites[0].location)]

    def _eager_unstepped(self, eager: EagerFacts, options: dict[str, Any]) -> list[Finding]:
        """No training step found (a loop over NumPy slices, no tf.data, no tf.function),
        but the eager counter read the loop's code (``step_code``): its float64 ops are
        the sites within the lines that issue the step's ops, per second of the run (the
        set-up's, outside those lines, are left out)."""
        code = eager.step_code
        if code is None or code.moved is None or not eager.counted_s:
            return []
        path = code.location.rpartition(":")[0]
        first, last = code.moved
        sites = [
            site
            for site in _float64_sites(eager.sites)
            if site.location
            and site.location.rpartition(":")[0] == path
            and first <= int(site.location.rpartition(":")[2] or 0) <= last
        ]
        per_second = sum(site.count for site in sites) / eager.counted_s
        if not sites or sum(site.count for site in sites) < options["min_ops"]:
            return []
        sites.sort(key=lambda site: (not site.op.startswith(_HEAVY), -site.count, site.op))
        heavy = any(site.op.startswith(_HEAVY) for site in sites)
        shown = ", ".join(
            f"{site.op}" + (f" at {site.location}" if site.location else "") for site in sites[:4]
        )
        more = f", {len(sites) - 4} more" if len(sites) > 4 else ""
        evidence: dict[str, Any] = {
            "float64_ops_per_second": round(per_second, 1),
            "counted_s": round(eager.counted_s, 2),
            "training_code": f"{path}:{first}-{last}",
            "ops": [
                {"op": site.op, "location": site.location, "count": site.count} for site in sites
            ],
            "measured": (
                "the eager op counter over the run (no training step found): each op's "
                "output dtype as it ran, in the lines that issue the loop's ops"
            ),
        }
        title = (
            f"~{per_second:,.0f} float64 ops a second in the training code at {path}:"
            f"{first}-{last}, run eagerly: {shown}{more}"
        )
        return [self._compute(title, heavy, evidence, _EAGER_FIX, sites[0].location)]

    def _data_only(self, facts: Facts, placement: PlacementFacts) -> list[Finding]:
        """float64 that only enters the step (the batch the iterator or the caller gives,
        cast at once: Keras layers cast to their own dtype) computes nothing in float64:
        it costs the bytes it adds to each step's copy, no more."""
        entering = [c for c in placement.copies if c.kind == "input" and c.dtype == "float64"]
        iterators = [
            g for g in placement.groups if is_input_boundary(g.op) and "float64" in g.out_dtypes
        ]
        if not entering and not iterators:
            return []
        known = [c.bytes for c in entering if c.bytes is not None]
        added = sum(known) // 2  # float32 would move half of it
        evidence: dict[str, Any] = {
            "float64_ops": 0,
            "float64_input_tensors": len(entering),
            "ops": [group_row(g) for g in iterators],
            **prediction_note(placement),
        }
        if known and len(known) == len(entering):
            evidence["bytes_added_per_step"] = added
        size = (
            f": {size_text(added)} more per step than float32"
            if evidence.get("bytes_added_per_step")
            else ""
        )
        location = next((g.locations[0] for g in iterators if g.locations), None)
        if location is None:  # given by the caller (NumPy arrays): where it makes them
            made = _numpy_sites(facts)
            location = f"{made[0][0]}:{made[0][1]}" if made else None
        return [
            self.finding(
                f"The step's input arrives as float64 and is cast to float32 at once{size}; "
                "no float64 compute",
                severity="low",
                evidence=evidence,
                fix="\n".join(_numpy_fix(facts)),
                estimated_gain="halves the bytes of the input copy; the step itself is unchanged",
                location=location,
            )
        ]


MAX_NUMPY_SITES = 6  # NumPy float64 arrays a fix names; the rest are counted


def _small_size(groups: list[Any]) -> tuple[int, bool] | None:
    """The most values the groups' float64 tensors hold, where every one holds at most
    SMALL_ELEMENTS (or SMALL_ROW a row, its batch not sized by the trace: then True);
    None where one is larger or not known."""
    known = [g.float64_elements for g in groups]
    if all(n is not None and n <= SMALL_ELEMENTS for n in known):
        return max(n for n in known if n is not None), False
    rows = [g.float64_row_elements for g in groups]
    if all(n is not None and n <= SMALL_ROW for n in rows):
        return max(n for n in rows if n is not None), True
    return None


def _numpy_fix(facts: Facts) -> list[str]:
    """float32 where the program makes its float64 NumPy arrays (``np.empty(...)`` in a
    PyDataset's ``__getitem__``, ``rng.normal(...)`` for the data), each as written, from
    the program's own files; placeholders only where none is found."""
    sites = _numpy_sites(facts)
    if not sites:
        return [
            "# NumPy arrays are float64 by default: cast them where they enter",
            "<features> = <features>.astype('float32')   # NumPy, before the dataset is made",
            "<dataset>.map(lambda x, y: (tf.cast(x, tf.float32), y))   # or in tf.data",
        ]
    lines = ["# NumPy makes float64 where no dtype is given: the program's arrays, as float32"]
    for path, line, text in sites[:MAX_NUMPY_SITES]:
        lines += [f"# {path}:{line}: {IN_PLACE_OF}{text}", _as_float32(text)]
    if len(sites) > MAX_NUMPY_SITES:
        lines.append(f"# and {len(sites) - MAX_NUMPY_SITES} more such calls in the same files")
    return lines


def _numpy_sites(facts: Facts) -> list[tuple[str, int, str]]:
    """(path, line, call as written) of each float64 NumPy array the program makes."""
    return [
        (path, line, text)
        for path in located_files(facts)
        for line, text in numpy_float64_calls(path)
    ]


# NumPy makers that take a dtype (np.random's draws do not: they are cast after)
TAKES_DTYPE = ("zeros", "ones", "empty", "full", "eye", "identity", "linspace", "logspace")


def _as_float32(call: str) -> str:
    """``np.zeros(n, ...)`` made float32 by its own dtype, a draw cast after it."""
    name = call.partition("(")[0].rpartition(".")[2]
    if name in TAKES_DTYPE:
        return with_keywords(call, dtype="'float32'")
    return f"{call}.astype('float32')"


def _floatx_fix(placement: PlacementFacts) -> str:
    """Keras' float type back to float32, in the program's own call where it has one:
    every layer's weights and math follow it, and Keras casts each batch to its layers'
    type, so float64 NumPy data needs no change of its own."""
    written = placement.floatx_written
    cast = "# Keras casts each batch to its layers' float type: the float64 data can stay"
    if written is None:
        return "\n".join(
            [
                'tf.keras.backend.set_floatx("float32")   # before the model is built',
                "# Keras' float type was float64 without a set_floatx call in the program's",
                '# files: see ~/.keras/keras.json ("floatx") or the library that set it',
                cast,
            ]
        )
    return "\n".join(
        [
            f"{written.replace('float64', 'float32')}   # at {placement.floatx_set_at}, "
            f"in place of {written}",
            cast,
        ]
    )


_EAGER_FIX = "\n".join(
    [
        "# NumPy arrays are float64 by default, and so are tensors and variables made",
        "# from them: make them float32 where they are made",
        "<array> = <array>.astype('float32')            # the data and initial weights",
        "<variable> = tf.Variable(tf.cast(<initial>, tf.float32))",
    ]
)


def _float64_sites(sites: tuple[EagerOpSite, ...]) -> list[EagerOpSite]:
    """The eager sites whose float64 output is compute on more than a scalar (not data
    entering: the iterator's, nor a variable's handle or a copy)."""
    return [
        site
        for site in sites
        if site.dtype == "float64"
        and site.op not in _NOT_COMPUTE
        and not is_input_boundary(site.op)
        and (site.median_elements is None or site.median_elements > 1)
    ]
