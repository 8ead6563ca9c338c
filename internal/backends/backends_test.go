package backends

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"anechat/engine/load"
	"anechat/internal/testres"
)

func bundlePath(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(testres.RepoRoot(t), "build", "testdeps", "coreml", name)
	return testres.Require(t, p, "Core ML test bundles", "run build/scripts/deps-coreml.sh and deps-coremlhost.sh (make test runs them)")
}

// TestReferenceRegistryOpensBundles: a bundle opens through engine/load on
// the Core ML backend (the reference executor), with the loader's fingerprint,
// its tokenizer (tokenizer.json, or the tokenizer.gguf of a bundle made
// from a GGUF file) and progress reported up to the end; other models still
// open on the CPU backend.
func TestReferenceRegistryOpensBundles(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ bundle, source string }{
		{"gemma4-exact.bundle", bundlePath(t, "gemma4-exact")},
		{"stories.bundle", testres.Stories(t)},
	} {
		reg := Reference(tc.source)
		var last, total int
		m, err := reg.Open(ctx, bundlePath(t, tc.bundle), load.Options{Progress: func(d, n int) { last, total = d, n }})
		if err != nil {
			t.Fatalf("%s: %v", tc.bundle, err)
		}
		if m.BackendName != "coreml" || m.Tokenizer == nil || m.Backend.Config().Fingerprint != m.Source.Fingerprint {
			t.Errorf("%s: backend %s, tokenizer %v, fingerprint %q vs %q", tc.bundle, m.BackendName, m.Tokenizer != nil, m.Backend.Config().Fingerprint, m.Source.Fingerprint)
		}
		if total == 0 || last != total {
			t.Errorf("%s: progress ended at %d of %d", tc.bundle, last, total)
		}
		m.Close()
		info, err := reg.Inspect(ctx, bundlePath(t, tc.bundle))
		if err != nil || info.Backend != "coreml" {
			t.Errorf("%s: Inspect: %v (%s)", tc.bundle, err, info.Backend)
		}
	}
	m, err := Reference(testres.Stories(t)).Open(ctx, testres.Stories(t), load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.BackendName != "cpu" {
		t.Errorf("a GGUF file opened on %s", m.BackendName)
	}
}

// TestReferenceWrongSource: the reference executor refuses a checkpoint other
// than the bundle's source, naming the file.
func TestReferenceWrongSource(t *testing.T) {
	_, err := Reference(testres.Stories(t)).Open(context.Background(), bundlePath(t, "gemma4-exact.bundle"), load.Options{})
	if err == nil || !strings.Contains(err.Error(), "converted from") && !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("a bundle opened with another source checkpoint: %v", err)
	}
}

// TestRegistryHere: the app's registry has the Core ML backend first on
// darwin/arm64 only; elsewhere a bundle is refused by every backend with
// the reason, and Statuses says the Neural Engine is not available.
func TestRegistryHere(t *testing.T) {
	names := []string{}
	for _, b := range Registry().Loaders() {
		names = append(names, b.Name())
	}
	st := Statuses()
	if runtime.GOOS == "darwin" && runtime.GOARCH == "arm64" {
		if names[0] != "coreml" {
			t.Errorf("backends %v: coreml is not first", names)
		}
		return
	}
	if len(names) != 1 || names[0] != "cpu" {
		t.Errorf("backends %v on %s/%s", names, runtime.GOOS, runtime.GOARCH)
	}
	if st[0].Name != "coreml" || st[0].Available || !strings.Contains(st[0].Detail, "Neural Engine is not available") {
		t.Errorf("coreml status %+v", st[0])
	}
	_, err := Registry().Open(context.Background(), bundlePath(t, "stories.bundle"), load.Options{})
	if err == nil || !strings.Contains(err.Error(), "no backend") {
		t.Errorf("a bundle opened on %s/%s: %v", runtime.GOOS, runtime.GOARCH, err)
	}
}

func TestCoreMLStatus(t *testing.T) {
	if s := CoreMLStatus("linux", "amd64"); !strings.HasPrefix(s, "not built for this platform") {
		t.Errorf("linux: %q", s)
	}
	if s := CoreMLStatus("darwin", "amd64"); !strings.HasPrefix(s, "not built for this platform") {
		t.Errorf("intel mac: %q", s)
	}
	if s := CoreMLStatus("darwin", "arm64"); strings.Contains(s, "not built for this platform") {
		t.Errorf("apple silicon: %q", s)
	}
}
