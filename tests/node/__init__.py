"""Tests of `webhook.node`: the `label-node` agent over the NVML double and the API double."""
