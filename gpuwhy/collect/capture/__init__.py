"""XProf captures (XSpace, ``*.xplane.pb``) read back as the ``capture`` section."""

# read_capture's ``prefer`` for a watched loop without a training tf.function (eager):
# its steps are an op it runs once a step, not a tf.function it calls (an evaluation)
EAGER = "eager"
