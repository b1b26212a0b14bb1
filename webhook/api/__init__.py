"""The Kubernetes vocabulary every layer speaks: pure data, no I/O.

Resource quantities (`quantity`) and their spelling as the apiserver stores them
(`canonical`), objects as the apiserver hands them to admission (`decoding`), the label,
annotation and resource names lwgpu reads and writes (`names`), where each workload kind
keeps its pod template (`workload`), typed shapes of the objects and patches we handle
(`types`), and bounded renderings of user input for messages (`text`).

Imports: the standard library only. Every other package of `webhook` may import this one.
"""
