"""Fixes tried on the user's own program (``gpuwhy fix SCRIPT``), after the findings.

The flow: the findings of a first run and its facts name the code to change
(``kinds/``, one module per kind of fix, each a pure function of facts and source);
each fix is written as edits of a copy of the program's tree (``workspace``); the
program runs again, bounded, as a child ``gpuwhy run`` (``variant_runs``) with the same
seeds (``child``); each fix is judged on whether it ran, computed the same
(``same_results``) and made the step faster (``judge``); the ones that held are tried
together and written as one patch (``patch``).
"""
