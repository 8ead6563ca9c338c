package engine

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"anechat/internal/testres"
)

// TestEngineImportsNoBackend keeps DESIGN.md's seams: engine and its generic
// packages (everything under engine/ but the backends themselves) import no
// backend, neither directly nor through another package, so a second
// backend reuses them instead of copying them; and no engine package
// imports the app, storage, the server, the CLI or Wails (data flows one
// way). Backends register with engine/load through internal/backends.
// Within the backends too dependencies go one way: the CPU backend knows
// nothing of Core ML, and the Core ML backend's packages that run bundles
// on it (refrun, published) build on engine/coreml, never the reverse.
func TestEngineImportsNoBackend(t *testing.T) {
	root := testres.RepoRoot(t)
	backends := []string{"anechat/engine/cpu", "anechat/engine/coreml"}
	// above maps a package (and those under it, but the ones it lists) to
	// the packages it must not depend on.
	above := map[string][]string{
		"anechat/engine/cpu":    {"anechat/engine/coreml"},
		"anechat/engine/coreml": {"anechat/engine/coreml/refrun", "anechat/engine/coreml/published"},
	}
	forbiddenAnywhere := []string{"anechat/app", "anechat/storage", "anechat/server", "anechat/cli",
		"anechat/kvindex", "anechat/internal/kvindex", "github.com/wailsapp/"}
	isUnder := func(p string, prefixes []string) bool {
		for _, x := range prefixes {
			if p == x || strings.HasPrefix(p, strings.TrimSuffix(x, "/")+"/") {
				return true
			}
		}
		return false
	}

	// imports lists the non-test imports of the package in dir, from
	// every file whatever its build tags (darwin's Core ML calls too).
	imports := func(dir string) []string {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		var out []string
		fset := token.NewFileSet()
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			ast, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range ast.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				out = append(out, p)
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	// deps is the transitive closure of a package's anechat imports and
	// its direct third-party imports.
	memo := map[string][]string{}
	var deps func(pkg string, seen map[string]bool) []string
	deps = func(pkg string, seen map[string]bool) []string {
		if d, ok := memo[pkg]; ok {
			return d
		}
		if seen[pkg] {
			return nil
		}
		seen[pkg] = true
		var out []string
		for _, imp := range imports(filepath.Join(root, strings.TrimPrefix(pkg, "anechat"))) {
			out = append(out, imp)
			if strings.HasPrefix(imp, "anechat/") {
				out = append(out, deps(imp, seen)...)
			}
		}
		slices.Sort(out)
		memo[pkg] = slices.Compact(out)
		return memo[pkg]
	}

	checked := 0
	filepath.WalkDir(filepath.Join(root, "engine"), func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if d.Name() == "testdata" || d.Name() == "convert" {
			return filepath.SkipDir // fixtures; the Python converter
		}
		rel, _ := filepath.Rel(root, p)
		pkg := "anechat/" + filepath.ToSlash(rel)
		if !hasGo(p) {
			return nil
		}
		checked++
		backend := isUnder(pkg, backends)
		for _, dep := range deps(pkg, map[string]bool{}) {
			switch {
			case isUnder(dep, forbiddenAnywhere):
				t.Errorf("%s depends on %s: the engine knows nothing of the app, storage, the server or Wails", pkg, dep)
			case !backend && isUnder(dep, backends):
				t.Errorf("%s depends on the backend %s: only internal/backends (and tests) may import a backend", pkg, dep)
			case !backend && dep == "anechat/internal/backends":
				t.Errorf("%s depends on internal/backends, which imports every backend", pkg)
			}
			for low, high := range above {
				if isUnder(pkg, []string{low}) && !isUnder(pkg, high) && isUnder(dep, high) {
					t.Errorf("%s depends on %s: between the backends dependencies go one way (the CPU backend knows nothing of Core ML; refrun and published build on engine/coreml)", pkg, dep)
				}
			}
		}
		return nil
	})
	if checked < 10 {
		t.Fatalf("checked only %d engine packages", checked)
	}
}

func hasGo(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	return len(m) > 0
}
