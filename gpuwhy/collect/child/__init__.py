"""Code that runs inside the child Python process that imports TensorFlow.

Everything here uses the standard library only: the child may be another interpreter
(``gpuwhy check --python PATH``) where gpuwhy is not installed, so these modules are put
on the child's ``sys.path`` by directory, not imported as ``gpuwhy.collect.child``.
"""
