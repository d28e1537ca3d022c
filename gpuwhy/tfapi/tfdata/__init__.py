"""The one reader of tf.data's private objects (``tensorflow/python/data/ops``).

``gpuwhy run`` (collect/inprocess/pipelines.py) and ``gpuwhy fix`` (optimize/) both ask the questions
below, and get the same answer because there is one place that answers each:

* classes.py: TF's dataset classes, one table: what the user wrote (``map``), TF's op,
  gpuwhy's stage kind, and whether it is a source, has a node of its own when run,
  gives the same elements every pass, can be rebuilt;
* functions.py: what a dataset function runs (Python, random, stateful, codec ops),
  judged once, by TF's own rule (``function_utils::IsFunctionStateful``);
* dataset_chain.py: the chain of transformations as the user wrote it, with the creation
  sites (``file:line``) recorded by the origin hooks;
* dataset_size.py: how many elements per pass, how many bytes per element;
* stages.py: the chain as stages ``gpuwhy fix`` plans on (and its capture hooks);
* rewrite.py: those stages rebuilt with safe changes;
* node_names.py: TF's names of the nodes an iterator runs, and what they come from;
* iterator_models.py: the pipeline as TF runs it (the iterator's autotune model);
* iterators.py: the hooks on ``OwnedIterator``: iterator creation (one patch, many
  listeners) and ``next()`` timing.

A TF upgrade that renames a class or moves an attribute breaks here, and only here.
"""
