"""Tests of `webhook.api`: Kubernetes quantities."""
