"""A tf.data pipeline as the user wrote it: each transformation, where, and what it runs.

The Python dataset objects are a linked chain: every transformation keeps its input
(``_inputs()`` in ``tensorflow/python/data/ops/dataset_ops.py``; ``_input_dataset`` on
unary ones), and the functions it runs as ``StructuredFunctionWrapper`` s
(``tensorflow/python/data/ops/structured_function.py``: ``._func`` is the user's
Python function, ``.function`` the ConcreteFunction TF traced from it). All of that
is private, hence this one module. Reading a chain costs well under a millisecond per
transformation and is done once per pipeline, never per element.

Two hooks say what the objects do not keep:

* ``DatasetV2.__init__``: every dataset (every subclass calls it) remembers the user's
  ``file:line`` that created it, found on the stack at creation (a few dict hits per
  frame; dataset creation itself takes far longer), and whether Keras or another
  library built it on the user's behalf.
* ``from_generator_op._from_generator`` (what ``Dataset.from_generator`` of both API
  versions calls): the dataset it returns remembers the generator callable, so the
  report can name the generator's own definition. Datasets created before the hook
  are recognised by the closure of TF's ``flat_map_fn`` instead.

What a transformation's function contains is read from its traced FunctionDef and the
functions nested in it (``ConcreteFunction.graph.as_graph_def().library``), as TF's
optimisers read it:

* ``stateful`` mirrors ``function_utils::IsFunctionStateful(..., skip_assert=true)``
  (``tensorflow/core/grappler/optimizers/data/function_utils.cc``), the test that
  ``map_parallelization`` (``map_parallelization.cc``) uses to leave a ``map``
  sequential: a function is stateful when its signature says so and one of its nodes
  has a stateful OpDef (or an OpDef TF cannot find), other than ``Assert`` and an
  ``If``/``While`` whose branches are all stateless.
* ``python``: ``EagerPyFunc``/``PyFunc``/``PyFuncStateless`` (``tf.py_function``,
  ``tf.numpy_function``) or a ``GeneratorDataset`` (``from_generator``). The Python
  callables behind them are looked up by the op's ``token`` in
  ``script_ops._py_funcs``.
* ``random``: random ops whose OpDef is stateful (``RandomUniform``,
  ``RandomStandardNormal``, ``tf.random.Generator``'s ``RngReadAndSkip`` ...): their
  output differs from one pass to the next, so caching after them would freeze what
  should change. Stateless random ops with a seed (``StatelessRandom*``) give the same
  output for the same input and are listed in ``random_ops`` only.
* ``codec_ops``: image/audio decoders and encoders, ``DecodeCompressed``, and the
  compression of file readers (``"GZIP"``/``"ZLIB"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuwhy.source_calls import library_call, written_call
from gpuwhy.source_generator import as_slices
from gpuwhy.tfapi.callables import function_site, program_source, source_site
from gpuwhy.tfapi.tfdata.classes import READERS, dataset_class
from gpuwhy.tfapi.tfdata.dataset_size import element_bytes
from gpuwhy.tfapi.tfdata.functions import function_contents, order_dependent
from gpuwhy.tfapi.tfdata.generator_gaps import GeneratorGaps
from gpuwhy.tfapi.tfdata.origins import GAPS_ATTR, GENERATOR_ATTR, ORIGIN_ATTR, origin
from gpuwhy.tfapi.tfdata.stages import varies_between_passes

__all__ = [
    "WrittenTransformation",
    "autotune_enabled",
    "function_contents",
    "function_site",
    "generator_gaps",
    "has_final_prefetch",
    "keeps_a_model",
    "main_input_index",
    "options_by_library",
    "written_chain",
    "zip_branches",
]

MAX_CHAIN = 200  # transformations followed from the final dataset
MAX_INNER = 4  # other inputs described per transformation


# -- the written chain -------------------------------------------------------------


@dataclass(frozen=True)
class WrittenTransformation:
    """One transformation of the chain, as written in Python."""

    api: str  # map, batch, prefetch, from_generator, TFRecordDataset ...
    op: str  # TF dataset op: MapDataset, ParallelMapDatasetV2 ...
    location: str | None = None  # where it was created (None: before the hook)
    by_library: bool = False  # Keras or another library created it
    function: str | None = None  # the user's function it runs ("parse", "<lambda>")
    function_location: str | None = None  # where that function is defined
    num_parallel_calls: int | None = None  # as written; -1 AUTOTUNE; None: sequential
    deterministic: bool | None = None  # as written; None: the pipeline's default
    argument: int | None = None  # batch size, buffer size, count (-1: all/AUTOTUNE)
    python: bool = False  # runs Python: py_function, numpy_function, generator
    python_functions: tuple[str, ...] = ()  # "slow (file:line)" behind those ops
    stateful: bool = False  # TF's map_parallelization would keep it sequential
    stateful_ops: tuple[str, ...] = ()
    # parallel calls could change what an element gets (functions.order_dependent)
    order_dependent: bool = False
    random: bool = False  # stateful random ops: differs from pass to pass
    random_ops: tuple[str, ...] = ()  # every random op, stateless ones too
    codec_ops: tuple[str, ...] = ()  # DecodeJpeg, DecodePng ..., "GZIP"/"ZLIB" reading
    # why its elements may differ from pass to pass (stages.varies_between_passes, the
    # judgement gpuwhy fix places a cache by); None: the same every pass
    varies: str | None = None
    # made by a library: the user's call into it at ``location``, as written
    # ("keras.utils.timeseries_dataset_from_array(series, targets, ...)")
    library_call: str | None = None
    inner: tuple[str, ...] = ()  # the other inputs (zip, concatenate), described
    node: bool = True  # False: no node of its own when TF runs it (options)
    call: str | None = None  # the call as written, one line: "ds.map(parse)", ".batch(32)"
    callers: tuple[str, ...] = ()  # the user's calls into the helper that made it
    element_bytes: int | None = None  # one element it outputs, from its spec (None: unknown)
    files: int | None = None  # a file reader: the files it was given
    main_input: int = 0  # which of its inputs the chain follows (a zip's may not be the first)
    # a generator that yields slices of the program's arrays: the from_tensor_slices call
    # that yields the same elements (gpuwhy/source_generator.py)
    as_slices: str | None = None

    @property
    def noop(self) -> bool:
        """A no-op TF's noop_elimination removes (noop_elimination.cc): take(-1),
        skip(0), repeat(1), prefetch(0), shard(1, ...)."""
        count = self.argument
        return (
            (self.api == "take" and count is not None and count < 0)
            or (self.api in ("skip", "prefetch") and count == 0)
            or (self.api in ("repeat", "shard") and count == 1)
        )


_ARGUMENTS = ("_batch_size", "_buffer_size", "_count", "_num_shards", "_cycle_length", "_size")
_FUNCTION_ATTRS = (
    "_map_func",
    "_predicate",
    "_scan_func",
    "_key_func",
    "_reduce_func",
    "_init_func",
    "_next_func",
    "_finalize_func",
    "_window_size_func",
)


def _api_and_op(dataset: Any) -> tuple[str, str]:
    row = dataset_class(dataset)
    return row.api, row.op


def _inputs(dataset: Any) -> list:
    try:
        found = list(dataset._inputs())
    except Exception:  # noqa: BLE001
        found = []
    if not found:
        single = getattr(dataset, "_input_dataset", None)
        found = [single] if single is not None else []
    return found


def _int(value: Any) -> int | None:
    if value is None:
        return None
    try:
        return int(value)  # EagerTensor scalars and numpy values alike
    except Exception:  # noqa: BLE001 - a symbolic tensor (graph mode)
        return None


def _deterministic(dataset: Any) -> bool | None:
    value = getattr(dataset, "_deterministic", None)
    if value == "true" or value is True:
        return True
    if value == "false" or value is False:
        return False
    return None


def _generator_of(dataset: Any) -> Any:
    """The callable given to from_generator: from the hook, else from the closure of
    TF's ``flat_map_fn`` (``tensorflow/python/data/ops/from_generator_op.py``)."""
    generator = dataset.__dict__.get(GENERATOR_ATTR) if hasattr(dataset, "__dict__") else None
    if generator is not None:
        return generator
    wrapper = getattr(dataset, "_map_func", None)
    func = getattr(wrapper, "_func", None)
    if func is None or not getattr(func, "__module__", "").endswith("from_generator_op"):
        return None
    functions = [func]
    for _ in range(3):  # flat_map_fn -> get_iterator_id_fn -> generator_state
        found = []
        for function in functions:
            for cell in getattr(function, "__closure__", None) or ():
                try:
                    value = cell.cell_contents
                except ValueError:
                    continue
                if type(value).__name__ == "_GeneratorState":
                    return getattr(value, "_generator", None)
                if callable(value) and hasattr(value, "__closure__"):
                    found.append(value)
        functions = found
    return None


