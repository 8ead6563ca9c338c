package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"anechat/engine/chat"
	"anechat/engine/coreml/mlcore"
	"anechat/engine/load"
	"anechat/engine/model"
	"anechat/engine/spec"
	"anechat/internal/backends"
)

// EventModelProgress carries a ModelProgress while Backend.Load loads a
// model: compiling a Core ML bundle for this Mac takes long the first time.
const EventModelProgress = "model:progress"

// ModelProgress says how far loading model ModelID is: Done of Total steps
// (the backend's own units).
type ModelProgress struct {
	ModelID int64 `json:"modelId"`
	Done    int   `json:"done"`
	Total   int   `json:"total"`
}

// BackendState is one backend of this build.
type BackendState struct {
	Name      string `json:"name"`
	Available bool   `json:"available"`
	// Detail says what runs, or why it cannot here.
	Detail string `json:"detail"`
}

// BackendInfo is what Settings show about the backends.
type BackendInfo struct {
	Backends []BackendState `json:"backends"`
	// Running names the backend of the loaded model ("coreml", "cpu"), ""
	// when none is loaded; Runner what executes it ("Core ML
	// (neural-engine)"); Model its path; Why says in a sentence why this
	// backend runs it.
	Running string `json:"running"`
	Runner  string `json:"runner"`
	Model   string `json:"model"`
	Why     string `json:"why"`
	// ComputeUnits is the Core ML compute-units setting and
	// ComputeUnitChoices the values it takes.
	ComputeUnits       string   `json:"computeUnits"`
	ComputeUnitChoices []string `json:"computeUnitChoices"`
}

// keyComputeUnits is the settings key of the compute-units setting.
const keyComputeUnits = "coreml.compute_units"

// Backend is the service behind Settings' backend section and model
// loading: which backend runs and why, the Core ML compute-units setting,
// and loading a model ahead of the first reply with progress events
// (EventModelProgress) and cancellation. Bound methods: Info,
// SetComputeUnits, Load, CancelLoad.
type Backend struct {
	c   *core
	gen *EngineGenerator // nil without the engine

	mu     sync.Mutex
	cancel context.CancelFunc // the running Load's
}

// NewBackendService returns the Backend service of a (gen may be nil). The
// app wires it beside the other services: a field of App, listed in
// Services, and Apply called after Startup so that the stored
// compute-units setting is used by the first load.
func NewBackendService(a *App, gen *EngineGenerator) *Backend {
	return &Backend{c: a.core, gen: gen}
}

// computeUnits reads the setting ("" = the default, neural-engine).
func (b *Backend) computeUnits() (string, error) {
	d, err := b.c.db()
	if err != nil {
		return "", err
	}
	raw, found, err := d.SettingRaw(b.c.context(), keyComputeUnits)
	if err != nil || !found {
		return "", err
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("settings: %s: %w", keyComputeUnits, err)
	}
	if _, err := mlcore.ParseComputeUnits(s); err != nil {
		return "", fmt.Errorf("settings: %s: %w", keyComputeUnits, err)
	}
	return s, nil
}

// Apply gives the engine the registry of the stored compute-units setting.
func (b *Backend) Apply() error {
	units, err := b.computeUnits()
	if err != nil {
		return err
	}
	if b.gen != nil {
		b.gen.UseRegistry(backends.RegistryWith(backends.Options{ComputeUnits: units, Log: b.c.log}))
	}
	return nil
}

// Info says which backends this build has, which one runs the loaded
// model and why, and the compute-units setting.
func (b *Backend) Info() (BackendInfo, error) {
	units, err := b.computeUnits()
	if err != nil {
		return BackendInfo{}, err
	}
	cu, _ := mlcore.ParseComputeUnits(units)
	info := BackendInfo{ComputeUnits: cu.String()}
	for _, c := range []mlcore.ComputeUnits{mlcore.ComputeNeuralEngine, mlcore.ComputeGPU, mlcore.ComputeCPU, mlcore.ComputeAll} {
		info.ComputeUnitChoices = append(info.ComputeUnitChoices, c.String())
	}
	st := backends.Statuses()
	for _, s := range st {
		info.Backends = append(info.Backends, BackendState{Name: s.Name, Available: s.Available, Detail: s.Detail})
	}
	coreOK := len(st) > 0 && st[0].Name == "coreml" && st[0].Available
	if b.gen != nil {
		info.Running, info.Runner, info.Model = b.gen.Running()
	}
	switch {
	case info.Running == "coreml":
		info.Why = "the loaded model is a Core ML bundle and this Mac runs Core ML: " + info.Runner
	case info.Running != "" && coreOK:
		info.Why = "the loaded model is not a Core ML bundle: the CPU backend runs every other model"
	case info.Running != "":
		info.Why = "the CPU backend runs every model here: " + st[0].Detail
	case coreOK:
		info.Why = "no model is loaded: a Core ML bundle would run on Core ML, any other model on the CPU backend"
	default:
		info.Why = "no model is loaded; the CPU backend runs every model here: " + st[0].Detail
	}
	return info, nil
}

