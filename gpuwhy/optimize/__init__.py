"""Fixes gpuwhy applies itself and proves: ``optimize(dataset)`` rewrites a tf.data input
pipeline with the changes that cannot alter its elements, checks that, and measures it
(``gpuwhy fix --input SCRIPT`` does it for every dataset a script iterates).

Importing this package imports no TensorFlow: the pipeline's own TF is used when
``optimize`` is called.
"""

from __future__ import annotations

from gpuwhy.optimize.input_pipeline import optimize
from gpuwhy.optimize.result import OptimizeResult

__all__ = ["OptimizeResult", "optimize"]
