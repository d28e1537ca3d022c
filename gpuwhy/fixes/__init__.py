"""The fix code and evidence text findings carry, written with the program's own names,
shared by rule groups.

A layer above gpuwhy.derived (whose analyses it words) and below gpuwhy.rules: one way
to write a stage, a pipeline's wait, an op group or a GPU's memory, and one way to
rewrite the user's call, for every rule group that shows them. Helpers one group uses
alone stay in that group.

pipeline_code.py (the code to paste for a slow tf.data stage), dataset_calls.py (a
transformation call as written, rewritten), pipeline_evidence.py (a pipeline, its stages
and its wait in titles and evidence), traced_step.py (the "run the step as one graph"
fix), op_groups.py (placement op groups as rows and lists, the prediction note),
gpu_evidence.py (a GPU's memory and activity in evidence), input_fix_text.py (a
measured input-pipeline fix as text: ``gpuwhy fix --input`` and ``gpuwhy.optimize``).
"""
