package mlprogram

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"anechat/internal/testres"
)

// testData returns build/testdeps/coreml/NAME, which
// build/scripts/deps-coremlhost.sh makes with engine/coreml/testdata/gen.py
// (skipped without it unless CI, which make test sets: then it fails).
func testData(tb testing.TB, name string) string {
	tb.Helper()
	p := filepath.Join(testDataDir(tb), name)
	return testres.Require(tb, p, "Core ML test packages ("+name+")", "run build/scripts/deps-coreml.sh, then build/scripts/deps-coremlhost.sh (make test runs both)")
}

// testDataDir is build/testdeps/coreml, whether or not it exists (fuzz
// seeds are optional).
func testDataDir(tb testing.TB) string {
	return filepath.Join(testres.RepoRoot(tb), "build", "testdeps", "coreml")
}

// expected is audit-expected.json: what coremltools reads of each test
// package (gen.py, audit_expected).
type expected struct {
	Packages map[string]map[string]struct {
		Ops         int   `json:"ops"`
		Constants   int   `json:"constants"`
		WeightBytes int64 `json:"weight_bytes"`
	} `json:"packages"`
}

func readExpected(tb testing.TB) expected {
	tb.Helper()
	raw, err := os.ReadFile(testData(tb, "audit-expected.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var e expected
	if err := json.Unmarshal(raw, &e); err != nil {
		tb.Fatal(err)
	}
	if len(e.Packages) == 0 {
		tb.Fatal("audit-expected.json lists no package")
	}
	return e
}

// copyTree copies the directory src into a temporary directory (the copy
// may be damaged at will) and returns the copy's path.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}
