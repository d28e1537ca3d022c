"""Facts derived from facts, read by more than one layer: one definition each.

The rules, the verdict, the report, the projection and the run's collectors all ask a
few of the same questions of the facts: which pipeline fed the training steps, which of
its stages was slowest, whether TF could use a GPU. Answered in two places, the answers
drift apart (the projection once costed one pipeline while the findings named another's
stage), so they are answered here, once, below every layer that asks.

Pure functions of ``gpuwhy.facts`` (and the types they need): no TensorFlow, no
collector, no rule. pipeline.py (the steps' pipeline and its bottleneck),
environment.py (whether TF can use a GPU), step_profile.py (what the profiled steps
give the collectors and the projection), step_timeline.py (where a long run's later
steps ran).
"""
