"""Who read a pipeline, as the report words it: the record's reader where it has one."""

from gpuwhy.formatting import FIT_VALIDATION, consumer_words


def test_a_python_reader_is_named_by_its_line_and_the_library_call_there():
    assert consumer_words("python-loop") == "the loop over the dataset"
    assert consumer_words("python-loop", True, "train.py:27") == "The loop at train.py:27"
    assert (
        consumer_words("python-loop", False, "train.py:9", "TextVectorization.adapt")
        == "TextVectorization.adapt at train.py:9"
    )
    # Keras' own readers keep their names: the record's reader is the user's loop only
    assert consumer_words("keras-fit", False, "train.py:40") == "Model.fit"


def test_fits_validation_is_named_as_fits_not_as_a_call_to_evaluate():
    """Keras' fit reads validation_data through evaluate: the collector marks it, and the
    report says it as the program wrote it, where it said "read by Model.evaluate"."""
    assert consumer_words("keras-evaluate", False, None, FIT_VALIDATION) == (
        "Model.fit's validation"
    )
    assert consumer_words("keras-evaluate") == "Model.evaluate"
