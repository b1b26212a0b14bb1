"""Webhook matchConditions as kube-apiserver evaluates them; a test double of its CEL, for tests.

kube-apiserver runs cel-go; this is cel-python with cel-go's `has()`, over objects as the
apiserver's CEL sees them (`as_apiserver_sees`, `bindings`), with the apiserver's verdict on a
webhook's conditions (`match_conditions`). Where cel-python is more lenient, an expression that
would error in the cluster (making the apiserver apply the webhook's failurePolicy) would pass
here; this module closes the gap that matters for guarded field access: `has(e.f)` as cel-go
evaluates it (interpreter/attributes.go, `refQualify` with a presence test); tests/fakes/test_cel.py
checks it, and the verdict, against cel-go and kube-apiserver. It relies on cel-python 0.5's
evaluator hooks (`Evaluator.macro_has_eval`, `Evaluator.sub_evaluator`), pinned in
requirements-dev.txt.
"""

from __future__ import annotations

import functools

import celpy
import lark


def as_apiserver_sees(value):
    """The object as CEL sees it in kube-apiserver: nulls dropped, a null list item empty."""
    if isinstance(value, dict):
        return {k: as_apiserver_sees(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [{} if v is None else as_apiserver_sees(v) for v in value]
    return value


class CelGoHas(celpy.evaluation.Evaluator):
    """cel-python's evaluator with cel-go's has(): has(e.f) is an error when e is one (e.g. a
    missing field), or when e is a list (cel-go's `refQualify` takes "f" as a list index and
    fails), where cel-python answers false. On null or a scalar cel-go, like cel-python, answers
    false. kube-apiserver runs cel-go, so an unguarded has(a.b.c) must fail here as it would
    there."""

    def sub_evaluator(self, ast: lark.Tree) -> celpy.evaluation.Evaluator:
        """Macro bodies (exists, all, ...) use the same has()."""
        return CelGoHas(ast, activation=self.activation)

    def macro_has_eval(self, exprlist: lark.Tree):
        """Evaluate e of has(e.f) first, and answer its error, or an error if it is a list."""
        node = exprlist
        while isinstance(node, lark.Tree) and node.data != "member_dot":
            node = node.children[0]
        if isinstance(node, lark.Tree):
            operand = self.visit(node.children[0])
            if isinstance(operand, celpy.evaluation.CELEvalError):
                return operand
            if isinstance(operand, celpy.celtypes.ListType):
                return celpy.evaluation.CELEvalError(
                    "unsupported index type 'string' in list", TypeError, None, tree=node
                )
        return super().macro_has_eval(exprlist)


class CelGoRunner(celpy.InterpretedRunner):
    """Runs programs with CelGoHas."""

    def evaluate(self, context):
        """The value of the program; raises CELEvalError where cel-go gives an error."""
        return CelGoHas(ast=self.ast, activation=self.new_activation()).evaluate(context)


ENVIRONMENT = celpy.Environment(runner_class=CelGoRunner)


@functools.cache
def program(expression: str):
    """A compiled CEL program, once per expression."""
    return ENVIRONMENT.program(ENVIRONMENT.compile(expression))


def bindings(obj: dict, old: dict | None, request: dict) -> dict:
    """The variables kube-apiserver binds for matchConditions: `object`, `oldObject` (null on
    CREATE) and `request`, the AdmissionRequest (its object and oldObject left out)."""
    bound = {k: v for k, v in request.items() if k not in ("object", "oldObject")}
    return {
        "object": celpy.json_to_cel(as_apiserver_sees(obj)),
        "oldObject": celpy.json_to_cel(old and as_apiserver_sees(old)),
        "request": celpy.json_to_cel(bound),
    }


def match_conditions(conditions: list[dict], activation: dict) -> str | None:
    """ "skip" if a condition is false; else an error text if one did not give a bool (the
    apiserver then applies failurePolicy); else None: the webhook is called."""
    errors = []
    for condition in conditions:
        try:
            verdict = program(condition["expression"]).evaluate(activation)
        except celpy.CELEvalError as exc:
            verdict = exc
        if not isinstance(verdict, celpy.celtypes.BoolType):
            errors.append(f"matchCondition {condition['name']!r}: {verdict!r}")
        elif not verdict:
            return "skip"
    return "; ".join(errors) or None