def _wrappers(dataset: Any) -> list:
    found = []
    for attr in _FUNCTION_ATTRS:
        wrapper = getattr(dataset, attr, None)
        if wrapper is not None and hasattr(wrapper, "function"):
            found.append(wrapper)
    return found


def _concrete(wrapper: Any) -> Any:
    try:
        return wrapper.function
    except Exception:  # noqa: BLE001
        return None


def _reader_compression(dataset: Any) -> str | None:
    value = getattr(dataset, "_compression_type", None)
    if value is None:
        return None
    try:
        if hasattr(value, "numpy"):
            value = value.numpy()
        if isinstance(value, bytes):
            value = value.decode()
        text = str(value).upper()
    except Exception:  # noqa: BLE001
        return None
    return text if text in ("GZIP", "ZLIB") else None


def _argument(dataset: Any, api: str) -> int | None:
    if api in ("map", "interleave", "TFRecordDataset"):
        return None
    for attr in _ARGUMENTS:
        value = getattr(dataset, attr, None)
        if value is not None:
            return _int(value)
    return None


def _parallel_calls(dataset: Any, api: str) -> int | None:
    for attr in ("_num_parallel_calls", "_num_parallel_reads"):
        value = getattr(dataset, attr, None)
        if value is not None:
            return _int(value)
    return None


