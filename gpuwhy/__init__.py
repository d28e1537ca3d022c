"""gpuwhy: why is my TensorFlow GPU idle? Diagnoses with evidence, the fix, and a measurement.

Flow: ``collect`` (facts from TF, NVML, the program) -> ``facts`` (plain data) -> ``rules``
(facts -> findings) -> ``report`` (terminal, JSON). The public entry points live here:
``check()``, ``audit()``, ``session()``, ``KerasCallback()``, ``optimize()``, ``load()``,
``explain()``; in IPython, ``%load_ext gpuwhy`` (gpuwhy.notebook).
"""

from gpuwhy import dataclass_code as _dataclass_code
from gpuwhy.version import __version__ as __version__

# before any of gpuwhy's modules defines its dataclasses (their compiled methods kept
# from one process to the next: 0.1 s of every command's start; gpuwhy/dataclass_code.py)
_dataclass_code.install()

__all__ = ["KerasCallback", "audit", "check", "diff", "explain", "load", "optimize", "session"]


def check(python=None, timeout=120.0):
    """Run the environment doctor and return its :class:`gpuwhy.record.Record`."""
    from gpuwhy.modes.check import check as _check

    return _check(python, timeout)


def audit(obj, *example_args, verify=False, **example_kwargs):
    """Where TensorFlow places each op of ``obj`` on a GPU machine, why, and the copies.

    ``obj``: a ``tf.function`` (traced with the example arguments, or every trace it
    already has), a concrete function, a Keras model (``audit(model, x, y)`` audits its
    training step, ``audit(model)`` its forward pass) or a Python function. Works without
    a GPU: the placement is then predicted from TensorFlow's GPU kernel registry.
    Returns a :class:`gpuwhy.record.Record` (``.findings``, ``.facts.placement``).
    """
    from gpuwhy.modes.audit import audit as _audit

    return _audit(obj, *example_args, verify=verify, **example_kwargs)


def session(**options):
    """Watch this process, as ``gpuwhy run`` watches a script::

        with gpuwhy.session() as s:
            model.fit(ds, epochs=3)
        s.report()            # prints the diagnosis; s.record is the Record

    ``options``: those of ``gpuwhy run`` (its --help lists them), by name: e.g. ``hz``
    GPU samples per second (10), ``audit`` placement audit of the tf.functions that ran
    (True), ``eager`` count eager ops (True), ``target`` a GPU to project the step onto.
    An exception inside the block is recorded and re-raised.
    """
    from gpuwhy.modes.run.session import Session

    return Session(**options)


def KerasCallback(print_report=True, json_path=None, verbose=False, **options):
    """A Keras callback that watches ``model.fit`` and prints the diagnosis at its end::

        model.fit(ds, epochs=3, callbacks=[gpuwhy.KerasCallback()])

    The Record is in the callback's ``.record`` afterwards.
    """
    from gpuwhy.modes.keras_callback import make_callback

    return make_callback(
        options,
        print_report=print_report,
        json_path=json_path,
        verbose=verbose,
    )


def load(path):
    """A saved JSON report as a :class:`gpuwhy.record.Record`."""
    from gpuwhy.record import Record

    return Record.load(path)


def diff(before, after):
    """Two records (or paths of saved ones) compared, as ``gpuwhy diff``: a
    :class:`gpuwhy.comparison.Comparison` (its ``verdict``, ``step_time``, ``parts``,
    ``findings``, ``environment``). A list a side compares several runs of each, the
    intervals from how the runs differ."""
    from gpuwhy.modes.diff import diff as compare_records

    return compare_records(before, after)


def explain(rule_id):
    """The documentation of a finding id (raises ``LookupError`` with close matches)."""
    from gpuwhy.rules import get_rule

    return get_rule(rule_id).doc()


def __getattr__(name: str):
    """``gpuwhy.optimize`` is :func:`gpuwhy.optimize.optimize`, imported on first use: the
    command line and ``import gpuwhy`` do not pay for the tf.data rewriter."""
    if name == "optimize":
        from gpuwhy.optimize import optimize

        return optimize
    raise AttributeError(f"module 'gpuwhy' has no attribute {name!r}")


def load_ipython_extension(ipython):
    """``%load_ext gpuwhy``: the ``%gpuwhy`` and ``%%gpuwhy`` magics (gpuwhy.notebook,
    imported only now: ``import gpuwhy`` never needs IPython)."""
    from gpuwhy.notebook import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython):
    """``%unload_ext gpuwhy``."""
    from gpuwhy.notebook import unload_ipython_extension as unload

    unload(ipython)
