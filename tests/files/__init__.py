"""Tests of `webhook.files`: the one directory rule, as every command that reads a tree
applies it.
"""
