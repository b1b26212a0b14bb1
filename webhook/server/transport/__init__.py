"""The bytes of a connection: the gunicorn worker that reads each request in its event loop.

`worker` is gunicorn's gthread worker with the reads moved into the loop, `connection` one
client's handshake and request read under deadlines, `framing` where a request ends.

Imports: gunicorn, `webhook.server.limits` and `webhook.admission` (the `Status` of a 408).
Never the app (`webhook.server.app`), Flask or prometheus_client: gunicorn calls the app.
"""
