"""`lwgpu policy sync`: keeps the apiserver's final-state check equal to the policy the webhook
serves, from a sidecar container beside the webhook.

`final_state.FinalStateSync` follows the policy directory with the server's own follower
(`webhook.server.state.policy_store`), compiles each good load (`webhook.compile`) and, when
the compiled objects differ from those last applied, writes them whole into the objects the
install created (`webhook.kube.admission_policies`: a merge patch, never a create).

Why a sidecar and not the webhook server itself: the kubernetes client costs about 50 MiB in
every process that imports it, and the server runs one process per gunicorn worker; a sidecar
is one applier per replica. Every replica writes identical objects, so replicas agree
instead of fighting.

A shell, above `webhook.server` (whose policy follower it reuses): imports `webhook.server.
state`, `webhook.compile`, `webhook.kube`, `webhook.policy` and the standard library.
"""
