"""Tests of `webhook.compile`: the policy compiled into Kubernetes admission policy objects."""
