"""Whether TF can use a GPU: a GPU listed *and* a real op placed on it."""

from dataclasses import replace

from gpuwhy.derived.environment import tf_can_use_gpu
from tests import builders as b


def test_a_listed_gpu_that_ran_an_op_is_usable():
    assert tf_can_use_gpu(b.environment()) is True


def test_no_listed_gpu_an_op_on_the_cpu_or_no_tensorflow_is_not():
    assert tf_can_use_gpu(b.environment(tf=b.no_gpu_tf())) is False
    on_cpu = b.tensorflow(confirm_device="/job:localhost/replica:0/task:0/device:CPU:0")
    assert tf_can_use_gpu(b.environment(tf=on_cpu)) is False
    assert tf_can_use_gpu(b.environment(tf=b.tensorflow(confirm_device=None))) is False
    assert tf_can_use_gpu(replace(b.environment(), tensorflow=None)) is False
