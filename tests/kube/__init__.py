"""Tests of `webhook.kube`: the node inventory listed and watched on the Kubernetes API double."""
