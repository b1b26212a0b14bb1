"""Tests of `webhook.admission`: the review function under adversarial pods and fuzzed
AdmissionReview bodies, in-process and over HTTPS.
"""
