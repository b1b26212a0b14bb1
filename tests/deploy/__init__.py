"""Tests of `deploy/`: the rendered manifests, the image, the webhook configurations'
matchConditions, and the install end to end through the apiserver dispatcher double.
"""
