"""Fixtures the collectors' tests share."""

import time

import pytest


@pytest.fixture
def steps():
    """A step collector watching this process, its TF and Keras hooks installed."""
    from gpuwhy.collect.inprocess.steps import StepCollector

    collector = StepCollector()
    collector.start(time.perf_counter())
    collector.on_tensorflow()
    collector.on_keras()
    yield collector
    collector.stop()
