import pytest

from tests.collect.capture import reference


@pytest.fixture(scope="session")
def xplane_pb2():
    """TensorFlow's own parser of the capture format (imported once: it imports TF)."""
    return reference.xplane_pb2()


@pytest.fixture(scope="session")
def tf_spaces(xplane_pb2):
    """Every committed capture parsed by TensorFlow, by its short name."""
    return {name: reference.parse(path) for name, path in reference.CAPTURES.items()}
