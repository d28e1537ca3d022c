"""What a run measured anywhere would look like on a named GPU.

gpuwhy/gpu_specs.py holds the GPUs' published peaks; the cost model of a traced step on one of them
builds on the facts the run collected (placement's tensor ops, the pipeline's rates).
"""
