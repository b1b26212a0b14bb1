"""The HTTPS admission server (`python -m webhook serve`): gunicorn, Flask, TLS, reloads, metrics.

`cli` registers the command; `gunicorn_app` runs the master and builds each worker's
`app`; `tls` and `policy_store` follow their files while the server runs; `discovered`
merges the classes found on Nodes when a policy asks for them.
"""
