package dispatch

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/drover-sh/drover/activities"
)

// TestEveryActivityNameIsRegistered: every activity name workflows
// schedule (the *Activity constants of workflows/protocol.go) is a method
// of a struct Register puts on the worker, and a worker registers a
// struct's methods under their own names. Histories record the names, so
// a renamed method would strand every history that scheduled it.
func TestEveryActivityNameIsRegistered(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../../workflows/protocol.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		if v, ok := n.(*ast.ValueSpec); ok {
			for i, id := range v.Names {
				if lit, ok := v.Values[i].(*ast.BasicLit); ok && strings.HasSuffix(id.Name, "Activity") {
					name, _ := strconv.Unquote(lit.Value)
					names = append(names, name)
				}
			}
		}
		return true
	})
	if len(names) < 12 {
		t.Fatalf("found %d activity names in protocol.go: %v", len(names), names)
	}
	owners := []reflect.Type{reflect.TypeFor[*activities.Activities](), reflect.TypeFor[*Dispatcher]()}
	for _, name := range names {
		found := 0
		for _, typ := range owners {
			if _, ok := typ.MethodByName(name); ok {
				found++
			}
		}
		if found != 1 {
			t.Errorf("activity %q is a method of %d of the registered structs, want 1", name, found)
		}
	}
}
