"""Kubernetes API client code: the one client builder, the node inventory (list + watch), the
admission policies `policy sync` writes, and the paged LISTs `review --cluster` reads.

The only package that imports the `kubernetes` client at module level; callers import
its modules lazily, because the client costs ~50 MiB of memory in every process.
Imports: `webhook.scheduling`, `webhook.policy`, `webhook.api`, `kubernetes`; never a shell
above it, nor `webhook.files`.
"""
