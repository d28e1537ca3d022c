"""What a host event in a capture says the host was doing, by its name and thread: feeding
input, compiling, waiting on the GPU (synchronisation), running Python, or dispatching
work to the device; and the program's own Python functions (the Python tracer's events,
``$file.py:14 slow``) with their file and line.

TensorFlow names its tf.data work ``Iterator::…``/``IteratorGetNext…`` and runs it on
``tf_data_*`` threads; JAX's and Keras's input shows as the Python tracer's ``next`` of a
generator or a data adapter's frames. Names are matched, never executed.
"""

from __future__ import annotations

import re

from gpuwhy.library_files import is_library_frame

# input by name: tf.data's consumer, a host-to-device transfer of a batch, readers
_INPUT = re.compile(
    r"IteratorGetNext|MakeIterator|BufferFromHostBuffer|TransferToDevice|H2D Dispatch"
    r"|tfrecord|decode_(?:jpeg|png|image)|read_file",
    re.IGNORECASE,
)
# input among Python frames: next() of an iterator, a data library's own frames
_INPUT_FRAME = re.compile(
    r"^\$builtins next$|__next__$|^\$(?:\w*data_adapter\w*|py_dataset\w*|dataloader\w*"
    r"|\w*_dataset_adapter|grain\w*)\.py:",
    re.IGNORECASE,
)
# the runtime's own calls: a function's or an op's dispatch, whatever its name says
_RUNTIME = re.compile(
    r"^(?:EagerLocalExecute|EagerExecute|EagerKernelExecute|EagerCopyToDevice|FunctionRun"
    r"|TFE_|KernelAndDevice|ExecutorState|ValidateInputTypeAndPlacement|PjitFunction)"
)
_EAGER_INPUT = re.compile(r"^EagerLocalExecute: (?:IteratorGetNext|OptionalGetValue|Iterator)")
_COMPILE = re.compile(
    r"(?<!pre)compil(?:e|ing|ation)\b|autotun|BuildExecutable|XlaCompilationCache"
    r"|TraceFunction|trace_function|FuncGraph",
    re.IGNORECASE,
)
_SYNC = re.compile(
    r"synchroniz|BlockUntilReady|block_until_ready|WaitFor|ToLiteral|MemcpyD2H|D2H|\bnumpy\b"
    r"|_numpy|\.item\b|_Recv|cuEventSynchronize|cuStreamSynchronize|\bwait\b",
    re.IGNORECASE,
)
_DISPATCH = re.compile(
    r"Launch|Execute|KernelAndDevice|PjRt|Thunk|Dispatch|(?-i:\bcu[A-Z]\w*)|\bcuda",
    re.IGNORECASE,
)
# bookkeeping the profiler or the runtime records, never what the host was waiting on
_IGNORED = re.compile(
    r"^(?:ThreadpoolListener|MemoryAllocation|MemoryDeallocation|BUFFER_FLUSH|<UNKNOWN>)",
)
_FRAME = re.compile(r"^\$(?P<file>[^\s:]+\.py):(?P<line>\d+)\s+(?P<function>.+)$")
# the files of Python's own thread and runtime frames: never the program's script
RUNTIME_FILES = frozenset(
    {"threading.py", "thread.py", "runpy.py", "<frozen runpy>", "queue.py", "contextlib.py"}
)
# tf.data's own threads: the producers. Their work runs ahead of the step (a prefetch
# buffer); the step waits on it only through the consumer's GetNext, on another thread.
_PRODUCER_THREADS = re.compile(r"^tf_data_(?!iterator_get_next)", re.IGNORECASE)
_CONSUMER_THREADS = re.compile(r"^tf_data_iterator_get_next", re.IGNORECASE)
BACKGROUND_INPUT = "input, ahead of the step"


