"""``gpuwhy run SCRIPT`` and ``gpuwhy.session()``: the program watched from inside.

watched.py is ``gpuwhy run``'s mode: the script run inside a Session, with live metrics;
session.py starts the in-process collectors and turns what they saw into a record;
collect/registry.py lists them (COLLECTORS, in the order their reads give; how to add one);
script.py runs the script as ``python script.py`` would; script_modules.py keeps the
script's own modules and gpuwhy's apart."""
