package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"

	"anechat/engine/load"
	"anechat/internal/backends"
	"anechat/internal/download"
	"anechat/storage"
)

// Model kinds a scan recognises: engine/load's formats.
const (
	KindGGUF        = string(load.GGUF)        // one .gguf file (llama.cpp format)
	KindSafetensors = string(load.Safetensors) // a Hugging Face directory: config.json + *.safetensors
	KindCoreML      = string(load.CoreML)      // a Core ML bundle directory
)

// Problem is a file a scan could not read as a model, and why.
type Problem struct {
	Path  string `json:"path"`
	Error string `json:"error"`
}

// ScanDir validates the models directly inside dir (the data directory's
// models folder: .gguf files, model directories with config.json, Core ML
// bundles) exactly as loading them would (load.Registry.Inspect). A model
// that would not load is returned as a problem saying why, never as a
// model; files that are not models at all (a README) are skipped. The error
// is for an unreadable dir; a missing dir holds no models.
func ScanDir(ctx context.Context, reg *load.Registry, dir string) ([]load.Info, []Problem, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return []load.Info{}, []Problem{}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("models: read %s: %w (check its permissions)", dir, err)
	}
	found, problems := []load.Info{}, []Problem{}
	for _, e := range entries {
		// Hidden entries (the downloads' work folder) and partial
		// downloads are never models.
		if strings.HasPrefix(e.Name(), ".") || strings.HasSuffix(e.Name(), partSuffix) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		info, err := reg.Inspect(ctx, p)
		switch {
		case errors.Is(err, load.ErrNotModel):
		case err != nil:
			problems = append(problems, Problem{Path: p, Error: err.Error()})
		default:
			found = append(found, info)
		}
	}
	sort.Slice(found, func(i, j int) bool { return found[i].Path < found[j].Path })
	return found, problems, nil
}

// ModelMeta is what the models table keeps of a model besides its columns
// (storage.Model.Meta, as JSON): what the Models page shows.
type ModelMeta struct {
	Arch       string `json:"arch"`
	Quant      string `json:"quant,omitempty"`
	ContextLen int    `json:"contextLen,omitempty"`
	VocabSize  int    `json:"vocabSize,omitempty"`
	// Backend names the backend that runs it here ("cpu"); "" when none
	// in this build does (see Unsupported).
	Backend string `json:"backend,omitempty"`
	// DeclaredName is the name the file gives itself (GGUF general.name),
	// often a training label; Model.Name is the readable one.
	DeclaredName string `json:"declaredName,omitempty"`
	// Unsupported says why no backend of this build runs the model (a Core
	// ML bundle on Linux) and what would; "" when one does.
	Unsupported string `json:"unsupported,omitempty"`
	// SHA256 is the file's sha256 (a one-file model), once a registration
	// needed it to tell a copy from another model of the same size.
	SHA256 string `json:"sha256,omitempty"`
}

// metaOf decodes a registered model's meta; a model registered before a
// field existed simply lacks it.
func metaOf(sm storage.Model) ModelMeta {
	var m ModelMeta
	if len(sm.Meta) > 0 {
		_ = json.Unmarshal(sm.Meta, &m) // written by register; a stray value only hides the details
	}
	return m
}

// runnable fails, saying why, for a model no backend of this build runs.
func runnable(sm storage.Model) error {
	if m := metaOf(sm); m.Unsupported != "" {
		return fmt.Errorf("%w: %s cannot run here: %s (choose another model in the chat header)", ErrNoModel, sm.Name, m.Unsupported)
	}
	return nil
}

// Models is the model manager service: the registered models, and
// loading one ahead of the first reply (compiling a Core ML bundle takes
// long the first time) with progress events (EventModelProgress) and
// cancellation (Load, CancelLoad).
type Models struct {
	c        *core
	settings *Settings
	gen      *EngineGenerator // nil without the engine: Load says so

	mu     sync.Mutex
	cancel context.CancelFunc // the running Load's
}

// registry is the set of backends models are validated and opened with.
func (m *Models) registry() *load.Registry { return m.c.registry }