def _describe_input(dataset: Any) -> str:
    api, _ = _api_and_op(dataset)
    where = origin(dataset)
    return f"{api} at {where.location}" if where and where.location else api


def _transformation(
    dataset: Any, generator: Any, inner: list, main_input: int = 0
) -> WrittenTransformation:
    api, op = _api_and_op(dataset)
    where = origin(dataset)
    wrappers = _wrappers(dataset)
    function = function_location = None
    contents = function_contents(c for c in map(_concrete, wrappers) if c is not None)
    codecs = list(contents.codec_ops)
    python = contents.python
    if generator is not None:
        api, op = "from_generator", "GeneratorDataset"
        function, function_location = function_site(generator)
        source = program_source(generator) if function_location is None else None
        if source is not None:  # fit given the program's generator: Keras' get_tf_iterator
            function, function_location = source_site(source)
        python = True
    elif wrappers:
        function, function_location = function_site(wrappers[0]._func)
    call = _call_as_written(dataset, api, function)
    slices = _generator_as_slices(generator, dataset, call) if generator is not None else None
    if api in READERS:
        compression = _reader_compression(dataset)
        if compression and compression not in codecs:
            codecs.append(compression)
    return WrittenTransformation(
        api=api,
        op=op,
        location=where.location if where else None,
        by_library=where.by_library if where else False,
        function=function,
        function_location=function_location,
        num_parallel_calls=_parallel_calls(dataset, api),
        deterministic=_deterministic(dataset),
        argument=_argument(dataset, api),
        python=python,
        python_functions=contents.python_functions,
        stateful=bool(contents.stateful_ops),
        stateful_ops=contents.stateful_ops,
        order_dependent=order_dependent(contents.stateful_ops),
        random=contents.stateful_random,
        random_ops=contents.random_ops,
        codec_ops=tuple(codecs),
        varies=_varies(dataset),
        library_call=_library_call(dataset) if where is not None and where.by_library else None,
        inner=tuple(_describe_input(d) for d in inner[:MAX_INNER]),
        node=dataset_class(dataset).node,
        call=call,
        callers=where.callers if where else (),
        element_bytes=_element_bytes(dataset, _argument(dataset, api) if "batch" in api else None),
        files=_files(dataset) if api in READERS else None,
        main_input=main_input,
        as_slices=slices,
    )