def activity(name: str, thread: str, display: str | None = None) -> str | None:
    """The activity a host event on ``thread`` shows (input, compile, synchronisation,
    compute, python, dispatch; BACKGROUND_INPUT for tf.data's producer threads, which
    explain an input wait but are not one), None for bookkeeping. ``display``: its metadata's
    display name (a TF op kernel's type)."""
    if _IGNORED.match(name):
        return None
    kind_of_thread = thread_kind(thread)
    if kind_of_thread == "producer":
        return BACKGROUND_INPUT
    kernel = op_kernel(name, display)
    if kernel is not None:  # node names say anything ("compile_loss/..."): the type decides
        return "input" if kernel[1].startswith(("IteratorGetNext", "Iterator")) else "compute"
    if kind_of_thread == "consumer" or _EAGER_INPUT.match(name):
        return "input"
    if _RUNTIME.match(name):  # a function named train_generator is still a function call
        return "dispatch"
    if name.startswith("$"):  # a Python frame: input where it is next() or a data library
        return "input" if _INPUT_FRAME.search(name) else _python_frame(name)
    if _INPUT.search(name):
        return "input"
    if _COMPILE.search(name):
        return "compile"
    if _SYNC.search(name):
        return "synchronisation"
    if _DISPATCH.search(name):
        return "dispatch"
    return "python" if kind_of_thread == "python" else "dispatch"


def _python_frame(name: str) -> str:
    """A Python frame that is not input: waiting on the GPU's results, compiling, or the
    program's Python."""
    if _SYNC.search(name):
        return "synchronisation"
    if _COMPILE.search(name):
        return "compile"
    return "python"


def thread_kind(thread: str) -> str:
    """What ``activity`` reads of a thread's name: a tf.data producer, its consumer, a
    Python thread, or another (a table of activities per kind serves all its threads)."""
    if _PRODUCER_THREADS.search(thread):
        return "producer"
    if _CONSUMER_THREADS.search(thread):
        return "consumer"
    return "python" if thread.startswith("python") else "other"


_LAUNCH = re.compile(
    r"^(?:cu(?:da)?(?:LaunchKernel|LaunchCooperativeKernel|GraphLaunch|Memcpy|MemsetD|Memset)"
    r"|cuLaunchKernelEx|ThenLaunch)"
)


def is_launch(name: str) -> bool:
    """A host event of the CUDA API that puts work on a GPU (a kernel, a graph, a copy)."""
    return bool(_LAUNCH.match(name))


def is_producer(thread: str) -> bool:
    """A tf.data producer thread (its work runs ahead of the step, on the CPU by design)."""
    return thread_kind(thread) == "producer"


def frame(name: str) -> tuple[str, str, int] | None:
    """(function, file, line) of a Python tracer event ``$train.py:14 slow``, else None
    (builtins: ``$builtins next``, ``$<unknown> get``)."""
    match = _FRAME.match(name)
    if match is None:
        return None
    return match.group("function"), match.group("file"), int(match.group("line"))


def program_frame(name: str) -> tuple[str, str, int] | None:
    """(function, file, line) of a tracer event where it is the program's own frame:
    not Python's runtime (a thread's bootstrap), not a library's (Keras' callback list,
    its data adapters: a location there is no place the user can change); else None."""
    found = frame(name)
    if found is None or found[1] in RUNTIME_FILES or is_library_frame(found[0], found[1]):
        return None
    return found


def op_kernel(name: str, display: str | None) -> tuple[str, str] | None:
    """(node name, op type) of a TensorFlow op kernel's host event (named
    ``"dense/MatMul:MatMul"``, its metadata's display name the type), else None."""
    if ":" not in name or name.startswith("$") or " " in name.split(":", 1)[0]:
        return None
    node, _, kind = name.rpartition(":")
    if not node or not kind or display != kind:  # TF names the type in the metadata
        return None
    # an op type is CamelCase, TF's internal ones with a leading underscore
    # (_MklNativeFusedConv2D, _FusedMatMul)
    if not kind.lstrip("_")[:1].isupper() or "::" in name:
        return None
    return node, kind