// SetComputeUnits stores the compute-units setting (neural-engine, gpu,
// cpu or all) and makes the next load use it (a loaded bundle is loaded
// again at the next reply).
func (b *Backend) SetComputeUnits(units string) (BackendInfo, error) {
	cu, err := mlcore.ParseComputeUnits(units)
	if err != nil {
		return BackendInfo{}, fmt.Errorf("settings: compute units: %w", err)
	}
	d, err := b.c.db()
	if err != nil {
		return BackendInfo{}, err
	}
	raw, _ := json.Marshal(cu.String())
	if err := d.SetSettingRaw(b.c.context(), keyComputeUnits, raw); err != nil {
		return BackendInfo{}, err
	}
	if err := b.Apply(); err != nil {
		return BackendInfo{}, err
	}
	return b.Info()
}

// ErrLoadRunning is returned by Load while another Load runs.
var ErrLoadRunning = errors.New("app: a model is already loading (cancel it first)")

// Load loads model id now rather than at the first reply, sending
// EventModelProgress as it goes; CancelLoad stops it (between files and
// chunks: a Core ML compile already started runs to its end). It returns
// when the model is loaded, or the error (context.Canceled when
// cancelled).
func (b *Backend) Load(id int64) error {
	if b.gen == nil {
		return ErrNoEngine
	}
	d, err := b.c.db()
	if err != nil {
		return err
	}
	m, err := d.GetModel(b.c.context(), id)
	if err != nil {
		return err
	}
	b.mu.Lock()
	if b.cancel != nil {
		b.mu.Unlock()
		return ErrLoadRunning
	}
	ctx, cancel := context.WithCancel(b.c.context())
	b.cancel = cancel
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.cancel = nil
		b.mu.Unlock()
		cancel()
	}()
	return b.gen.Preload(ctx, m.Path, func(done, total int) {
		b.c.send(EventModelProgress, ModelProgress{ModelID: id, Done: done, Total: total})
	})
}

// CancelLoad stops the running Load; false when none runs.
func (b *Backend) CancelLoad() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cancel == nil {
		return false
	}
	b.cancel()
	return true
}

// UseRegistry makes the generator open models through reg from the next
// load on; a loaded Core ML bundle is unloaded, so that a changed setting
// (compute units) applies at the next reply.
func (g *EngineGenerator) UseRegistry(reg *load.Registry) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.registry = reg
	if g.loaded != nil && strings.HasPrefix(model.KernelsOf(g.loaded.backend), "coreml/") {
		g.unload()
	}
}

// Preload loads the model at path (unloading another) with progress, so
// that the next reply finds it loaded; ctx cancels it.
func (g *EngineGenerator) Preload(ctx context.Context, path string, progress func(done, total int)) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.loaded != nil && g.loaded.path == path && model.CheckFiles(g.loaded.backend) == nil {
		if progress != nil {
			progress(1, 1)
		}
		return nil
	}
	g.unload()
	lm, err := g.registry.Open(ctx, path, load.Options{Progress: progress})
	if err != nil {
		return fmt.Errorf("load model %s: %w", path, err)
	}
	tmpl, err := chat.ForModel(lm.Backend.Config().Arch, lm.Tokenizer, lm.Chat)
	if err != nil {
		lm.Close()
		return fmt.Errorf("load model %s: chat template: %w", path, err)
	}
	g.log.Info("model loaded", "path", path, "backend", lm.BackendName, "template", tmpl.Name())
	g.loaded = &loadedModel{path: path, backend: lm.Backend, tok: lm.Tokenizer, tmpl: tmpl, corpus: spec.NewCorpus(0), seen: map[string]bool{}}
	return nil
}

// Running names the loaded model's backend ("coreml", "cpu"), what runs it
// and its path; all "" when no model is loaded.
func (g *EngineGenerator) Running() (backend, runner, path string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.loaded == nil {
		return "", "", ""
	}
	k := model.KernelsOf(g.loaded.backend)
	backend, runner, _ = strings.Cut(k, "/")
	if backend != "coreml" {
		backend, runner = "cpu", "pure Go ("+k+")"
	}
	return backend, runner, g.loaded.path
}
