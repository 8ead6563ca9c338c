package app

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"anechat/engine/coreml/mlcore"
	"anechat/engine/load"
	"anechat/engine/model"
	"anechat/internal/backends"
)

// CoreMLSettings is what Settings show of the Core ML backend beside
// System.Backend: the compute-units setting, the values it takes, and what
// runs the loaded model.
type CoreMLSettings struct {
	// ComputeUnits is the setting (neural-engine, gpu, cpu or all) and
	// ComputeUnitChoices the values it takes.
	ComputeUnits       string   `json:"computeUnits"`
	ComputeUnitChoices []string `json:"computeUnitChoices"`
	// Running names the backend of the loaded model ("coreml", "cpu"), ""
	// when none is loaded; Executor what executes it ("Core ML
	// (neural-engine)", "reference (CPU kernels, float32)"); Model its
	// path.
	Running  string `json:"running"`
	Executor string `json:"executor"`
	Model    string `json:"model"`
	// Available says whether this build runs Core ML here, and Detail what
	// runs or why not.
	Available bool   `json:"available"`
	Detail    string `json:"detail"`
}

// keyComputeUnits is the settings key of the compute-units setting.
const keyComputeUnits = "coreml.compute_units"

// CoreML is the service behind the Core ML part of Settings: the
// compute-units setting and what runs the loaded model. Bound methods:
// Settings, SetComputeUnits. (Loading a model ahead of the first reply is
// the Models service's, whatever its backend.)
type CoreML struct {
	c   *core
	gen *EngineGenerator // nil without the engine
}

// NewCoreMLService returns the CoreML service of a (gen may be nil). The
// app wires it beside the other services: a field of App, listed in
// Services, and Apply called after Startup so that the stored
// compute-units setting is used by the first load.
func NewCoreMLService(a *App, gen *EngineGenerator) *CoreML {
	return &CoreML{c: a.core, gen: gen}
}

// computeUnits reads the setting ("" = the default, neural-engine).
func (b *CoreML) computeUnits() (string, error) {
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

// Apply gives the engine the registry of the stored compute-units setting
// (App.Startup calls it, so the first load uses the setting). When the app
// was given its own registry (Options.Backends), that one stays: the
// engine gets it back, which unloads a loaded bundle all the same.
func (b *CoreML) Apply() error {
	units, err := b.computeUnits()
	if err != nil {
		return err
	}
	if b.gen != nil {
		reg := b.c.opts.Backends
		if reg == nil {
			reg = backends.RegistryWith(backends.Options{ComputeUnits: units, Log: b.c.log})
		}
		b.gen.UseRegistry(reg)
	}
	return nil
}

// Settings returns the compute-units setting and what runs the loaded
// model.
func (b *CoreML) Settings() (CoreMLSettings, error) {
	units, err := b.computeUnits()
	if err != nil {
		return CoreMLSettings{}, err
	}
	cu, _ := mlcore.ParseComputeUnits(units)
	info := CoreMLSettings{ComputeUnits: cu.String()}
	for _, c := range []mlcore.ComputeUnits{mlcore.ComputeNeuralEngine, mlcore.ComputeGPU, mlcore.ComputeCPU, mlcore.ComputeAll} {
		info.ComputeUnitChoices = append(info.ComputeUnitChoices, c.String())
	}
	for _, s := range backends.Statuses() {
		if s.Name == "coreml" {
			info.Available, info.Detail = s.Available, s.Detail
		}
	}
	if b.gen != nil {
		info.Running, info.Executor, info.Model = b.gen.Running()
	}
	return info, nil
}

// SetComputeUnits stores the compute-units setting (neural-engine, gpu,
// cpu or all) and makes the next load use it (a loaded bundle is loaded
// again at the next reply).
func (b *CoreML) SetComputeUnits(units string) (CoreMLSettings, error) {
	cu, err := mlcore.ParseComputeUnits(units)
	if err != nil {
		return CoreMLSettings{}, fmt.Errorf("settings: compute units: %w", err)
	}
	d, err := b.c.db()
	if err != nil {
		return CoreMLSettings{}, err
	}
	raw, _ := json.Marshal(cu.String())
	if err := d.SetSettingRaw(b.c.context(), keyComputeUnits, raw); err != nil {
		return CoreMLSettings{}, err
	}
	if err := b.Apply(); err != nil {
		return CoreMLSettings{}, err
	}
	return b.Settings()
}

// UseRegistry makes the generator open models through reg from the next
// load on; a loaded Core ML bundle is unloaded, so that a changed setting
// (compute units) applies at the next reply. The sessions manager is the one the
// in-app API serves on, so the API follows the setting too.
func (g *EngineGenerator) UseRegistry(reg *load.Registry) {
	g.run.UseRegistry(reg, func(b model.Backend) bool { return strings.HasPrefix(model.KernelsOf(b), "coreml/") })
}

// Preload loads the model at path (unloading another) with progress, so
// that the next reply finds it loaded; ctx cancels it.
func (g *EngineGenerator) Preload(ctx context.Context, path string, progress func(done, total int)) error {
	return g.run.Preload(ctx, path, progress)
}

// Running names the loaded model's backend ("coreml", "cpu"), what runs it
// and its path; all "" when no model is loaded.
func (g *EngineGenerator) Running() (backend, executor, path string) {
	m := g.run.Loaded()
	if m == nil {
		return "", "", ""
	}
	k := model.KernelsOf(m.Backend())
	backend, executor, _ = strings.Cut(k, "/")
	if backend != "coreml" {
		backend, executor = "cpu", "pure Go ("+k+")"
	}
	return backend, executor, m.Path()
}
