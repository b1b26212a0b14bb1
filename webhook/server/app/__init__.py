"""The WSGI app a worker's threads run: the review endpoint, probes, metrics, error answers.

`wsgi` builds the app, `reviews` answers `/mutate` and `/validate`, `errors` writes every
error as a Kubernetes `Status`, `access_log` the line per review, `metrics` the Prometheus
metrics, `metrics_dir` the directory they share between workers.

Imports: `webhook.server.state`, `webhook.server.limits`, `webhook.admission`,
`webhook.policy`, `webhook.api`, Flask, werkzeug, prometheus_client, orjson. Never the
master or the transport (`webhook.server.master`, `webhook.server.transport`), nor gunicorn.
This package's own `__init__` imports nothing, so the master can import `metrics_dir` before
prometheus_client is loaded.
"""
