"""Helpers shared across the suite: object builders, the shipped and test policies, the corpus
and examples, golden files, waiting with a deadline, the in-process CLI, the HTTPS client, the
real server launcher, certificate and kubectl helpers, and the rendered install.
"""
