"""The HTTPS admission server (`lwgpu serve`): gunicorn, TLS, the WSGI app, reloads, metrics.

Four parts, each importing only the parts below it (an import-linter layers contract in
pyproject.toml holds them to it):

- `master`: the gunicorn master process, its settings and hooks; builds each worker's app
  after the fork.
- `transport`: the custom gunicorn worker, which reads every request under deadlines before
  a thread gets it; and `app`: the WSGI app the thread runs (`/mutate`, `/validate`, the
  probes, `/metrics`, error answers, the access log). Neither imports the other.
- `state`: what a worker keeps current while it runs: the policy, the TLS certificate and
  the profiles discovered from Nodes.
- `limits`: what one client may take (read deadlines, body caps), free of any import so the
  command line can read its defaults cheaply.

A shell: imports `webhook.admission`, `webhook.policy`, `webhook.api`, gunicorn, Flask,
werkzeug and prometheus_client, and `webhook.kube` only lazily, when a policy discovers
classes from Nodes. Never `webhook.offline`, `webhook.node`, `certs` or cryptography (about
8 MiB in every process, for one field: `state/validity.py`).
"""
