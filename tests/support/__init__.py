"""Helpers shared across the suite: object builders, the shipped and test policies, the corpus
and examples, golden files, the in-process CLI, certificate and kubectl helpers, the rendered
install, the kubelet-written volumes, the fuzz tests' mutations (`mutate`) and the checks of a
well-formed answer (`answers`). The real server launcher, the HTTPS client and `wait_for` are
in tools/ (`tools.loopback`, `tools.waiting`), which the tools share with the tests.
"""
