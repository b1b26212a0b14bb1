"""The offline commands: `review` (CI's dry run of manifests) and `policy check`.

A shell: reads files and stdin, calls `webhook.admission` and `webhook.core`, prints.
Imports: any layer below it; never `webhook.server` or `webhook.node`.
"""
