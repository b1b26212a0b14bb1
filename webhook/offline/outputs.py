"""What `webhook review` prints: notices on stderr, then one printer per `--output` format.

Each result is the `Verdict` `review` builds per document: where it was found
(`file#index`), `ref` (Kind/namespace/name), the verdict, the object as the webhook gets it
(`source`: a manifest as the apiserver decodes it, an AdmissionReview's request.object) and as
the apiserver stores it (`object`), the webhook's JSON Patch and, for an AdmissionReview, the
server's `review`.
"""

from __future__ import annotations

import difflib
import json
import sys
from typing import Any, Final

from webhook.api.workload import as_map, group_of

from .junit import Report, junit_xml
from .review import Verdict
from .yaml_output import dump_manifest

# The keys of one verdict in `-o json`, the same for every input.
VERDICT_KEYS: Final = (
    "where",
    "ref",
    "policy",
    "outcome",
    "allowed",
    "profile",
    "reason",
    "warnings",
    "patch",
)


def print_notices(results: list[Verdict]) -> None:
    """Each warning and denial on stderr, naming where the object was and what it is."""
    for result in results:
        for warning in result["warnings"]:
            print(f"Warning: {result['ref']}: {warning}", file=sys.stderr)
        if not result["allowed"]:
            print(f"Denied: {result['where']} {result['ref']}: {result['reason']}", file=sys.stderr)


def default_format(results: list[Verdict]) -> str:
    """json when every input was an AdmissionReview, else yaml."""
    return "json" if results and all("review" in r for r in results) else "yaml"


def print_patches(results: list[Verdict]) -> None:
    """JSON Lines: per object where it was, what it is, its outcome and its JSON Patch."""
    for result in results:
        line = {key: result[key] for key in ("where", "ref", "outcome", "patch")}
        print(json.dumps(line))


def print_json(results: list[Verdict], whole: bool) -> None:
    """An array of verdicts; a verdict of an AdmissionReview also holds the server's `response`.

    The one exception is review's contract (docs/CLI.md): an input that is exactly one
    AdmissionReview (`whole`: nothing else was given, nothing failed to read) prints the
    AdmissionReview the server answers, unwrapped, so it can be compared with it as it is.
    """
    if whole and len(results) == 1 and "review" in results[0]:
        print(json.dumps(results[0]["review"], indent=2))
        return
    out = []
    for result in results:
        verdict: dict[str, object] = {key: result[key] for key in VERDICT_KEYS}
        if "schedulable" in result:  # with --nodes
            verdict["schedulable"] = result["schedulable"]
        if "review" in result:
            verdict["response"] = result["review"]
        out.append(verdict)
    print(json.dumps(out, indent=2))


def _denied_comment(result: Verdict) -> str:
    """A YAML comment in place of an object that would not be admitted (kubectl skips it)."""
    reason = " ".join(str(result["reason"]).split())
    return f"# lwgpu: denied, not admitted: {result['where']} {result['ref']}: {reason}\n"


def print_yaml(results: list[Verdict]) -> None:
    """Every admitted object as it would be stored (rewritten or unchanged; for an
    AdmissionReview its request.object); a comment where an object was denied."""
    parts = []
    for result in results:
        if not result["allowed"]:
            parts.append(_denied_comment(result))
        elif result["object"] is not None:  # a DELETE review carries no object
            parts.append(dump_manifest(result["object"]))
    sys.stdout.write("---\n".join(parts))


def diff_name(obj: Any, namespace: str) -> str:
    """kubectl diff's file name for an object: group.version.Kind.namespace.name (`namespace`
    where the object names none, as the apiserver would default it)."""
    if not isinstance(obj, dict):
        return "object"
    metadata = as_map(obj.get("metadata"))
    api = str(obj.get("apiVersion") or "v1")
    group = group_of(api)
    version = api.rsplit("/", 1)[-1]
    parts = [group, version] if group else [version]
    name = metadata.get("name") or metadata.get("generateName") or ""
    return ".".join(
        [*parts, str(obj.get("kind")), str(metadata.get("namespace") or namespace), name]
    )


def manifest_diff(result: Verdict) -> str:
    """The unified diff from the object as the webhook gets it to the object as stored, as
    `kubectl diff` prints it (`diff -u -N LIVE/... MERGED/...`): like kubectl's, both sides are
    the apiserver's decoding, so it shows what lwgpu changed and not how the apiserver spells
    quantities. Both sides go through `dump_manifest`."""
    name = diff_name(result["object"], result["namespace"])
    before, after = f"LIVE/{name}", f"MERGED/{name}"
    lines = difflib.unified_diff(
        dump_manifest(result["source"]).splitlines(True),
        dump_manifest(result["object"]).splitlines(True),
        f"{before}\t{result['where']}",
        f"{after}\tas admitted by lwgpu",
    )
    return f"diff -u -N {before} {after}\n" + "".join(lines)


def print_diffs(results: list[Verdict]) -> None:
    """A unified diff per rewritten object; a comment line per denied one; nothing for the rest."""
    for result in results:
        if not result["allowed"]:
            sys.stdout.write(_denied_comment(result))
        elif result["outcome"] == "mutated":
            sys.stdout.write(manifest_diff(result))


def print_outputs(
    results: list[Verdict], output: str | None, whole: bool, report: Report | None = None
) -> None:
    """Warnings and denials on stderr, then the results on stdout in the `--output` format
    (`junit` also reports what `report` holds)."""
    print_notices(results)
    fmt = output or default_format(results)
    if fmt == "junit":
        sys.stdout.write(junit_xml(results, report or Report()))
    elif fmt == "patch":
        print_patches(results)
    elif fmt == "json":
        print_json(results, whole)
    elif fmt == "diff":
        print_diffs(results)
    else:
        print_yaml(results)
