"""The HTTPS admission server (`python -m webhook serve`): gunicorn, Flask, TLS, reloads, metrics.

`cli` registers the command; `gunicorn_app` runs the master and builds each worker's
`app`; `tls` and `policy_store` follow their files while the server runs; `discovered`
merges the classes found on Nodes when a policy asks for them.

A shell: imports `webhook.admission`, `webhook.policy`, `webhook.api`, gunicorn, Flask,
werkzeug and prometheus_client, and `webhook.kube` only lazily, when a policy discovers
classes from Nodes. Never `webhook.offline` or `webhook.node`.
"""
