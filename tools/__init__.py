"""Tools that are not tests: the Kubernetes control plane (`cluster`), the benchmarks
(`bench`), the attack and fault suites (`reliability`), the image build and checks (`image`),
and what they share with the tests: the webhook on a loopback port (`loopback`), `waiting`
with a deadline and the checkout's `paths`. Nothing here imports from tests/.
"""