def _varies(dataset: Any) -> str | None:
    try:
        return varies_between_passes(dataset)
    except Exception as error:  # noqa: BLE001 - not judged: treated as varying
        return f"not judged ({type(error).__name__})"


def _element_bytes(dataset: Any, batch: int | None) -> int | None:
    """One output element's bytes; a batch's partial last one counts as full."""
    try:
        return element_bytes(dataset, batch if batch and batch > 0 else None)
    except Exception:  # noqa: BLE001 - a spec we cannot size: unknown
        return None


def _files(dataset: Any) -> int | None:
    """How many files a reader was given: its file-name dataset's cardinality
    (TFRecordDatasetV2._filenames, readers.py), or None where that is not known."""
    names = getattr(dataset, "_filenames", None)
    if names is None:
        return None
    try:
        count = int(names.cardinality())
    except Exception:  # noqa: BLE001 - a tensor of names, or a symbolic one
        return None
    return count if count >= 0 else None


def _call_as_written(dataset: Any, api: str, function: str | None) -> str | None:
    """The user's call that made ``dataset``, read from their source (None for a
    library's dataset, or where the source cannot be read)."""
    value = getattr(dataset, ORIGIN_ATTR, None)
    if not isinstance(value, tuple) or len(value) != 4:
        return None
    filename, line, by_library, _ = value
    if not filename or by_library:
        return None
    try:
        return written_call(filename, line, api, function)
    except Exception:  # noqa: BLE001 - a fix without the written call, never a failed run
        return None


def _generator_as_slices(generator: Any, dataset: Any, call: str | None) -> str | None:
    """The from_tensor_slices call yielding what the generator yields, written with the
    program's own prefix for ``tf.data.Dataset``."""
    marker = "from_generator("
    prefix = call[: call.index(marker)] if call and marker in call else "tf.data.Dataset."
    try:
        spec = dataset.element_spec
    except Exception:  # noqa: BLE001
        return None
    return as_slices(generator, spec, prefix)


def _library_call(dataset: Any) -> str | None:
    """The user's call into the library that created ``dataset``, read from their source."""
    value = getattr(dataset, ORIGIN_ATTR, None)
    if not isinstance(value, tuple) or len(value) != 4 or not value[0]:
        return None
    try:
        return library_call(value[0], value[1])
    except Exception:  # noqa: BLE001 - a fix without the written call, never a failed run
        return None


def _is_internal_input(consumer: Any, dataset: Any) -> bool:
    """The file-name/dummy dataset TF made inside a reader or from_generator call."""
    if type(dataset).__name__ not in ("_TensorSliceDataset", "_TensorDataset"):
        return False
    mine, theirs = origin(consumer), origin(dataset)
    return mine is None or theirs is None or mine.location == theirs.location


def written_chain(dataset: Any) -> list[WrittenTransformation]:
    """The transformations from the source to ``dataset``, following the main input:
    the first, or a zip's that does the work (:func:`main_input_index`).

    Other inputs (zip, concatenate, sample_from_datasets ...) are described in
    ``inner`` and their function contents are not read; a reader's or a generator's
    internal input (the file-name slices TF makes from a list of names, the dummy
    element ``from_generator`` flat-maps) is folded into it.
    """
    chain: list[WrittenTransformation] = []
    current = dataset
    for _ in range(MAX_CHAIN):
        while type(current).__name__ == "DatasetV1Adapter":  # tf.compat.v1.data: the V2 inside
            current = getattr(current, "_dataset", None)
        if current is None:
            break
        inputs = _inputs(current)
        generator = _generator_of(current) if type(current).__name__ == "_FlatMapDataset" else None
        main = main_input_index(current, inputs)
        others = inputs[:main] + inputs[main + 1 :]
        chain.append(_transformation(current, generator, others, main))
        api = chain[-1].api
        following = inputs[main] if inputs else None
        if (
            (generator is not None or api in READERS)
            and following is not None
            and _is_internal_input(current, following)
        ):
            break
        current = following
    chain.reverse()
    return chain


