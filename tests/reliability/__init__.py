"""Reliability tooling (issue 8): input mutators for the fuzz tests and the faults-under-load
script, `python -m tests.reliability.faults`.

Nothing here is collected by pytest (no module is named `test_*`); the fuzz tests in
`tests/test_fuzz_*.py` import the mutators, and the faults script prints a table and writes
JSON to the git-ignored `bench-results/`.
"""
