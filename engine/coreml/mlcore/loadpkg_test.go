package mlcore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeRuntime loads nothing real: Load fails with the errors queued in
// fails, then returns a fakeFunction. Compile is the fake compiler's.
type fakeRuntime struct {
	fc     *fakeCompiler
	fails  []error
	loaded []string
}

func (r *fakeRuntime) Compile(ctx context.Context, pkg string) (string, error) {
	return r.fc.compile(ctx, pkg)
}

func (r *fakeRuntime) Load(ctx context.Context, compiled string, opts LoadOptions) (Function, error) {
	r.loaded = append(r.loaded, compiled)
	if len(r.fails) > 0 {
		err := r.fails[0]
		r.fails = r.fails[1:]
		return nil, err
	}
	return fakeFunction{}, nil
}

type fakeFunction struct{ Function }

// damageWeights changes the bytes of a compiled file, not its size: the
// cheap check of Compiled passes, Verify does not.
func damageWeights(t *testing.T, e Entry) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(e.Path, "weights", "weight.bin"), []byte(strings.Repeat("d", 3000)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadPackage(t *testing.T) {
	ctx := context.Background()
	pkg := testPackage(t)
	loadErr := &NSError{Op: "modelWithContentsOfURL:configuration:error:", Description: "corrupt model"}
	for name, c := range map[string]struct {
		warm     bool // the package is already in the cache
		damage   bool // and its compiled weights have changed (same size)
		fails    []error
		compiles int
		loads    int
		want     string // "" = success
	}{
		"cold":                                 {false, false, nil, 1, 1, ""},
		"warm":                                 {true, false, nil, 1, 1, ""},
		"damaged cached entry Core ML rejects": {true, true, []error{loadErr}, 2, 2, ""},
		"intact cached entry Core ML rejects":  {true, false, []error{loadErr}, 1, 1, "corrupt model"},
		"fresh entry Core ML rejects":          {false, false, []error{loadErr}, 1, 1, "corrupt model"},
		"rejected again after recompiling": {true, true, []error{loadErr, loadErr}, 2, 2,
			"after recompiling it: coreml: modelWithContentsOfURL:configuration:error:: corrupt model"},
		"too old a macOS is not retried": {true, true, []error{&OSVersionError{What: "x", Need: "15.0", Have: "14.0"}}, 1, 1, "needs macOS 15.0"},
		"cancelled is not retried":       {true, true, []error{context.Canceled}, 1, 1, "context canceled"},
	} {
		cache, fc, _ := newTestCache(t)
		rt := &fakeRuntime{fc: fc}
		if c.warm {
			e, err := cache.Compiled(ctx, pkg)
			if err != nil {
				t.Fatal(err)
			}
			if c.damage {
				damageWeights(t, e)
			}
		}
		rt.fails = c.fails
		fn, err := LoadPackage(ctx, rt, cache, pkg, LoadOptions{})
		if c.want == "" {
			if err != nil || fn == nil {
				t.Errorf("%s: %v", name, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", name, err, c.want)
		}
		if fc.calls != c.compiles || len(rt.loaded) != c.loads {
			t.Errorf("%s: %d compiles, %d loads; want %d, %d", name, fc.calls, len(rt.loaded), c.compiles, c.loads)
		}
	}
	// A compile error comes back as it is.
	cache, fc, _ := newTestCache(t)
	fc.fail = errors.New("no space")
	if _, err := LoadPackage(ctx, &fakeRuntime{fc: fc}, cache, pkg, LoadOptions{}); err == nil || !strings.Contains(err.Error(), "no space") {
		t.Errorf("compile error: %v", err)
	}
}
