"""Which class the rewrite in the apiserver gives a pod: `webhook.core.placement` in CEL.

The pod's own pins first: a class is still a candidate only when its nodes carry a value that
the pod's nodeSelector and every required node selector term it may land through admit, for
every class label key the pod constrains (`placement.pinned_classes`, read term by term). The
selector the webhook wrote for an earlier choice, still in place with `lwgpu.io/profile`, is
no pin (`placement.own_choice`). Then the smallest candidate that holds every ask
(`placement.fitting`: classes are in fit order).

The classes are literals of the governing policy (`variables.classLabels`, `classKeys`), so
every comparison is with a known label value: Kubernetes' operators reduce to membership and,
for `Gt`/`Lt`, an integer comparison of at most 18 digits, so that CEL's `int()` never fails.
The scheduler (`scheduling.requirement_met`) also compares a 19-digit value within 64 bits,
and a label value may have 63 characters: such a bound, far past any GPU memory in MiB, is
no integer here.
"""

from __future__ import annotations

from webhook.api.names import PROFILE_ANNOTATION

from .cel import Named, dig, string

PROFILE = string(PROFILE_ANNOTATION)
INTEGER = string("^-?[0-9]{1,18}$")
COUNT = string("^[0-9]{1,18}$")


def _expressions(term: str) -> str:
    return dig(term, ("matchExpressions",), "[]")


def _pins(key: str) -> str:
    """The pod's nodeSelector pins `key`, leaving out the webhook's own earlier selector."""
    return f"({key} in variables.selector && !({key} in variables.ownKeys))"


def _constrains(term: str, key: str) -> str:
    """`key` is pinned on the way onto a node through `term`."""
    return f"({_pins(key)} || {_expressions(term)}.exists(e, has(e.key) && e.key == {key}))"


def _admits(expression: str, value: str) -> str:
    """A node selector requirement admits the label value `value` (`placement._matching`)."""
    values = dig(expression, ("values",), "[]")
    operator = f"{expression}.operator"
    return (
        f"has({operator}) && ({operator} == 'In' ? {value} in {values}"
        f"\n  : {operator} == 'NotIn' ? !({value} in {values}) : {operator} == 'Exists'"
        f"\n  || (({operator} == 'Gt' || {operator} == 'Lt') && size({values}) == 1"
        f" && string({values}[0]).matches({INTEGER})\n    && {value}.matches({COUNT})"
        f" && ({operator} == 'Gt' ? int({value}) > int(string({values}[0]))"
        f" : int({value}) < int(string({values}[0])))))"
    )


def _class_admitted(term: str) -> str:
    """The class whose labels are `l` is admitted on the way through `term`."""
    return (
        f"variables.classKeys.all(k, !{_constrains(term, 'k')}"
        f"\n  || (k in l && (!{_pins('k')} || variables.selector[k] == l[k])"
        f"\n    && {_expressions(term)}.all(e, !(has(e.key) && e.key == k)"
        f" || {_admits('e', 'l[k]')})))"
    )


def placement_variables(ignores_unfitting: bool) -> list[Named]:
    """The class the webhook would choose, from the pins and the asks (`asks.ask_variables`),
    and whether it leaves the pod unchanged for want of one (`whenNoProfileFits: ignore`,
    where `ignores_unfitting`)."""
    unfitting = "false"
    if ignores_unfitting:
        # decision._choose: readable asks within the GPU count, no pin outside the classes,
        # and no class that holds them, pinned or not
        unfitting = (
            "variables.ignoreUnfitting && variables.wellFormed.all(ok, ok)"
            " && variables.annotationValid\n&& variables.neededGPUs <= variables.maxGPUs"
            " && (variables.pinsNone || variables.admitted.exists(a, a))"
            " && !variables.fits.exists(f, f)"
        )
    selector_matches = (
        "variables.classSelectors[c].all(k, k in variables.selector"
        " && variables.selector[k] == variables.classSelectors[c][k])"
    )
    return [
        {
            # the class named by lwgpu.io/profile whose selector is still written: -1 for none
            "name": "own",
            "expression": f"(({PROFILE} in variables.annotations ? variables.classNames"
            f".transformList(c, n, variables.annotations[{PROFILE}] == n\n  && {selector_matches},"
            " c) : []) + [-1])[0]",
        },
        {
            # its selector keys, taken out of the pins of a pod that asks memory
            "name": "ownKeys",
            "expression": "variables.own >= 0 && variables.memoryAsked.exists(a, a)"
            " ? variables.classSelectors[variables.own].map(k, k) : []",
        },
        {
            # the ways onto a node: each required term with the nodeSelector, or the
            # nodeSelector alone
            "name": "ways",
            "expression": "size(variables.terms) > 0 ? variables.terms : [{}]",
        },
        {
            # some way pins no class label key: the pod pins no class
            "name": "pinsNone",
            "expression": "variables.ways.exists(t,"
            f" !variables.classKeys.exists(k, {_constrains('t', 'k')}))",
        },
        {
            # per class, whether some way admits it
            "name": "admitted",
            "expression": "variables.classLabels.map(l, variables.ways.exists(t,\n"
            f"  {_class_admitted('t')}))",
        },
        {
            # the smallest admitted class that holds every ask: -1 for none
            "name": "choice",
            "expression": "(variables.fits.transformList(c, f,"
            " f && (variables.pinsNone || variables.admitted[c]), c) + [-1])[0]",
        },
        {"name": "unfitting", "expression": unfitting},
    ]
