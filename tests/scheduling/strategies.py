"""Hypothesis strategies for fleets of Nodes as discovery reads them: label maps mixing every
label `profiles_from_labels` reads (values well-formed, malformed and spelled twice, as
"2048MiB" and "02048MiB"), a sharing system's key, and labels it never reads."""

from __future__ import annotations

from hypothesis import strategies as st

from webhook.api import names
from webhook.scheduling import SHARING_NODE_KEYS

VALUES = {
    names.MEM_LABEL: ("2048MiB", "02048MiB", "4096MiB", "4Gi", ""),
    names.GFD_MEMORY_LABEL: ("2048", "02048", "4096", "x"),
    names.NAME_LABEL: ("GRID-P4-2Q", "Tesla-P4"),
    names.GFD_PRODUCT_LABEL: ("GRID-P4-2Q", "GRID-T4-4Q"),
    names.COUNT_LABEL: ("1", "2"),
    names.GFD_COUNT_LABEL: ("1", "4"),
    names.GFD_SHARING_LABEL: ("none", "mps", ""),
    names.GFD_REPLICAS_LABEL: ("1", "2", "x"),
    SHARING_NODE_KEYS[0]: ("share",),
    "kubernetes.io/hostname": ("a", "b", "c"),
    "zone": ("a", "b"),
}

NODE_LABELS = st.sets(st.sampled_from(sorted(VALUES))).flatmap(
    lambda keys: st.fixed_dictionaries({k: st.sampled_from(VALUES[k]) for k in sorted(keys)})
)
FLEETS = st.lists(NODE_LABELS, max_size=10)
