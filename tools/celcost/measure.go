// What one evaluation costs: the policy as the apiserver evaluates it, then each expression
// alone, its variables' costs told apart by a recording composition context.

package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	regv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/lazy"
)

// on evaluates the policy on one pod: as the apiserver does, then each expression alone.
func (c compiled) on(label string, pod *corev1.Pod) PodResult {
	in := input{pod}
	fresh := func() context.Context { return c.compiler.CreateContext(context.Background()) }
	result := PodResult{Pod: label, Matched: true}
	results, left := run(fresh(), c.match, in, celconfig.RuntimeCELCostBudgetMatchConditions)
	result.MatchConditions = celconfig.RuntimeCELCostBudgetMatchConditions - left
	for _, r := range results {
		result.Matched = result.Matched && r.Error == nil && r.EvalResult == types.True
	}
	if len(c.validations) > 0 {
		checks, left := run(fresh(), c.checks, in, celconfig.RuntimeCELCostBudget)
		messages, left := run(fresh(), c.messages, in, left)
		result.Evaluation = celconfig.RuntimeCELCostBudget - left
		result.Outcome = denials(c.validations, checks, messages)
	}
	ctx := fresh() // one context for the whole invocation, as dispatcher.go's dispatchInvocations
	for _, m := range c.mutations {
		results, left := run(ctx, m, in, celconfig.RuntimeCELCostBudget)
		result.Evaluation += celconfig.RuntimeCELCostBudget - left
		if lister, ok := results[0].EvalResult.(traits.Lister); ok {
			result.Outcome = fmt.Sprintf("%v patch operations", lister.Size())
		}
	}
	for _, p := range c.probes {
		rec := &recorder{inner: c.compiler.CreateContext(context.Background()), own: map[string]int64{}}
		rec.Context = rec.inner
		results, left := run(rec, p.run, in, celconfig.RuntimeCELCostBudget)
		spent := celconfig.RuntimeCELCostBudget - left
		e := Expression{Part: p.part, Name: p.name, Own: spent - rec.total, WithReads: spent}
		if p.part == "variable" {
			e.Own, e.WithReads = rec.own[p.name], rec.total
		}
		if results[0].Error != nil {
			e.Error = results[0].Error.Error()
		}
		result.Expressions = append(result.Expressions, e)
	}
	return result
}

func run(ctx context.Context, ev evaluate, in input, budget int64) ([]plugincel.EvaluationResult, int64) {
	results, left, err := ev(ctx, in, budget)
	if err != nil {
		fail("evaluation: %v", err)
	}
	return results, left
}

// denials are the messages of the validations that failed, chosen as validator.go's Validate
// chooses them: the messageExpression's string, else the message.
func denials(validations []regv1.Validation, checks, messages []plugincel.EvaluationResult) string {
	var denied []string
	for i, check := range checks {
		if check.Error != nil {
			denied = append(denied, "error: "+check.Error.Error())
		} else if check.EvalResult != types.True {
			message := validations[i].Message
			if m := messages[i]; m.Error == nil && m.EvalResult != nil {
				if s, ok := m.EvalResult.Value().(string); ok && strings.TrimSpace(s) != "" {
					message = strings.TrimSpace(s)
				}
			}
			denied = append(denied, message)
		}
	}
	if len(denied) == 0 {
		return "admitted"
	}
	return "denied: " + strings.Join(denied, " | ")
}

// recorder is a composition context that charges each variable with its own cost: the cost
// its callback reports, first flushing what was reported before it (an enclosing variable
// reports only once it is done). Evaluate takes the total through GetAndResetCost.
type recorder struct {
	context.Context
	inner plugincel.CompositionContext
	own   map[string]int64
	total int64
}

func (r *recorder) Variables(activation any) ref.Val {
	return &recordingMap{MapValue: r.inner.Variables(activation).(*lazy.MapValue), r: r}
}

func (r *recorder) GetAndResetCost() int64 {
	r.flush()
	return r.total // not reset: one probe is one Evaluate
}

func (r *recorder) flush() int64 {
	cost := r.inner.GetAndResetCost()
	r.total += cost
	return cost
}

type recordingMap struct {
	*lazy.MapValue
	r *recorder
}

func (m *recordingMap) Find(key ref.Val) (ref.Val, bool) {
	m.r.flush()
	v, found := m.MapValue.Find(key)
	cost := m.r.flush()
	if name, ok := key.(types.String); ok {
		if _, seen := m.r.own[string(name)]; !seen {
			m.r.own[string(name)] = cost
		}
	}
	return v, found
}

func (m *recordingMap) Get(key ref.Val) ref.Val {
	if v, found := m.Find(key); found {
		return v
	}
	return m.MapValue.Get(key)
}
