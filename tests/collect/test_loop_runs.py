"""The step collector's runs of reads of one iterator, told to the activity collector
(a validation pass between training steps) when the reads are folded: fed by hand, no
TensorFlow."""

from gpuwhy.collect.inprocess.steps import StepCollector


def _told(reads):
    heard = []
    collector = StepCollector()
    collector.loop_listener = lambda start, end, site: heard.append((start, end, site))
    for read in reads:
        collector._on_next(*read)
    assert heard == []  # the program's thread only appends the reads
    collector.fold()
    return heard


def test_a_run_of_reads_is_told_when_another_iterator_reads_or_it_ends():
    train = [(1, "t.py:5", float(i), i + 0.1, False) for i in range(3)]
    val = [(2, "t.py:9", 3.0 + i, 3.05 + i, False) for i in range(4)] + [
        (2, "t.py:9", 7.0, 7.01, True)
    ]
    after = [(3, "t.py:5", 8.0, 8.1, False)]
    assert _told(train + val + after) == [(0.0, 2.1, "t.py:5"), (3.0, 7.01, "t.py:9")]


def test_a_zips_partner_or_a_peek_is_no_loop():
    """zip(ds_a, ds_b) reads each once a step, in turn; next(iter(ds)) reads once."""
    zipped = [(k, "t.py:5", i + 0.5 * (k - 1), i + 0.5 * (k - 1) + 0.1, False)
              for i in range(5) for k in (1, 2)]  # fmt: skip
    assert _told(zipped) == []
    peek = [(7, "t.py:3", 0.0, 0.2, False), (8, "t.py:5", 1.0, 1.1, False)]
    assert _told(peek) == []


def test_a_run_that_spans_two_folds_is_told_once_whole():
    heard = []
    collector = StepCollector()
    collector.loop_listener = lambda start, end, site: heard.append((start, end, site))
    for i in range(3):
        collector._on_next(1, "t.py:5", float(i), i + 0.1, False)
    collector.fold()
    assert heard == []  # still running
    collector._on_next(1, "t.py:5", 3.0, 3.1, False)
    collector._on_next(1, "t.py:5", 4.0, 4.01, True)
    collector.fold()
    assert heard == [(0.0, 4.01, "t.py:5")]
