"""Tests of `webhook.scheduling`: node affinity matched as the scheduler does it, and the
classes discovery reads from node labels.
"""
