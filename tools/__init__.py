"""Tools that are not tests: the Kubernetes control plane (`cluster`), the benchmarks
(`bench`), the attack and fault suites (`reliability`), the image build and checks (`image`),
the CEL cost of the compiled admission policies by the apiserver's own code (`cel_cost`, which
builds the Go program `celcost/`), and what they share with the tests: the webhook on a
loopback port (`loopback`), `waiting` with a deadline and the checkout's `paths`. Nothing here
imports from tests/.
"""
