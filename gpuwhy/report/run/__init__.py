"""A record rendered: terminal.py (with terminal_program.py, the watched program's
sections from the collectors' rows; a fix's text is gpuwhy/fixes/input_fix_text.py's),
html.py (html_sections.py, html_charts.py,
html_timeline.py), json_.py, sarif.py (sarif_places.py); summary.py the one-line facts all
of them share; workers.py the table of a merged cluster."""
