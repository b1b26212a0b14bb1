"""Tests of `policy sync`: the final-state check kept in the apiserver."""