// ModelList is the Models page: the registered models, which one is the
// default, and where to put new ones.
type ModelList struct {
	Models    []storage.Model `json:"models"`
	DefaultID int64           `json:"defaultId"`
	// LoadedID is the model loaded in memory now (by Load or a reply), 0
	// when none is.
	LoadedID  int64  `json:"loadedId"`
	ModelsDir string `json:"modelsDir"`
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
	l := ModelList{Models: ms, DefaultID: p.DefaultModelID, ModelsDir: storage.ModelsPath(m.c.dataDir)}
	if m.gen != nil {
		if path := m.gen.Sessions().LoadedPath(); path != "" {
			for _, sm := range ms {
				if sm.Path == path {
					l.LoadedID = sm.ID
				}
			}
		}
	}
	return l, nil
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
	found, problems, err := ScanDir(m.c.context(), m.registry(), storage.ModelsPath(m.c.dataDir))
	if err != nil {
		return ScanResult{}, err
	}
	res := ScanResult{Registered: []storage.Model{}, Problems: problems}
	for _, f := range found {
		sm, err := m.register(f)
		var dup *DuplicateError
		if errors.As(err, &dup) {
			res.Problems = append(res.Problems, Problem{Path: f.Path, Error: dup.Error()})
			continue
		}
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
		if runnable(sm) != nil {
			continue
		}
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
	f, err := m.registry().Inspect(m.c.context(), abs)
	if err != nil {
		return storage.Model{}, fmt.Errorf("models: %w", err)
	}
	sm, err := m.register(f)
	if err != nil {
		return storage.Model{}, err
	}
	return sm, m.defaultIfNone(sm.ID)
}

// DuplicateError is a model file that is the same file (the same sha256)
// as a model registered at another path: it is not added again.
type DuplicateError struct {
	Path string
	Of   storage.Model
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("models: %s is the same file (same sha256) as %s, registered as model %d (%s): not added again",
		e.Path, e.Of.Name, e.Of.ID, e.Of.Path)
}

// sameFile returns the registered model whose file has the sha256 of the
// one-file model f (a new path), and f's sha256 when it was computed: only
// a model of the same size is a candidate, so a new file is hashed only
// when one is (a copy or a renamed download).
func (m *Models) sameFile(ctx context.Context, d *storage.DB, f load.Info) (*storage.Model, string, error) {
	if f.Format != load.GGUF {
		return nil, "", nil // a folder's identity is its fingerprint
	}
	if _, err := d.ModelByPath(ctx, f.Path); err == nil {
		return nil, "", nil // known path: updated in place
	}
	ms, err := d.ListModels(ctx)
	if err != nil {
		return nil, "", err
	}
	sum := ""
	for _, sm := range ms {
		if sm.Kind != KindGGUF || sm.SizeBytes != f.SizeBytes || sm.Path == f.Path {
			continue
		}
		if sum == "" {
			if sum, err = fileSHA256(ctx, f.Path); err != nil {
				return nil, "", err
			}
		}
		other := metaOf(sm).SHA256
		if other == "" {
			if other, err = fileSHA256(ctx, sm.Path); err != nil {
				continue // gone or unreadable: not the same file
			}
		}
		if other == sum {
			return &sm, sum, nil
		}
	}
	return nil, sum, nil
}

// fileSHA256 is the sha256 of the file at p.
func fileSHA256(ctx context.Context, p string) (string, error) {
	return download.Verify(ctx, p, "")
}

func (m *Models) register(f load.Info) (storage.Model, error) {
	d, err := m.c.db()
	if err != nil {
		return storage.Model{}, err
	}
	same, sum, err := m.sameFile(m.c.context(), d, f)
	if err != nil {
		return storage.Model{}, fmt.Errorf("models: %w", err)
	}
	if same != nil {
		return storage.Model{}, &DuplicateError{Path: f.Path, Of: *same}
	}
	meta, err := json.Marshal(ModelMeta{Arch: f.Arch, Quant: f.Quant, ContextLen: f.Config.ContextLen,
		VocabSize: f.Config.VocabSize, Backend: f.Backend, DeclaredName: f.DeclaredName, SHA256: sum})
	if err != nil {
		return storage.Model{}, err
	}
	return d.RegisterModel(m.c.context(), storage.ModelInput{Path: f.Path, Kind: string(f.Format), Name: f.Name,
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
	d, err := m.c.db()
	if err != nil {
		return err
	}
	sm, err := d.GetModel(m.c.context(), id)
	if err != nil {
		return fmt.Errorf("models: model %d: %w", id, err)
	}
	if err := runnable(sm); err != nil {
		return err
	}
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

// ImportResult is what Import registered and whether this build can run it.
type ImportResult struct {
	Model storage.Model `json:"model"`
	// Runnable: a backend of this build runs it (Backend names it). When
	// not, Note says why and what would (a Core ML bundle needs the macOS
	// build on Apple silicon); the model is listed but cannot answer here.
	Runnable bool   `json:"runnable"`
	Backend  string `json:"backend"`
	Note     string `json:"note"`
}

// Import registers the model at path (a .gguf file, a model directory or a
// Core ML bundle folder, anywhere on disk; it is not copied), validated by
// the loader as loading it would be. A Core ML bundle no backend of this
// build runs is registered all the same, marked as such (ImportResult.Note
// says why), so the library shows it; any other model that would not load
// is an error saying why.
func (m *Models) Import(path string) (ImportResult, error) {
	if _, err := m.c.db(); err != nil {
		return ImportResult{}, err
	}
	if strings.TrimSpace(path) == "" {
		return ImportResult{}, errors.New("models: import: no path given (choose a .gguf file or a model folder)")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return ImportResult{}, fmt.Errorf("models: %s: %w", path, err)
	}
	f, err := m.registry().Inspect(m.c.context(), abs)
	if err == nil {
		sm, err := m.register(f)
		if err != nil {
			return ImportResult{}, err
		}
		if err := m.defaultIfNone(sm.ID); err != nil {
			return ImportResult{}, err
		}
		return ImportResult{Model: sm, Runnable: true, Backend: f.Backend}, nil
	}
	if !errors.Is(err, load.ErrUnsupported) || f.Format != load.CoreML {
		return ImportResult{}, fmt.Errorf("models: %w", err)
	}
	// The bundle itself was read (detected and fingerprinted); only no
	// backend here runs it.
	note := backends.CoreMLStatus(runtime.GOOS, runtime.GOARCH)
	meta, err := json.Marshal(ModelMeta{Arch: f.Arch, Quant: f.Quant, DeclaredName: f.DeclaredName, Unsupported: note})
	if err != nil {
		return ImportResult{}, err
	}
	d, err := m.c.db()
	if err != nil {
		return ImportResult{}, err
	}
	sm, err := d.RegisterModel(m.c.context(), storage.ModelInput{Path: f.Path, Kind: string(f.Format), Name: f.Name,
		Fingerprint: f.Fingerprint, SizeBytes: f.SizeBytes, Meta: meta})
	if err != nil {
		return ImportResult{}, err
	}
	m.c.log.Info("model imported that this build cannot run", "path", f.Path, "why", note)
	return ImportResult{Model: sm, Note: note}, nil
}

// EventModelProgress carries a ModelProgress while Models.Load loads a
// model: compiling a Core ML bundle for this Mac takes long the first time.
const EventModelProgress = "model:progress"

// ModelProgress says how far loading model ModelID is: Done of Total steps
// (the backend's own units).
type ModelProgress struct {
	ModelID int64 `json:"modelId"`
	Done    int   `json:"done"`
	Total   int   `json:"total"`
}

// ErrLoadRunning is returned by Load while another Load runs.
var ErrLoadRunning = errors.New("app: a model is already loading (cancel it first)")

// Load loads model id now rather than at the first reply, sending
// EventModelProgress as it goes; CancelLoad stops it (between files and
// chunks: a Core ML compile already started runs to its end). It returns
// once the model is loaded (OutcomeLoaded) or the load was stopped
// (OutcomeCancelled: what the user asked, not a failure), or the error.
func (m *Models) Load(id int64) (Outcome, error) {
	if m.gen == nil {
		return Outcome{}, ErrNoEngine
	}
	d, err := m.c.db()
	if err != nil {
		return Outcome{}, err
	}
	mdl, err := d.GetModel(m.c.context(), id)
	if err != nil {
		return Outcome{}, err
	}
	m.mu.Lock()
	if m.cancel != nil {
		m.mu.Unlock()
		return Outcome{}, ErrLoadRunning
	}
	ctx, cancel := context.WithCancel(m.c.context())
	m.cancel = cancel
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.cancel = nil
		m.mu.Unlock()
		cancel()
	}()
	err = m.gen.Preload(ctx, mdl.Path, func(done, total int) {
		m.c.send(EventModelProgress, ModelProgress{ModelID: id, Done: done, Total: total})
	})
	switch {
	case err == nil:
		return Outcome{Kind: OutcomeLoaded, Message: "Loaded."}, nil
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return Outcome{Kind: OutcomeCancelled, Message: "Cancelled."}, nil
	}
	return Outcome{}, err
}

// CancelLoad stops the running Load; false when none runs.
func (m *Models) CancelLoad() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cancel == nil {
		return false
	}
	m.cancel()
	return true
}
