package storage

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestGeneratedCodeIsCurrent fails when sqlc.yaml, a migration or a query
// changed after storage/db was last generated: run
// build/scripts/sqlc-generate.sh. (The script records the inputs' hashes;
// this test needs no sqlc.)
func TestGeneratedCodeIsCurrent(t *testing.T) {
	root := ".."
	stamp, err := os.ReadFile(filepath.Join("db", "inputs.sha256"))
	if err != nil {
		t.Fatalf("%v: run build/scripts/sqlc-generate.sh", err)
	}
	recorded := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(stamp)), "\n") {
		sum, path, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("db/inputs.sha256: bad line %q", line)
		}
		recorded[path] = sum
	}
	var inputs []string
	for _, pat := range []string{"sqlc.yaml", "storage/migrations/*.sql", "storage/queries/*.sql", "storage/sqlcschema/*.sql"} {
		m, err := filepath.Glob(filepath.Join(root, pat))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			rel, _ := filepath.Rel(root, f)
			inputs = append(inputs, filepath.ToSlash(rel))
		}
	}
	var stale []string
	for _, in := range inputs {
		b, err := os.ReadFile(filepath.Join(root, in))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if recorded[in] != hex.EncodeToString(sum[:]) {
			stale = append(stale, in)
		}
		delete(recorded, in)
	}
	for gone := range recorded {
		stale = append(stale, gone+" (removed)")
	}
	slices.Sort(stale)
	if len(stale) > 0 {
		t.Errorf("storage/db was generated from other inputs; changed: %v: run build/scripts/sqlc-generate.sh and commit storage/db", stale)
	}
}
