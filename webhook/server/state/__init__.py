"""What a worker keeps current while it runs: the policy, the certificate, discovered classes.

`policy_store` reloads `--policies`, `tls` the certificate (and client CA) files, and
`discovery` merges the GPU classes found on Nodes into the policy when it asks for them.
Each follows its source in the background; requests read the last good value without waiting.

Imports: `webhook.policy`, `webhook.api`, and `webhook.kube` only lazily (when a policy
discovers classes). Never the rest of `webhook.server`, Flask, gunicorn or cryptography.
"""
