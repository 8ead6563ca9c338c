package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/storage"
)

// Model kinds a scan recognises.
const (
	KindGGUF        = "gguf"        // one .gguf file (llama.cpp format)
	KindSafetensors = "safetensors" // a Hugging Face directory: config.json + *.safetensors
	KindCoreML      = "coreml"      // a Core ML bundle directory (.mlmodelc / .mlpackage)
)

// Found is a model file or directory found on disk, before registration.
type Found struct {
	Path        string `json:"path"`
	Kind        string `json:"kind"`
	Name        string `json:"name"`
	Fingerprint string `json:"fingerprint"`
	SizeBytes   int64  `json:"sizeBytes"`
	// Arch is the architecture the file declares ("" if unknown).
	Arch string `json:"arch"`
}

// Problem is a file a scan could not read as a model, and why.
type Problem struct {
	Path  string `json:"path"`
	Error string `json:"error"`
}

// ScanDir lists the models directly inside dir (the data directory's models
// folder): .gguf files, model directories with config.json, Core ML bundles.
// Files it cannot read are returned as problems, not errors; the error is for
// an unreadable dir. A missing dir holds no models.
func ScanDir(dir string) ([]Found, []Problem, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return []Found{}, []Problem{}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("models: read %s: %w (check its permissions)", dir, err)
	}
	found, problems := []Found{}, []Problem{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		f, ok, err := Inspect(p)
		switch {
		case err != nil:
			problems = append(problems, Problem{Path: p, Error: err.Error()})
		case ok:
			found = append(found, f)
		}
	}
	sort.Slice(found, func(i, j int) bool { return found[i].Path < found[j].Path })
	return found, problems, nil
}

// Inspect reads what kind of model path is. ok is false (with no error) for
// a file that is not a model at all, e.g. a README.
func Inspect(path string) (f Found, ok bool, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return Found{}, false, fmt.Errorf("models: %w", err)
	}
	base := filepath.Base(path)
	f = Found{Path: path, Name: strings.TrimSuffix(base, filepath.Ext(base))}
	switch {
	case !st.IsDir() && strings.EqualFold(filepath.Ext(path), ".gguf"):
		f.Kind, f.SizeBytes = KindGGUF, st.Size()
		g, err := gguf.Open(path)
		if err != nil {
			return Found{}, false, fmt.Errorf("models: %s is not a readable GGUF file: %w", path, err)
		}
		if arch, err := g.String("general.architecture"); err == nil {
			f.Arch = arch
		}
		if name, err := g.String("general.name"); err == nil && strings.TrimSpace(name) != "" {
			f.Name = name
		}
		g.Close()
		if f.Fingerprint, err = model.FingerprintFiles(path); err != nil {
			return Found{}, false, fmt.Errorf("models: fingerprint %s: %w", path, err)
		}
		return f, true, nil
	case st.IsDir() && (strings.HasSuffix(base, ".mlmodelc") || strings.HasSuffix(base, ".mlpackage")):
		f.Kind = KindCoreML
		f.SizeBytes = dirSize(path)
		if f.Fingerprint, err = model.FingerprintDir(path, ".json", ".bin", ".mil"); err != nil {
			return Found{}, false, fmt.Errorf("models: fingerprint %s: %w", path, err)
		}
		return f, true, nil
	case st.IsDir():
		cfg, err := os.ReadFile(filepath.Join(path, "config.json"))
		if errors.Is(err, fs.ErrNotExist) {
			return Found{}, false, nil
		}
		if err != nil {
			return Found{}, false, fmt.Errorf("models: %w", err)
		}
		var c struct {
			ModelType  string `json:"model_type"`
			TextConfig struct {
				ModelType string `json:"model_type"`
			} `json:"text_config"`
		}
		if err := json.Unmarshal(cfg, &c); err != nil {
			return Found{}, false, fmt.Errorf("models: %s: config.json is not valid JSON: %w", path, err)
		}
		f.Kind, f.Arch = KindSafetensors, c.ModelType
		f.SizeBytes = dirSize(path)
		if f.Fingerprint, err = model.FingerprintDir(path, ".json", ".safetensors"); err != nil {
			return Found{}, false, fmt.Errorf("models: fingerprint %s: %w", path, err)
		}
		return f, true, nil
	}
	return Found{}, false, nil
}

// dirSize adds up the regular files under dir (best effort).
func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// Models is the model manager service.
type Models struct {
	c        *core
	settings *Settings
}

// ModelList is the Models page: the registered models, which one is the
// default, and where to put new ones.
type ModelList struct {
	Models    []storage.Model `json:"models"`
	DefaultID int64           `json:"defaultId"`
	ModelsDir string          `json:"modelsDir"`
}

// List returns the registered models and the default.
func (m *Models) List() (ModelList, error) {
	d, err := m.c.db()
	if err != nil {
		return ModelList{}, err
	}
	ms, err := d.ListModels(m.c.context())
	if err != nil {
		return ModelList{}, err
	}
	p, err := m.settings.Get()
	if err != nil {
		return ModelList{}, err
	}
	return ModelList{Models: ms, DefaultID: p.DefaultModelID, ModelsDir: storage.ModelsPath(m.c.dataDir)}, nil
}

