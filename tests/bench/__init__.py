"""Tests of the benchmarks' pure logic (the benchmarks themselves are run by `make bench`)."""
