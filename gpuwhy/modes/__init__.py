"""One module per way a record is made: check, audit, run (the watched script), watch,
fix (``gpuwhy fix --input``), merge, and the Keras callback. Each exposes the function
that both ``gpuwhy.<mode>()`` and its command call; ``commands/`` only parses arguments
and writes outputs."""
