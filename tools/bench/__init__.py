"""Benchmarks of the admission webhook (issue 7): `python -m tools.bench.run`.

Scripts that print a table and write JSON to `bench-results/`; not collected by
pytest (no module here is named `test_*`) and never asserting on time.
"""
