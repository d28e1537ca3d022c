"""Facts derived from facts, read by more than one layer: one definition each.

The rules, the verdict, the report, the projection and the run's collectors all ask a
few of the same questions of the facts: which pipeline fed the training steps, which of
its stages was slowest, whether TF could use a GPU. Answered in two places, the answers
drift apart (the projection once costed one pipeline while the findings named another's
stage), so they are answered here, once, below every layer that asks.

Pure functions of ``gpuwhy.facts`` (and the types they need): no TensorFlow, no
collector, no rule. The home of the analysis shared by rules, verdict, report, live
metrics and diff: a rule, the verdict and a renderer that need the same answer call the
same function here, never read it back from another finding's evidence.

pipeline.py (the steps' pipeline, its bottleneck, its steady stages), pipeline_stages.py
(how TF ran each stage, where a cache is safe), input_wait.py (the consumer's wait, its
bursts, a loop's fetch overhead), host_load.py (other processes' load on the host's
CPUs), cache_filling.py (a wait that is the first pass filling a cache), gpu_activity.py
(GPU samples lined up with the steps, the program's GPUs), op_classes.py (codec ops,
Python ops, Keras train functions), environment.py (whether TF can use a GPU),
step_profile.py (what the profiled steps give the collectors and the projection),
step_timeline.py (where a long run's later steps ran), step_windows.py (the windows
that say something about the steps), change_points.py and drift.py (a step time's
shifts, and their causes), worker_times.py (the workers' own work per step compared: a
straggler), worker_inputs.py (the datasets workers distributed, compared across them).
"""
