package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLedger: every workflow.GetVersion id the workflows use is in the
// ledger, once, and every ledger entry is used. The upgrade probe, built
// only into a test build, keeps its own id.
func TestLedger(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	consts := map[string]string{}
	var ids []ast.Expr
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || strings.HasPrefix(name, "upgrade_probe") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if i < len(n.Values) {
						if lit, ok := n.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							consts[id.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			case *ast.CallExpr:
				// workflow.GetVersion(ctx, id, ...) and host.has(ctx, id).
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "GetVersion" || sel.Sel.Name == "has") && len(n.Args) > 1 {
					if id, ok := n.Args[1].(*ast.Ident); ok && id.Name == "id" {
						return true // has itself
					}
					ids = append(ids, n.Args[1])
				}
			}
			return true
		})
	}
	inLedger := map[string]int{}
	for _, c := range Ledger {
		inLedger[c.ID]++
		if c.Workflow == "" || c.What == "" || c.Old == "" {
			t.Errorf("ledger entry %s: workflow, what and old branch must all be said", c.ID)
		}
	}
	used := map[string]bool{}
	for _, e := range ids {
		var id string
		switch e := e.(type) {
		case *ast.Ident:
			id = consts[e.Name]
		case *ast.BasicLit:
			id, _ = strconv.Unquote(e.Value)
		}
		if id == "" {
			t.Errorf("%s: a GetVersion id that is not a string constant", fset.Position(e.Pos()))
			continue
		}
		used[id] = true
		if inLedger[id] != 1 {
			t.Errorf("%s: change id %q is in the ledger %d times, want once", fset.Position(e.Pos()), id, inLedger[id])
		}
	}
	for id := range inLedger {
		if !used[id] {
			t.Errorf("ledger entry %q is not used by any GetVersion", id)
		}
	}
}

// TestLedgerSaysWhereOldBranchesLive: each ledger entry's Old names files
// that exist, each with the function that holds the old branch, so the
// ledger leads to the code a retirement deletes.
func TestLedgerSaysWhereOldBranchesLive(t *testing.T) {
	for _, c := range Ledger {
		if strings.HasPrefix(c.Old, "gone") {
			continue
		}
		for _, where := range strings.Split(c.Old, ", ") {
			file, fn, ok := strings.Cut(where, " ")
			if !ok {
				t.Errorf("ledger entry %s: %q names no function", c.ID, where)
				continue
			}
			path := file
			if strings.Contains(file, "/") {
				path = filepath.Join("..", file) // from the repository's root
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				t.Errorf("ledger entry %s: %v", c.ID, err)
				continue
			}
			found := false
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == fn {
					found = true
				}
			}
			if !found {
				t.Errorf("ledger entry %s: %s declares no function %s", c.ID, file, fn)
			}
		}
	}
}
