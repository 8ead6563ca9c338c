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
// storage/db import neither engine nor app. Tests may import the test
// helpers under internal/; the code may import a leaf package under
// internal/ (one importing nothing of the project, as internal/atomicfile,
// whose temporary names Reconcile recognises).
func TestNoEngineOrAppImports(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	more, _ := filepath.Glob("db/*.go")
	files = append(files, more...)
	if len(files) < 5 {
		t.Fatalf("found only %d Go files", len(files))
	}
	for _, f := range files {
		for _, p := range fileImports(t, f) {
			internal := strings.HasPrefix(p, "anechat/internal/")
			// Tests may use the shared test helpers (internal/fsfault).
			helper := strings.HasSuffix(f, "_test.go") && internal
			if strings.HasPrefix(p, "anechat/") && !strings.HasPrefix(p, "anechat/storage") && !helper && !(internal && leaf(t, p)) {
				t.Errorf("%s imports %s: storage must not depend on engine or app", f, p)
			}
		}
	}
}

// fileImports returns the import paths of the Go file f.
func fileImports(t *testing.T, f string) []string {
	t.Helper()
	ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, imp := range ast.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		out = append(out, p)
	}
	return out
}

// leaf reports whether the project package pkg (anechat/...) imports no
// project package outside its tests.
func leaf(t *testing.T, pkg string) bool {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("..", strings.TrimPrefix(pkg, "anechat/"), "*.go"))
	if len(files) == 0 {
		t.Fatalf("no Go files for %s", pkg)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		for _, p := range fileImports(t, f) {
			if strings.HasPrefix(p, "anechat/") {
				return false
			}
		}
	}
	return true
}
