package app

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"anechat/internal/backends"
	"anechat/internal/testres"
)

func coremlTestData(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(testres.RepoRoot(t), "build", "testdeps", "coreml", name)
	return testres.Require(t, p, "Core ML test bundles", "run build/scripts/deps-coreml.sh and deps-coremlhost.sh (make test runs them)")
}

// progressEmitter records model:progress events and, when cancel is set,
// cancels the running load at the first one.
type progressEmitter struct {
	mu     sync.Mutex
	events []ModelProgress
	cancel func() bool
}

func (e *progressEmitter) Emit(name string, data any) {
	if name != EventModelProgress {
		return
	}
	e.mu.Lock()
	e.events = append(e.events, data.(ModelProgress))
	c := e.cancel
	e.mu.Unlock()
	if c != nil {
		c()
	}
}

// startBackend opens an app whose models open through the reference
// registry (the Core ML backend with the reference executor), on an engine
// generator using it, and registers the test bundle.
func startBackend(t *testing.T) (*App, *EngineGenerator, *progressEmitter, int64) {
	t.Helper()
	src := coremlTestData(t, "gemma4-exact")
	reg := backends.Reference(src)
	gen := NewEngineGenerator(nil)
	gen.UseRegistry(reg)
	a := New(Options{DataDir: t.TempDir(), Version: "test", Generator: gen, Backends: reg})
	em := &progressEmitter{}
	a.Startup(context.Background(), em)
	t.Cleanup(func() { a.Shutdown(); gen.Close() })
	m, err := a.Models.Register(coremlTestData(t, "gemma4-exact.bundle"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Kind != KindCoreML {
		t.Fatalf("bundle registered as %s", m.Kind)
	}
	return a, gen, em, m.ID
}

// TestModelsLoadAndCoreMLSettings: Models.Load loads a bundle with
// progress events up to the end, after which CoreML.Settings say it runs
// on the Core ML backend and by what; before, no model is loaded, and off
// Apple silicon Core ML is not available, saying why.
func TestModelsLoadAndCoreMLSettings(t *testing.T) {
	a, _, em, id := startBackend(t)
	svc := a.CoreML
	info, err := svc.Settings()
	if err != nil {
		t.Fatal(err)
	}
	if info.Running != "" || info.ComputeUnits != "neural-engine" || len(info.ComputeUnitChoices) != 4 {
		t.Errorf("settings before loading: %+v", info)
	}
	if runtime.GOOS != "darwin" && (info.Available || !strings.Contains(info.Detail, "Neural Engine is not available")) {
		t.Errorf("settings off a Mac: %+v", info)
	}
	if l, err := a.Models.List(); err != nil || l.LoadedID != 0 {
		t.Fatalf("List before loading = %+v, %v; want no model loaded", l, err)
	}
	if o, err := a.Models.Load(id); err != nil || o.Kind != OutcomeLoaded {
		t.Fatalf("Load = %+v, %v; want %s", o, err, OutcomeLoaded)
	}
	// The list says which model is loaded (the Models page marks its row).
	if l, err := a.Models.List(); err != nil || l.LoadedID != id {
		t.Fatalf("List after loading = loaded %d, %v; want %d", l.LoadedID, err, id)
	}
	em.mu.Lock()
	n := len(em.events)
	last := em.events[n-1]
	em.mu.Unlock()
	if n < 2 || last.Done != last.Total || last.ModelID != id {
		t.Errorf("%d progress events, last %+v", n, last)
	}
	info, err = svc.Settings()
	if err != nil {
		t.Fatal(err)
	}
	if info.Running != "coreml" || info.Executor != "reference (CPU kernels, float32)" {
		t.Errorf("settings after loading: %+v", info)
	}
	if a.Models.CancelLoad() {
		t.Error("CancelLoad with no load running returned true")
	}
}

// TestModelsLoadCancel: cancelling a load stops it, which is the outcome
// OutcomeCancelled and not an error, and leaves no model loaded; a load
// that fails is an error, never a cancelled outcome.
func TestModelsLoadCancel(t *testing.T) {
	a, gen, em, id := startBackend(t)
	svc := a.Models
	em.cancel = svc.CancelLoad
	if o, err := svc.Load(id); err != nil || o.Kind != OutcomeCancelled || o.Message == "" {
		t.Fatalf("cancelled load = %+v, %v; want %s with a message", o, err, OutcomeCancelled)
	}
	if b, _, _ := gen.Running(); b != "" {
		t.Errorf("a model is loaded after a cancelled load (%s)", b)
	}
	em.cancel = nil
	if o, err := svc.Load(id + 1000); err == nil || o != (Outcome{}) {
		t.Errorf("load of a model not registered = %+v, %v; want an error and no outcome", o, err)
	}
}

// TestCoreMLComputeUnits: the setting is validated, stored and read back;
// changing it unloads a loaded bundle so the next load uses it.
func TestCoreMLComputeUnits(t *testing.T) {
	a, gen, _, id := startBackend(t)
	svc := a.CoreML
	if _, err := svc.SetComputeUnits("tpu"); err == nil {
		t.Error("compute units tpu accepted")
	}
	if _, err := a.Models.Load(id); err != nil {
		t.Fatal(err)
	}
	info, err := svc.SetComputeUnits("gpu")
	if err != nil {
		t.Fatal(err)
	}
	if info.ComputeUnits != "gpu" {
		t.Errorf("compute units %q after setting gpu", info.ComputeUnits)
	}
	if b, _, _ := gen.Running(); b != "" {
		t.Errorf("the bundle stayed loaded (%s) after the compute units changed", b)
	}
}
