// How the policies are compiled and evaluated: with k8s.io/apiserver's admission CEL code, the
// calls kube-apiserver makes (see main.go for the limits).

package main

import (
	"context"
	"fmt"

	"github.com/google/cel-go/cel"
	admissionv1 "k8s.io/api/admission/v1"
	regv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
)

// measured is the result type of an expression only measured here: any type is accepted.
type measured string

func (m measured) GetExpression() string    { return string(m) }
func (m measured) ReturnTypes() []*cel.Type { return []*cel.Type{cel.AnyType} }

// evaluate runs one compiled expression (or list of them) and returns the budget left.
type evaluate func(ctx context.Context, in input, budget int64) ([]plugincel.EvaluationResult, int64, error)

// input is the request the policy is evaluated on; attributes are made fresh for each
// evaluation, because evaluating them caches the object's CEL value and its representation.
type input struct {
	pod *corev1.Pod
}

func (in input) attributes() (*admission.VersionedAttributes, *admissionv1.AdmissionRequest) {
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	gvr := corev1.SchemeGroupVersion.WithResource("pods")
	attrs := admission.NewAttributesRecord(in.pod.DeepCopy(), nil, gvk, in.pod.Namespace,
		in.pod.Name, gvr, "", admission.Create, &metav1.CreateOptions{}, false,
		&user.DefaultInfo{Name: "lwgpu-cel-cost"})
	versioned := &admission.VersionedAttributes{Attributes: attrs, VersionedKind: gvk}
	versioned.VersionedObject.Set(attrs.GetObject())
	request := plugincel.CreateAdmissionRequest(attrs, metav1.GroupVersionResource(gvr), metav1.GroupVersionKind(gvk))
	return versioned, request
}

// condition evaluates a condition the way its composited evaluator does, but in ctx: a
// recorder, or the fresh composition context the apiserver makes for each ForInput.
func condition(c plugincel.ConditionEvaluator, optional plugincel.OptionalVariableBindings) evaluate {
	inner := c.(*plugincel.CompositedConditionEvaluator).ConditionEvaluator
	return func(ctx context.Context, in input, budget int64) ([]plugincel.EvaluationResult, int64, error) {
		attrs, request := in.attributes()
		return inner.ForInput(ctx, attrs, request, optional, nil, budget)
	}
}

// mutation evaluates a mutation's expression as patch/json_patch.go's
// (*jsonPatcher).evaluatePatchExpression does.
func mutation(m plugincel.MutatingEvaluator, optional plugincel.OptionalVariableBindings) evaluate {
	return func(ctx context.Context, in input, budget int64) ([]plugincel.EvaluationResult, int64, error) {
		attrs, request := in.attributes()
		result, left, err := m.ForInput(ctx, attrs, request, optional, nil, budget)
		return []plugincel.EvaluationResult{result}, left, err
	}
}

// probe is one expression measured alone.
type probe struct {
	part, name string
	run        evaluate
}

// compiled is a policy compiled as the apiserver compiles it: validating/plugin.go's and
// mutating/compilation.go's compilePolicy, whose calls are repeated here (both unexported).
type compiled struct {
	spec
	compiler                *plugincel.CompositedCompiler
	match, checks, messages evaluate
	mutations               []evaluate
	probes                  []probe
}

func compile(s spec) compiled {
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		fail("CEL compiler: %v", err)
	}
	decls := plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
	noAuthz := plugincel.OptionalVariableDeclarations{}
	patchDecls := plugincel.OptionalVariableDeclarations{HasAuthorizer: true, HasPatchTypes: true}
	stored := environment.StoredExpressions
	named := make([]plugincel.NamedExpressionAccessor, len(s.variables))
	for i, v := range s.variables {
		named[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	compiler.CompileAndStoreVariables(named, decls, stored)
	c := compiled{spec: s, compiler: compiler}
	cond := func(accessors []plugincel.ExpressionAccessor, d plugincel.OptionalVariableDeclarations) evaluate {
		return condition(compiler.CompileCondition(accessors, d, stored), plugincel.OptionalVariableBindings{})
	}
	add := func(part, name string, accessor plugincel.ExpressionAccessor, d plugincel.OptionalVariableDeclarations) {
		c.probes = append(c.probes, probe{part, name, cond([]plugincel.ExpressionAccessor{accessor}, d)})
	}
	for _, v := range s.variables {
		if s.kind == "MutatingAdmissionPolicy" { // read as the mutation reads them
			ev := compiler.CompileMutatingEvaluator(measured("variables."+v.Name), decls, stored)
			c.probes = append(c.probes, probe{"variable", v.Name, mutation(ev, plugincel.OptionalVariableBindings{})})
		} else {
			add("variable", v.Name, measured("variables."+v.Name), decls)
		}
	}
	var matches []plugincel.ExpressionAccessor
	for i := range s.matchConditions {
		accessor := (*matchconditions.MatchCondition)(&s.matchConditions[i])
		matches = append(matches, accessor)
		add("matchCondition", accessor.Name, accessor, decls)
	}
	c.match = cond(matches, decls)
	var checks, messages []plugincel.ExpressionAccessor
	for i, v := range s.validations {
		check := &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		checks = append(checks, check)
		add("validation", fmt.Sprint(i), check, decls)
		var message plugincel.ExpressionAccessor // a nil entry keeps the indexes aligned, as in the apiserver
		if v.MessageExpression != "" {
			message = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
			add("messageExpression", fmt.Sprint(i), message, noAuthz)
		}
		messages = append(messages, message)
	}
	c.checks, c.messages = cond(checks, decls), cond(messages, noAuthz)
	for i, m := range s.mutations {
		if m.PatchType != regv1.PatchTypeJSONPatch || m.JSONPatch == nil {
			fail("%s: mutation %d: only JSONPatch mutations are measured", s.name, i)
		}
		ev := compiler.CompileMutatingEvaluator(&patch.JSONPatchCondition{Expression: m.JSONPatch.Expression}, patchDecls, stored)
		c.mutations = append(c.mutations, mutation(ev, plugincel.OptionalVariableBindings{}))
		c.probes = append(c.probes, probe{"mutation", fmt.Sprint(i), c.mutations[i]})
	}
	return c
}
