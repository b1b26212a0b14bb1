"""Parity of the rewrite in the apiserver with the webhook, on the real kube-apiserver: every
document of the corpus (`../shared/corpus/`) and generated pods and workloads
(tests/cluster/apiserver_pods.py) are created with a server-side dry run (all of admission
runs, the response is the object as it would be stored) in a namespace the installed webhook
decides and in one only the compiled MutatingAdmissionPolicy and final-state
ValidatingAdmissionPolicy of the shipped policy decide (tests/cluster/rewrite_sides.py).
Each must be stored equal on both sides, or refused on both; lwgpu's warnings (the webhook's
alone) and the words of a refusal are left aside. `-s` prints the figures.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings

from tests.cluster.apiserver_pods import objects
from tests.cluster.rewrite_sides import Outcome, Sides, dry_create, installed, sides
from tests.support.manifests import corpus_files, documents
from tests.support.paths import SHIPPED_POLICY
from webhook.files import load_policies

POLICIES = load_policies(SHIPPED_POLICY)
FILES = corpus_files()
# Enough to meet every branch of the generator many times in about a minute (two dry runs of
# ~0.15 s each per object here).
GENERATED = 150
TALLY: Counter[tuple[str, str]] = Counter()


def verdict(webhook: Outcome, apiserver: Outcome) -> str:
    """`stored` (`, rewritten` where lwgpu's webhook said it changed it), `refused` (equal on
    both sides), or how they differ."""
    if webhook.refused and apiserver.refused:
        return "refused"
    if webhook.refused != apiserver.refused:
        side = "the webhook" if webhook.refused else "the apiserver"
        return f"refused by {side} only: {webhook.refusal or apiserver.refusal}"
    if webhook.stored != apiserver.stored:
        return "stored differently"
    return "stored, rewritten" if any("->" in w for w in webhook.warnings) else "stored"


@pytest.fixture(scope="module")
def compared(lwgpu) -> Iterator[Sides]:
    plane = lwgpu.plane
    with installed(plane, POLICIES), sides(plane, f"parity-{os.getpid()}") as found:
        found.await_sides()
        yield found
    for (source, outcome), count in sorted(TALLY.items()):
        print(f"parity: {source}: {outcome}: {count}")


def compare(found: Sides, obj: dict, source: str) -> tuple[Outcome, Outcome, str]:
    webhook = dry_create(found.plane, found.webhook, obj)
    apiserver = dry_create(found.plane, found.apiserver, obj)
    outcome = verdict(webhook, apiserver)
    TALLY[source, outcome.partition(":")[0]] += 1
    return webhook, apiserver, outcome


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_each_corpus_document_is_stored_or_refused_alike(compared, path):
    for doc in documents(path):
        webhook, apiserver, outcome = compare(compared, doc.body, "corpus")
        assert outcome in ("stored", "stored, rewritten", "refused"), (doc.where, outcome)
        assert webhook.stored == apiserver.stored, doc.where


@settings(
    max_examples=GENERATED,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(obj=objects())
def test_generated_objects_are_stored_or_refused_alike(compared, obj):
    webhook, apiserver, outcome = compare(compared, obj, "generated")
    assert outcome in ("stored", "stored, rewritten", "refused"), (obj, outcome)
    assert webhook.stored == apiserver.stored, obj
