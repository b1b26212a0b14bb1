"""A test double of how Go reads YAML: go-yaml v2's implicit typing of plain scalars.

kubectl and the apiserver decode YAML with `sigs.k8s.io/yaml`, which uses go-yaml v2; its
`resolve.go` (`resolve`, the `resolveTable` and `resolveMapList`) types a plain scalar as:

- a boolean: `y Y yes Yes YES on On ON true True TRUE` and the `n`/`no`/`off`/`false` forms;
- null: `~ null Null NULL` and the empty scalar;
- an integer: what `strconv.ParseInt(s, 0, 64)` reads once `_` is removed (`0x1F`, `0o17`,
  `0b101`, leading-zero octal, signs), for scalars starting with a digit or a sign;
- a float: what `strconv.ParseFloat` reads (`1e5`, `1e-4`, `.5`, `5.`, hex floats `0x1p3`,
  signed `inf`/`nan`), and `.inf`, `-.inf`, `.nan` in their three spellings;
- a timestamp: a scalar starting `YYYY-MM-DD` (`parseTimestamp`), re-formatted on output.

Written independently of the product's `webhook.offline.yaml_output`, from go-yaml's rules,
so a round trip through this loader checks that dumper. Any non-string type is loaded as a
`GoTyped(tag, text)` marker: tests only need to see that a string did not stay a string.
"""

from __future__ import annotations

import re
from typing import ClassVar, NamedTuple

import yaml


class GoTyped(NamedTuple):
    """A plain scalar Go would read as `tag` (bool, null, int, float, timestamp), not a string."""

    tag: str
    text: str


_RULES = [
    ("bool", r"y|Y|yes|Yes|YES|on|On|ON|true|True|TRUE|n|N|no|No|NO|off|Off|OFF|false|False|FALSE"),
    ("null", r"~|null|Null|NULL|"),
    ("int", r"[-+]?(0[bB][01_]+|0[oO]?[0-7_]+|0[xX][0-9a-fA-F_]+|[0-9][0-9_]*)"),
    ("float", r"[-+]?(\.[0-9_]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9_]+)?"),
    ("float", r"[-+]?0[xX][0-9a-fA-F_]*(\.[0-9a-fA-F_]*)?[pP][-+]?[0-9_]+"),
    ("float", r"[-+](?i:inf|infinity|nan)"),
    ("float", r"[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)"),
    ("timestamp", r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ].*)?"),
]


class GoYamlLoader(yaml.SafeLoader):
    """A SafeLoader whose implicit resolvers are go-yaml v2's, not PyYAML's."""

    yaml_implicit_resolvers: ClassVar[dict[str | None, list[tuple[str, re.Pattern[str]]]]] = {}


for _tag, _pattern in _RULES:
    GoYamlLoader.add_implicit_resolver(f"tag:go-yaml/{_tag}", re.compile(f"^(?:{_pattern})$"), None)
    GoYamlLoader.add_constructor(
        f"tag:go-yaml/{_tag}",
        lambda loader, node, tag=_tag: GoTyped(tag, loader.construct_scalar(node)),
    )


def load_all(text: str) -> list[object]:
    """Every document of `text`, typed as Go would type it."""
    return list(yaml.load_all(text, Loader=GoYamlLoader))
