"""TF's memory statistics read from a thread of gpuwhy's own: they never import, so a
poll while the program is still importing TensorFlow cannot deadlock its import."""

import subprocess
import sys
import textwrap

POLL_WHILE_IMPORTING = textwrap.dedent(
    """
    import threading
    import time

    from gpuwhy.tfapi.memory import runtime_context, tf_memory_in_use

    stop = threading.Event()
    errors = []


    def poll():
        while not stop.is_set():
            try:
                tf_memory_in_use()
            except Exception as error:
                errors.append(repr(error))
            time.sleep(0.0005)


    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    import tensorflow as tf  # the timeline polls from the program's start, as here

    stop.set()
    poller.join()
    assert not errors, errors[:3]
    assert runtime_context() is None  # the runtime has not started: nothing touched it
    tf.constant(1.0) + 1.0
    assert runtime_context() is not None
    print("imported", tf.__version__)
    """
)


def test_polling_tf_memory_while_the_program_imports_tensorflow_never_deadlocks():
    # before the fix every run of this raised _DeadlockError in the import (4 of 4)
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", POLL_WHILE_IMPORTING],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "imported" in done.stdout
