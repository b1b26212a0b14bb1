"""Where the suite finds its files: the repository, the real manifests of `../shared/corpus/`,
the examples, the golden files, the test data and the shipped policy. Tests and helpers take
their paths from here rather than from their own location, so that moving a test file moves
nothing it reads.
"""

from __future__ import annotations

from tools.paths import REPO as REPO  # re-exported: tests take every path from here

CORPUS = REPO.parent / "shared" / "corpus"
EXAMPLES = REPO / "examples"
EXAMPLE_POLICIES = EXAMPLES / "policies"
DEPLOY = REPO / "deploy"
GOLDEN = REPO / "tests" / "golden"
DATA = REPO / "tests" / "data"
SHIPPED_POLICY = REPO / "policies" / "default.yaml"
