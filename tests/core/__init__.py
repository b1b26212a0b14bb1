"""Tests of `webhook.core`: the decision rule by rule, its properties, and its patches applied
by kubectl and validated against the Kubernetes schemas.
"""
