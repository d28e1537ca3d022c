"""TensorFlow's private APIs, one small module each.

gpuwhy needs parts of TensorFlow that are not public (the kernel registry,
FuncGraph internals, eager run metadata). Each one is reached only through a
module in this package, so a TensorFlow upgrade that moves one of them breaks
one file, and its test says which.

Nothing here imports TensorFlow at module import time: ``gpuwhy`` itself must
import on machines without TensorFlow.
"""
