"""The pure decision: what each container asks, which class fits, and the rewrite.

`decision.decide` takes an object and the policy that governs it and returns a
`Decision`; `asks` reads what containers need, `placement` reads what a pod already pins
and picks the best fit, `edit` rewrites copy-on-write while recording the JSON Patch.

Imports: `webhook.scheduling`, `webhook.policy`, `webhook.api` and the standard library.
No I/O, no module state, never flask, werkzeug, gunicorn, kubernetes, pynvml or
prometheus_client.
"""
