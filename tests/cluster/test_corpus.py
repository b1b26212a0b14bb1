"""Every manifest of the corpus (`../shared/corpus/`) created on the real control plane with
lwgpu installed and the shipped policy, held to what `webhook review` predicted for it
(tests/cluster/corpus_check.py): what the apiserver stores, the documents it refuses (with its
own words, `REFUSED`), and where kube-scheduler puts the pods.

One file per test, so the namespace fixture frees the GPUs its pods took before the next.
`-s` prints what became of each document.
"""

from __future__ import annotations

import pytest

from tests.cluster.corpus_check import REFUSED, check_file
from tests.support.manifests import corpus_files, documents
from tests.support.paths import SHIPPED_POLICY

FILES = corpus_files()


@pytest.fixture
def shipped(lwgpu):
    """The shipped policy is what the webhook serves (another test may have rolled out
    another; when it is already served this is one read of the ConfigMap)."""
    lwgpu.set_policies({"default.yaml": SHIPPED_POLICY.read_text()})
    return SHIPPED_POLICY


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_the_cluster_stores_refuses_and_places_as_review_predicted(shipped, namespace, path):
    outcomes = check_file(namespace.plane, path, namespace.name, shipped)
    assert [o.name for o in outcomes if o.text.startswith("refused")] == sorted(
        name for name in REFUSED if name.startswith(f"{path.name}#")
    )
    for outcome in outcomes:
        print(f"{outcome.name}: {outcome.text}")


def test_every_refusal_names_a_corpus_document():
    names = {doc.where.rsplit("/", 1)[-1] for path in FILES for doc in documents(path)}
    assert set(REFUSED) <= names
