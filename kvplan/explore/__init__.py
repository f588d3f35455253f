"""`kvplan explore`: an interactive terminal explorer of a plan ("what if" on the flags).

`kvplan.explore.state` is the session (controls, recompile, totals against the starting plan) and
imports no UI; `kvplan.explore.app` draws it with Textual, which only `kvplan explore` imports.
"""
