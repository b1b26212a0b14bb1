"""Reliability tooling (issue 8): what the fuzz and adversarial tests share, and the
faults-under-load script, `python -m tests.reliability.faults`.

Nothing here is collected by pytest (no module is named `test_*`). `mutate` generates broken
inputs, `answers` checks answers, `load` drives a server, `faults` strikes it and `report`
tabulates; the script prints a table and writes JSON to the git-ignored `bench-results/`.
"""
