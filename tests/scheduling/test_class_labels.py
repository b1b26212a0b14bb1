"""`profiles_from_labels` depends only on which distinct `class_labels` values the Nodes
carry: not on labels outside `CLASS_LABELS` and the sharing keys, not on how many Nodes carry
each value, not on the order they are listed in. The node inventory relies on it to hold each
Node's class labels only and recompute the classes from the distinct values
(webhook/kube/node_tally.py)."""

from collections.abc import Iterator, Mapping

from hypothesis import given
from hypothesis import strategies as st

from tests.scheduling.strategies import FLEETS, VALUES
from webhook.scheduling import CLASS_LABELS, SHARING_NODE_KEYS, class_labels, profiles_from_labels


def by_name(fleet):
    return {f"node-{i}": labels for i, labels in enumerate(fleet)}


@given(FLEETS, st.randoms())
def test_the_distinct_class_labels_in_any_order_give_the_same_classes(fleet, random):
    distinct = list({class_labels(labels) for labels in fleet})
    random.shuffle(distinct)
    assert profiles_from_labels(by_name(dict(v) for v in distinct)) == profiles_from_labels(
        by_name(fleet)
    )


def test_a_split_class_is_named_the_same_whatever_the_order():
    """Nodes of one memory with no memory label in common are split by the label each carries
    (`_selected`); the shortest spelling keeps the plain name in any order (before, the first
    node listed did)."""
    fleet = [{"aliyun.accelerator/nvidia_mem": v} for v in ("02048MiB", "2048MiB")]
    for order in (fleet, fleet[::-1]):
        found = profiles_from_labels(by_name(order))
        assert [(p.name, dict(p.node_selector)) for p in found] == [
            ("2048MiB", {"aliyun.accelerator/nvidia_mem": "2048MiB"}),
            ("2048MiB-02048MiB", {"aliyun.accelerator/nvidia_mem": "02048MiB"}),
        ]


class Recording(Mapping[str, str]):
    """A node's labels that note every key read; iterating reads them all."""

    def __init__(self, labels: dict[str, str], read: set[str]):
        self._labels, self._read = labels, read

    def __getitem__(self, key: str) -> str:
        self._read.add(key)
        return self._labels[key]

    def __iter__(self) -> Iterator[str]:
        self._read.update(VALUES)
        return iter(self._labels)

    def __len__(self) -> int:
        return len(self._labels)


@given(FLEETS, st.sets(st.sampled_from(sorted(VALUES))))
def test_profiles_from_labels_reads_only_the_class_labels(fleet, sharing_keys):
    """A label read by the functions and missing from CLASS_LABELS fails here: the inventory
    would drop it from every Node."""
    read: set[str] = set()
    found = profiles_from_labels(by_name(Recording(node, read) for node in fleet), sharing_keys)
    assert read <= {*CLASS_LABELS, *sharing_keys}
    assert found == profiles_from_labels(by_name(fleet), sharing_keys)


def test_class_labels_keeps_the_sharing_keys_and_drops_the_rest():
    labels = {"aliyun.accelerator/nvidia_mem": "2048MiB", SHARING_NODE_KEYS[0]: "x", "zone": "a"}
    assert class_labels(labels) == (
        ("ack.node.gpu.schedule", "x"),
        ("aliyun.accelerator/nvidia_mem", "2048MiB"),
    )
    assert class_labels(labels, sharing_keys=("zone",)) == (
        ("aliyun.accelerator/nvidia_mem", "2048MiB"),
        ("zone", "a"),
    )
