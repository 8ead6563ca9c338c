package storage

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoEngineOrAppImports keeps DESIGN.md's one-way data flow: storage and
// storage/db import neither engine nor app (tests may import the test
// helpers under internal/).
func TestNoEngineOrAppImports(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	more, _ := filepath.Glob("db/*.go")
	files = append(files, more...)
	if len(files) < 5 {
		t.Fatalf("found only %d Go files", len(files))
	}
	fset := token.NewFileSet()
	for _, f := range files {
		ast, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			// Tests may use the shared test helpers (internal/fsfault).
			helper := strings.HasSuffix(f, "_test.go") && strings.HasPrefix(p, "anechat/internal/")
			if strings.HasPrefix(p, "anechat/") && !strings.HasPrefix(p, "anechat/storage") && !helper {
				t.Errorf("%s imports %s: storage must not depend on engine or app", f, p)
			}
		}
	}
}
