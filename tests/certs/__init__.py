"""Tests of `certs`: generation, bad input, rotation, installation on the API double, and the
certificates in real TLS handshakes and `openssl verify`.
"""
