"""Collectors that watch a running program (``gpuwhy run``, ``gpuwhy.session()``).

Each one follows :class:`gpuwhy.collect.inprocess.base.Collector`: started with the run,
told when TensorFlow is imported (hooks that need TF are installed only then, so a
script that imports TF lazily or sets TF's environment variables first behaves as
without gpuwhy), stopped at the end, then asked for its fact section. Each declares that
section, what it reads, its options, its report rows, when it is asked and when it is
available; gpuwhy/collect/registry.py lists them and puts them in order, and guard.py
keeps one failing from losing the others.
"""
