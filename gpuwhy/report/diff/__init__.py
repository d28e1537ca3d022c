"""A comparison of two records (``gpuwhy diff``) rendered: terminal.py, json_.py, html.py
(both runs' timelines on one axis, from the run renderers' pieces)."""
