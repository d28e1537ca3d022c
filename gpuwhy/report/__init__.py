"""Renderers: they only format a Record or a Comparison. ``run/`` renders a record (what
``gpuwhy run``, ``check``, ``audit``, ``watch`` and ``report RUN.json`` print: terminal,
JSON, HTML, SARIF), ``diff/`` a comparison of two (terminal, JSON, HTML); renderers.py
picks one by name. The modules beside them are shared by both."""
