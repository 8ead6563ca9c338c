package coreml

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"anechat/engine/coreml/mlprogram"
)

// TestAuditFixtureBundles is make test's audit of the converter's output:
// every test bundle (gen.py; gemma4-lut4 is the converter's default
// conversion) passes every rule of the audit with the
// default limits, and its packages read with the op counts and weight
// bytes coremltools reads (audit-expected.json). A rule the converter's
// graphs break fails here.
func TestAuditFixtureBundles(t *testing.T) {
	raw, err := os.ReadFile(testData(t, "audit-expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp struct {
		Packages map[string]map[string]struct {
			Ops         int   `json:"ops"`
			WeightBytes int64 `json:"weight_bytes"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(raw, &exp); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"gemma4-exact.bundle", "gemma4-fp16.bundle", "gemma4-lut4.bundle", "gemma4-ties.bundle", "gemma4-wide.bundle", "stories.bundle"} {
		dir := testData(t, name)
		r, err := AuditBundle(context.Background(), dir, mlprogram.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		m, err := ReadManifest(dir)
		if err != nil {
			t.Fatal(err)
		}
		if r.Layout != LayoutAnechat || len(r.Packages) != len(m.Chunks) {
			t.Fatalf("%s: layout %s, %d packages for %d chunks", name, r.Layout, len(r.Packages), len(m.Chunks))
		}
		for j, p := range r.Packages {
			rel := name + "/" + m.Chunks[j].Package
			if p.Path != filepath.Join(dir, m.Chunks[j].Package) {
				t.Errorf("package %d is %s, want %s", j, p.Path, rel)
			}
			for _, v := range p.Violations {
				t.Errorf("%s: %s: %s (%s)", rel, v.Rule, v.Detail, v.Source)
			}
			for _, f := range p.Functions {
				for _, v := range f.Violations {
					t.Errorf("%s %s: %s %s %q %v -> %v: %s", rel, f.Name, v.Rule, v.OpType, v.Op, v.Inputs, v.Outputs, v.Detail)
				}
				want, ok := exp.Packages[rel][f.Name]
				if !ok || f.Ops != want.Ops || f.WeightBytes != want.WeightBytes {
					t.Errorf("%s %s: %d ops, %d weight bytes; coremltools: %+v", rel, f.Name, f.Ops, f.WeightBytes, want)
				}
			}
		}
		if r.Violations != 0 {
			t.Errorf("%s: %d violations", name, r.Violations)
		}
	}
}

// TestAuditBundleLayouts: a single package and CoreML-LLM's layout with
// .mlpackage chunks are audited; compiled chunks, a directory that is no
// bundle, a missing one and a damaged package are errors, never a report
// without violations.
func TestAuditBundleLayouts(t *testing.T) {
	ctx := context.Background()
	l := mlprogram.DefaultLimits()
	r, err := AuditBundle(ctx, testData(t, "audit-violations.mlpackage"), l)
	if err != nil {
		t.Fatal(err)
	}
	if r.Layout != LayoutPackage || len(r.Packages) != 1 || r.Violations != 5 || len(r.Rules) != 6 {
		t.Fatalf("violating package: layout %s, %d packages, %d violations, %d rules", r.Layout, len(r.Packages), r.Violations, len(r.Rules))
	}

	pub := publishedBundle(t)
	_, err = AuditBundle(ctx, pub, l)
	if !errors.Is(err, ErrBundle) || !strings.Contains(err.Error(), "chunk1.mlmodelc is a compiled model") || !strings.Contains(err.Error(), "reads .mlpackage bundles") {
		t.Errorf("compiled chunks: %v", err)
	}
	stories := copyBundle(t, "stories.bundle")
	for _, c := range []string{"chunk1", "chunk2", "prefill_chunk1", "prefill_chunk2"} {
		if err := os.Remove(filepath.Join(pub, c+".mlmodelc")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(copyBundle(t, "stories.bundle")+"/chunk_0.mlpackage", filepath.Join(pub, c+".mlpackage")); err != nil {
			t.Fatal(err)
		}
	}
	r, err = AuditBundle(ctx, pub, l)
	if err != nil {
		t.Fatal(err)
	}
	if r.Layout != LayoutPublished || len(r.Packages) != 4 || r.Violations != 0 || !strings.HasSuffix(r.Packages[1].Path, "chunk2.mlpackage") || !strings.HasSuffix(r.Packages[2].Path, "prefill_chunk1.mlpackage") {
		t.Fatalf("published .mlpackage chunks: %+v", r)
	}

	if err := os.WriteFile(filepath.Join(stories, "chunk_0.mlpackage", "Data", "com.apple.CoreML", "model.mlmodel"), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	linked := copyBundle(t, "stories.bundle") // its package a symlink to one outside the bundle
	if err := os.RemoveAll(filepath.Join(linked, "chunk_0.mlpackage")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(testData(t, "stories.bundle/chunk_0.mlpackage"), filepath.Join(linked, "chunk_0.mlpackage")); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]string{
		stories:                                 "model.mlmodel",
		linked:                                  "chunk_0.mlpackage is not a directory",
		t.TempDir():                             "is not a bundle",
		filepath.Join(t.TempDir(), "missing"):   "no such file",
		filepath.Join(stories, "manifest.json"): "not a directory",
	} {
		r, err := AuditBundle(ctx, dir, l)
		if !errors.Is(err, ErrBundle) || !strings.Contains(err.Error(), want) || r != nil {
			t.Errorf("%s: report %v, error %v; want ErrBundle mentioning %q", dir, r != nil, err, want)
		}
	}
}
