"""Tests of `webhook.offline`: the `review` CLI and its verdicts over the shared corpus."""
