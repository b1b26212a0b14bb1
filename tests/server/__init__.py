"""Tests of `webhook.server`: the real gunicorn server over real TLS on loopback (reviews, edges,
lifecycle, policy and certificate reloads, client CA, discovery) and its command line.
"""
