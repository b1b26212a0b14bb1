"""Reliability tooling (issue 8): the hostile-network attack suite,
`python -m tools.reliability.attacks`, and the faults-under-load script,
`python -m tools.reliability.faults`.

`stalls` and `payloads` are the attacks' stalled connections and hostile bodies, `load`
drives a server, `procfs` finds its workers, `faults` strikes it (`policy_steps`: the
policy-file faults) and `report` tabulates; each script prints a table and writes JSON to
the git-ignored `bench-results/`. The fuzz and adversarial tests' own helpers (`mutate`,
`answers`) are in tests/support/.
"""
