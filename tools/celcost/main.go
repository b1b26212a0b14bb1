// Command celcost measures the CEL cost of lwgpu's compiled admission policies (`lwgpu policy
// compile`: the MutatingAdmissionPolicy rewrite and the ValidatingAdmissionPolicy final-state
// check) on pods, with the code kube-apiserver v1.37.2 runs: k8s.io/apiserver's admission CEL
// compiler, its variable composition and its cost tracking. tools/cel_cost.py builds and runs
// it and prints the tables.
//
// Usage: celcost POLICIES.json LABEL=POD.json... > report.json
//
// POLICIES.json is `lwgpu policy compile -o json` (a List; bindings are skipped). Each pod is
// decoded into a v1 Pod and defaulted as the apiserver does before admission (requests copied
// from limits, quantities in canonical form).
//
// What the apiserver limits, and so what is reported (k8s.io/apiserver/pkg/apis/cel/config.go):
//   - PerCallLimit, per program evaluation: every variable, condition, message and mutation is a
//     program of its own (pkg/cel/environment/base.go, baseOpts: cel.CostLimit), so its own cost
//     is what counts, not that of the variables it reads (they are evaluated lazily, each in its
//     own program: pkg/admission/plugin/cel/composition.go, (*variableAccessor).Callback).
//   - RuntimeCELCostBudget, per evaluation of a policy: the validations and then every
//     messageExpression share it, each variable charged to the first expression that reads it
//     (pkg/admission/plugin/policy/validating/validator.go, (*validator).Validate;
//     pkg/admission/plugin/cel/activation.go, (*evaluationActivation).Evaluate); each mutation
//     has one of its own (pkg/admission/plugin/policy/mutating/dispatcher.go, dispatchOne).
//   - RuntimeCELCostBudgetMatchConditions, for the matchConditions
//     (pkg/admission/plugin/webhook/matchconditions/matcher.go, (*matcher).Match).
//
// No static cost estimate is reported: the apiserver computes none for admission policies.
// Their create-time validation compiles each expression and checks its type only
// (k8s.io/kubernetes pkg/apis/admissionregistration/validation/validation.go,
// validateCELCondition); cel.Env.EstimateCost runs only for CustomResourceDefinition rules
// (k8s.io/apiextensions-apiserver pkg/apiserver/schema/cel/compilation.go) and
// DeviceClass/ResourceClaim selectors (k8s.io/dynamic-resource-allocation cel/compile.go).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	regv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	corev1defaults "k8s.io/kubernetes/pkg/apis/core/v1"
)

// Report is what celcost prints: the limits and, per policy and pod, the costs.
type Report struct {
	PerCallLimit                        int64    `json:"perCallLimit"`
	RuntimeCELCostBudget                int64    `json:"runtimeCELCostBudget"`
	RuntimeCELCostBudgetMatchConditions int64    `json:"runtimeCELCostBudgetMatchConditions"`
	Policies                            []Policy `json:"policies"`
}

// Policy holds one policy's results, one per pod.
type Policy struct {
	Kind string      `json:"kind"`
	Name string      `json:"name"`
	Pods []PodResult `json:"pods"`
}

// PodResult is one evaluation of a policy on one pod, as the apiserver runs it, and every
// expression's part of it.
type PodResult struct {
	Pod             string       `json:"pod"`
	Matched         bool         `json:"matched"`
	MatchConditions int64        `json:"matchConditions"`
	Evaluation      int64        `json:"evaluation"`
	Outcome         string       `json:"outcome"`
	Expressions     []Expression `json:"expressions"`
}

// Expression is one program's own cost (what PerCallLimit bounds) and its cost with every
// variable it reads, evaluated alone on a fresh activation.
type Expression struct {
	Part      string `json:"part"`
	Name      string `json:"name"`
	Own       int64  `json:"own"`
	WithReads int64  `json:"withReads"`
	Error     string `json:"error,omitempty"`
}

// spec is what both kinds of policy hold that is measured here.
type spec struct {
	kind, name      string
	variables       []regv1.Variable
	matchConditions []regv1.MatchCondition
	validations     []regv1.Validation
	mutations       []regv1.Mutation
}

func readSpecs(path string) []spec {
	var list struct{ Items []json.RawMessage }
	decode(path, &list)
	var specs []spec
	for _, raw := range list.Items {
		var head metav1.TypeMeta
		must(json.Unmarshal(raw, &head))
		switch head.Kind {
		case "ValidatingAdmissionPolicy":
			var p regv1.ValidatingAdmissionPolicy
			must(json.Unmarshal(raw, &p))
			if p.Spec.ParamKind != nil || len(p.Spec.AuditAnnotations) > 0 {
				fail("%s: params and auditAnnotations are not measured", p.Name)
			}
			specs = append(specs, spec{head.Kind, p.Name, p.Spec.Variables, p.Spec.MatchConditions, p.Spec.Validations, nil})
		case "MutatingAdmissionPolicy":
			var p regv1.MutatingAdmissionPolicy
			must(json.Unmarshal(raw, &p))
			if p.Spec.ParamKind != nil {
				fail("%s: params are not measured", p.Name)
			}
			specs = append(specs, spec{head.Kind, p.Name, p.Spec.Variables, p.Spec.MatchConditions, nil, p.Spec.Mutations})
		}
	}
	return specs
}

func decode(path string, into any) {
	data, err := os.ReadFile(path)
	must(err)
	must(json.Unmarshal(data, into))
}

func must(err error) {
	if err != nil {
		fail("%v", err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "celcost: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) < 3 {
		fail("usage: celcost POLICIES.json LABEL=POD.json...")
	}
	report := Report{celconfig.PerCallLimit, celconfig.RuntimeCELCostBudget, celconfig.RuntimeCELCostBudgetMatchConditions, nil}
	for _, s := range readSpecs(os.Args[1]) {
		c := compile(s)
		policy := Policy{Kind: s.kind, Name: s.name}
		for _, arg := range os.Args[2:] {
			label, path, ok := strings.Cut(arg, "=")
			if !ok {
				fail("%q: want LABEL=POD.json", arg)
			}
			pod := &corev1.Pod{}
			decode(path, pod)
			if pod.Namespace == "" {
				pod.Namespace = "default"
			}
			corev1defaults.SetObjectDefaults_Pod(pod) // the apiserver defaults on decoding
			policy.Pods = append(policy.Pods, c.on(label, pod))
		}
		report.Policies = append(report.Policies, policy)
	}
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", "  ")
	must(out.Encode(report))
}
