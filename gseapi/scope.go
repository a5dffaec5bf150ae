package gseapi

import (
	"fmt"
	"slices"
	"strings"

	"github.com/drover-sh/drover/proc"
)

// Grant is what the HTTP edge established about a call: who made it and
// which namespaces the app may touch.
type Grant struct {
	Caller Caller
	App    string
	// Namespaces the app may touch; empty means every namespace.
	Namespaces []string
}

// namespaceUse is one namespace a request touches, with the field that
// carries it, so a refusal names what to fix.
type namespaceUse struct {
	Field     string
	Namespace string
}

// check refuses the first use outside the grant. A nil grant (the CLI, run
// by an operator) and a grant without namespaces allow everything.
func (g *Grant) check(uses []namespaceUse) error {
	if g == nil || len(g.Namespaces) == 0 {
		return nil
	}
	for _, u := range uses {
		if !slices.Contains(g.Namespaces, u.Namespace) {
			return fieldErr(u.Field, "namespace %q is not allowed for app %q (allowed: %s)",
				u.Namespace, g.App, strings.Join(g.Namespaces, ", "))
		}
	}
	return nil
}

// checkResults refuses results that name a namespace outside the grant, so
// an app cannot read another app's task by its id.
func (g *Grant) checkResults(field string, results []proc.KeyedResult) error {
	if g == nil || len(g.Namespaces) == 0 {
		return nil
	}
	uses := make([]namespaceUse, 0, len(results))
	for _, r := range results {
		uses = append(uses, namespaceUse{Field: field, Namespace: proc.KeyProcess(r.Key).Namespace})
	}
	slices.SortFunc(uses, func(a, b namespaceUse) int { return strings.Compare(a.Namespace, b.Namespace) })
	return g.check(uses)
}

// admit checks the namespaces t names against g, as check does, and gives
// t the caller g holds, if any: the one the edge authenticated replaces the
// body's.
func (g *Grant) admit(t *Task) error {
	if err := g.check(t.uses); err != nil {
		return err
	}
	if g != nil {
		t.Caller = g.Caller
	}
	return nil
}

// forbidden answers a call refused by its grant.
func forbidden(err error) (Response, Outcome) {
	return Failure(CodeForbidden, err), OutcomeForbidden
}

// metaNamespace is the use of a request whose namespace is meta.namespace.
func metaNamespace(ns string) []namespaceUse {
	return []namespaceUse{{Field: "meta.namespace", Namespace: ns}}
}

// String names a grant without the secret, for logs.
func (g Grant) String() string {
	return fmt.Sprintf("app=%s namespaces=%v", g.App, g.Namespaces)
}
