"""Fixtures of the cluster tests that more than one module uses."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cluster.second_webhook import SecondWebhook


@pytest.fixture(scope="module")
def second_webhook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecondWebhook]:
    """tests/cluster/second_webhook.py's server, registered nowhere until a test asks."""
    webhook = SecondWebhook(tmp_path_factory.mktemp("second-webhook"))
    yield webhook
    webhook.close()