def generator_gaps(dataset: Any) -> GeneratorGaps | None:
    """The gap timer of the ``from_generator`` dataset at the source of ``dataset``'s
    chain (following the main input as :func:`written_chain` does), or None: another
    source, or one made before the hook."""
    current = dataset
    for _ in range(MAX_CHAIN):
        while type(current).__name__ == "DatasetV1Adapter":
            current = getattr(current, "_dataset", None)
        if current is None:
            return None
        found = current.__dict__.get(GAPS_ATTR) if hasattr(current, "__dict__") else None
        if isinstance(found, GeneratorGaps):
            return found
        inputs = _inputs(current)
        if not inputs:
            return None
        current = inputs[main_input_index(current, inputs)]
    return None


def main_input_index(dataset: Any, inputs: list) -> int:
    """Which input of ``dataset`` carries the pipeline: for a zip, the one whose chain
    calls the most Python (py_function, numpy_function, generators), then runs the most
    functions (maps, filters, file readers), then has the most stages, the first on a
    tie; for anything else the first.

    ``ds.enumerate()`` is ``Dataset.zip((counter, ds))`` and ``zip((images, labels))``
    pairs a pipeline with a cheap one: following the first input would show the
    counter and leave the user's pipeline (and its slowest stage) inside the zip.
    Chosen from the objects, not from run times, so that every read of TF's model
    follows the same input (``branches``, gpuwhy.tfapi.tfdata.iterator_models.parse_model)."""
    if len(inputs) < 2 or dataset_class(dataset).api != "zip":
        return 0
    weights = [_weight(i) for i in inputs]
    return weights.index(max(weights))


def _weight(dataset: Any) -> tuple[int, int, int]:
    """(transformations that call Python, that run a function, that have a node of
    their own) along ``dataset``'s chain: the work an input of a zip does."""
    python = functions = stages = 0
    current = dataset
    for _ in range(MAX_CHAIN):
        if current is None:
            break
        row = dataset_class(current)
        wrappers = _wrappers(current)
        concrete = (c for c in map(_concrete, wrappers) if c is not None)
        python += function_contents(concrete).python if wrappers else False
        functions += bool(wrappers) or row.api in READERS
        stages += row.node
        inputs = _inputs(current)
        current = inputs[main_input_index(current, inputs)] if inputs else None
    return python, functions, stages


def zip_branches(chain: list[WrittenTransformation]) -> tuple[int, ...]:
    """The input the chain follows at each of its zips, from the final dataset down:
    what :func:`gpuwhy.tfapi.tfdata.iterator_models.parse_model` follows in TF's model."""
    return tuple(w.main_input for w in reversed(chain) if w.api == "zip")


# -- helpers -------------------------------------------------------------------------


def autotune_enabled(dataset: Any) -> bool:
    """``options().autotune.enabled`` (unset means on)."""
    try:
        return dataset.options().autotune.enabled is not False
    except Exception:  # noqa: BLE001
        return True


def keeps_a_model(iterator: Any) -> bool:
    """Whether TF keeps a model of ``iterator``'s pipeline to read: autotune on for the
    dataset it iterates (``OwnedIterator._dataset``; unknown counts as on). Asking an
    iterator without one makes TF log a warning on the program's stderr."""
    return autotune_enabled(getattr(iterator, "_dataset", None))


def options_by_library(chain: list[WrittenTransformation]) -> bool:
    """Whether the last ``with_options`` of ``chain`` (the options TF runs the pipeline
    with) was made by a library, not the program: Keras turns tf.data's autotune off
    for a ``PyDataset`` with ``workers`` (its enqueuer's threads read ahead)."""
    return next((w.by_library for w in reversed(chain) if w.api == "with_options"), False)


def deterministic_option(dataset: Any) -> bool | None:
    """``options().deterministic`` as the program set it (``experimental_deterministic``
    is the same option); None where it left it unset or the options cannot be read."""
    try:
        return dataset.options().deterministic
    except Exception:  # noqa: BLE001
        return None


def has_final_prefetch(chain_or_dataset: Any) -> bool:
    """The last transformation with a node of its own is a ``prefetch`` that is not
    ``prefetch(0)``."""
    chain = (
        chain_or_dataset if isinstance(chain_or_dataset, list) else written_chain(chain_or_dataset)
    )
    for step in reversed(chain):
        if not step.node:
            continue
        return step.api == "prefetch" and not step.noop
    return False
