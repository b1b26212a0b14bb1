"""What the offline commands do: `review` (CI's dry run of manifests, or with `--cluster` of
what a cluster stores), `policy check --nodes` and `policy explain`; their command lines are
`webhook.cli.review` and `webhook.cli.policy`.

A shell: reads files and stdin (`live`: the cluster, with LIST only), calls
`webhook.admission` and `webhook.core`, prints. Imports: any layer below it; never
`webhook.server` or `webhook.node`; only `live` imports `webhook.kube`.
"""
