"""Who read a pipeline, as the report words it: the record's reader where it has one."""

from gpuwhy.formatting import consumer_words


def test_a_python_reader_is_named_by_its_line_and_the_library_call_there():
    assert consumer_words("python-loop") == "the loop over the dataset"
    assert consumer_words("python-loop", True, "train.py:27") == "The loop at train.py:27"
    assert (
        consumer_words("python-loop", False, "train.py:9", "TextVectorization.adapt")
        == "TextVectorization.adapt at train.py:9"
    )
    # Keras' own readers keep their names: the record's reader is the user's loop only
    assert consumer_words("keras-fit", False, "train.py:40") == "Model.fit"