// ScanResult is what Scan registered and what it could not read.
type ScanResult struct {
	Registered []storage.Model `json:"registered"`
	Problems   []Problem       `json:"problems"`
}

// Scan registers every model in the data directory's models folder (known
// paths are updated in place). If no default model is set, the preferred
// one found becomes the default (preferredDefault). Startup runs it too.
func (m *Models) Scan() (ScanResult, error) {
	if _, err := m.c.db(); err != nil {
		return ScanResult{}, err
	}
	found, problems, err := ScanDir(storage.ModelsPath(m.c.dataDir))
	if err != nil {
		return ScanResult{}, err
	}
	res := ScanResult{Registered: []storage.Model{}, Problems: problems}
	for _, f := range found {
		sm, err := m.register(f)
		if err != nil {
			return ScanResult{}, err
		}
		res.Registered = append(res.Registered, sm)
	}
	if best, ok := preferredDefault(res.Registered); ok {
		if err := m.defaultIfNone(best.ID); err != nil {
			return ScanResult{}, err
		}
	}
	return res, nil
}

// BundledChatModel is the file name of the chat model `make run` fetches into
// the models folder on Linux (build/scripts/fetch-smollm2.sh): SmolLM2-135M-
// Instruct, small enough for any CPU.
const BundledChatModel = "SmolLM2-135M-Instruct.Q4_1.gguf"

// preferredDefault picks the model a scan makes the default when none is set:
// a Core ML bundle (it runs Gemma 4 on the Neural Engine) if there is one,
// else the bundled SmolLM2 chat model, else the first model by path. ok is
// false for no models.
func preferredDefault(ms []storage.Model) (best storage.Model, ok bool) {
	rank := func(sm storage.Model) int {
		switch {
		case sm.Kind == KindCoreML:
			return 0
		case filepath.Base(sm.Path) == BundledChatModel:
			return 1
		}
		return 2
	}
	for _, sm := range ms {
		if !ok || rank(sm) < rank(best) || (rank(sm) == rank(best) && sm.Path < best.Path) {
			best, ok = sm, true
		}
	}
	return best, ok
}

// Register adds the model at path (anywhere on disk) and returns it.
func (m *Models) Register(path string) (storage.Model, error) {
	if _, err := m.c.db(); err != nil {
		return storage.Model{}, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return storage.Model{}, fmt.Errorf("models: %s: %w", path, err)
	}
	f, ok, err := Inspect(abs)
	if err != nil {
		return storage.Model{}, err
	}
	if !ok {
		return storage.Model{}, fmt.Errorf("models: %s is not a model: want a .gguf file, a directory with config.json, or a Core ML bundle", abs)
	}
	sm, err := m.register(f)
	if err != nil {
		return storage.Model{}, err
	}
	return sm, m.defaultIfNone(sm.ID)
}

func (m *Models) register(f Found) (storage.Model, error) {
	d, err := m.c.db()
	if err != nil {
		return storage.Model{}, err
	}
	meta, err := json.Marshal(map[string]string{"arch": f.Arch})
	if err != nil {
		return storage.Model{}, err
	}
	return d.RegisterModel(m.c.context(), storage.ModelInput{Path: f.Path, Kind: f.Kind, Name: f.Name,
		Fingerprint: f.Fingerprint, SizeBytes: f.SizeBytes, Meta: meta})
}

func (m *Models) defaultIfNone(id int64) error {
	p, err := m.settings.Get()
	if err != nil {
		return err
	}
	if p.DefaultModelID != 0 {
		return nil
	}
	p.DefaultModelID = id
	_, err = m.settings.Update(p)
	return err
}

// SetDefault makes model id the one new conversations use.
func (m *Models) SetDefault(id int64) error {
	p, err := m.settings.Get()
	if err != nil {
		return err
	}
	p.DefaultModelID = id
	_, err = m.settings.Update(p)
	return err
}

// Remove forgets model id (its file stays on disk). If it was the default,
// there is no default any more.
func (m *Models) Remove(id int64) error {
	d, err := m.c.db()
	if err != nil {
		return err
	}
	p, err := m.settings.Get()
	if err != nil {
		return err
	}
	if err := d.DeleteModel(m.c.context(), id); err != nil {
		return err
	}
	if p.DefaultModelID == id {
		p.DefaultModelID = 0
		_, err = m.settings.Update(p)
	}
	return err
}

// resolve picks the model for a conversation: its own, else the default.
func (m *Models) resolve(conversationModel int64) (storage.Model, error) {
	d, err := m.c.db()
	if err != nil {
		return storage.Model{}, err
	}
	id := conversationModel
	if id == 0 {
		p, err := m.settings.Get()
		if err != nil {
			return storage.Model{}, err
		}
		id = p.DefaultModelID
	}
	if id == 0 {
		return storage.Model{}, ErrNoModel
	}
	sm, err := d.GetModel(m.c.context(), id)
	if errors.Is(err, storage.ErrNotFound) {
		return storage.Model{}, fmt.Errorf("%w (model %d was removed)", ErrNoModel, id)
	}
	return sm, err
}
