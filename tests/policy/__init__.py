"""Tests of `webhook.policy`: loading and checking policy files, discovered classes, the YAML
reader, and policy fuzzing.
"""
