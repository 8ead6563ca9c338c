package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"anechat/internal/atomicfile"
	"anechat/internal/backends"
	"anechat/storage"
)

// System reports facts about the running program to the window.
type System struct {
	c        *core
	models   *Models
	settings *Settings
}

// SystemInfo is what the window's status bar and error banner show.
type SystemInfo struct {
	Version string `json:"version"`
	OS      string `json:"os"`
	Arch    string `json:"arch"`
	Go      string `json:"go"`
	// DataDir is the data directory in use ("" if it could not be resolved).
	DataDir string `json:"dataDir"`
	// Database is the database file, SchemaVersion its schema version.
	Database      string `json:"database"`
	SchemaVersion int    `json:"schemaVersion"`
	// StorageError says why the data directory or database is unusable
	// (naming the path and what to do); "" when storage works.
	StorageError string `json:"storageError"`
	// Engine says whether a model can run; "" if it can.
	EngineError string `json:"engineError"`
}

// Info returns the version, the platform and the state of storage.
func (s *System) Info() SystemInfo {
	info := SystemInfo{Version: s.c.opts.Version, OS: runtime.GOOS, Arch: runtime.GOARCH, Go: runtime.Version()}
	s.c.mu.Lock()
	info.DataDir = s.c.dataDir
	if s.c.store != nil {
		info.Database = s.c.store.Path()
		info.SchemaVersion = s.c.store.SchemaVersion()
	} else if s.c.openErr != nil {
		info.StorageError = s.c.openErr.Error()
	}
	s.c.mu.Unlock()
	if s.c.opts.Generator == nil {
		info.EngineError = ErrNoEngine.Error()
	}
	return info
}

// BackendInfo says which backend runs the default model and why, for the
// Settings page.
type BackendInfo struct {
	// Backend names the backend that runs the default model ("cpu"); ""
	// when there is no default model or none here runs it.
	Backend string `json:"backend"`
	// Model is the default model's name, "" for none.
	Model string `json:"model"`
	// Why explains the choice in a sentence.
	Why string `json:"why"`
	// Available lists the backends this build has, most preferred first.
	Available []string `json:"available"`
	// CoreML says whether this build runs Core ML bundles (Gemma 4 on the
	// Neural Engine) and, when not, why.
	CoreML string `json:"coreML"`
}

// Backend reports the backend in use for the default model, and why not
// Core ML here.
func (s *System) Backend() (BackendInfo, error) {
	info := BackendInfo{Available: []string{}, CoreML: backends.CoreMLStatus(runtime.GOOS, runtime.GOARCH)}
	for _, b := range s.c.registry.Loaders() {
		info.Available = append(info.Available, b.Name())
	}
	mdl, err := s.models.resolve(0)
	switch {
	case errors.Is(err, ErrNoModel):
		info.Why = "no default model is chosen: choose one on the Models page"
		return info, nil
	case err != nil:
		return BackendInfo{}, err
	}
	info.Model = mdl.Name
	m := metaOf(mdl)
	switch {
	case m.Unsupported != "":
		info.Why = fmt.Sprintf("%s is a %s model no backend of this build runs: %s", mdl.Name, mdl.Kind, m.Unsupported)
	case m.Backend == "":
		info.Why = fmt.Sprintf("%s was registered before backends were recorded: press Scan on the Models page", mdl.Name)
	case mdl.Kind == KindCoreML:
		info.Backend = m.Backend
		info.Why = "it is a Core ML bundle, made for the Apple Neural Engine"
	default:
		info.Backend = m.Backend
		// Where Core ML runs is said once, beside its setting (CoreML.Settings).
		what := "a " + mdl.Kind + " model"
		switch mdl.Kind {
		case KindGGUF:
			what = "a GGUF file"
		case KindSafetensors:
			what = "a safetensors checkpoint"
		}
		info.Why = fmt.Sprintf("it is %s; Core ML runs only Core ML bundles (Gemma 4 converted for the Neural Engine)", what)
	}
	return info, nil
}

// OpenDataDir shows the data directory in the desktop's file manager.
func (s *System) OpenDataDir() error {
	s.c.mu.Lock()
	dir := s.c.dataDir
	s.c.mu.Unlock()
	if dir == "" {
		return errors.New("system: the data directory is not known yet")
	}
	open := s.c.opts.Open
	if open == nil {
		open = OpenWithDesktop
	}
	if err := open(s.c.context(), dir); err != nil {
		return fmt.Errorf("system: open %s: %w (open it yourself: the path is shown above)", dir, err)
	}
	return nil
}

// OpenWithDesktop opens path with the desktop's default application: open
// on macOS, xdg-open elsewhere. It waits only for the launcher to start.
func OpenWithDesktop(ctx context.Context, path string) error {
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	cmd := exec.CommandContext(context.WithoutCancel(ctx), name, path)
	cmd.Env = launchEnv()
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait() // reap it; the file manager outlives it
	return nil
}

// OriginalEnvPrefix marks the variables desktop.go set aside before it
// pointed XDG_DATA_HOME and XDG_CACHE_HOME at the data directory (so the
// web view keeps its files there): ANECHAT_ORIG_XDG_DATA_HOME holds the
// value the user had ("" for unset). Programs the app starts get the user's
// own values back.
const OriginalEnvPrefix = "ANECHAT_ORIG_"

// launchEnv is the environment for a program the app starts: the user's
// own, with what desktop.go changed put back.
func launchEnv() []string {
	var out []string
	restore := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if name, ok := strings.CutPrefix(k, OriginalEnvPrefix); ok {
			restore[name] = v
		}
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := restore[k]; ok || strings.HasPrefix(k, OriginalEnvPrefix) {
			continue
		}
		out = append(out, kv)
	}
	for k, v := range restore {
		if v != "" {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// Dialogs are the window's native file dialogs (desktop.go implements them
// with the Wails runtime). Each returns "" when the user cancels.
type Dialogs interface {
	ChooseFolder(ctx context.Context, title string) (string, error)
	// SaveFile asks where to save a file, offering name in the user's
	// documents; the path chosen.
	SaveFile(ctx context.Context, title, name string) (string, error)
}

// ChooseFolder asks the user for a folder (a Core ML bundle to import);
// "" when they cancel.
func (s *System) ChooseFolder(title string) (string, error) {
	if s.c.opts.Dialogs == nil {
		return "", errors.New("system: no window to show a folder dialog in: type the folder's path instead")
	}
	return s.c.opts.Dialogs.ChooseFolder(s.c.context(), title)
}

// SaveFile asks the user where to save f (the window's save dialog,
// offering f.FileName) and writes f.Text there: the path written, or ""
// when they cancel. The web view cannot download a file itself, so
// exports (Chat.Export, Library.Export) are saved through here. The file
// is written atomically (atomicfile), readable by the user's other
// programs, so a file already there is replaced whole or not at all.
func (s *System) SaveFile(title string, f ExportFile) (string, error) {
	if s.c.opts.Dialogs == nil {
		return "", errors.New("system: no window to show a save dialog in: copy the text instead")
	}
	name := filepath.Base(strings.TrimSpace(f.FileName))
	if name == "." || name == string(filepath.Separator) || name == "" {
		name = "export.txt"
	}
	path, err := s.c.opts.Dialogs.SaveFile(s.c.context(), title, name)
	if err != nil || path == "" {
		return "", err
	}
	var placed *atomicfile.SyncDirError
	switch err := atomicfile.WriteFile(path, []byte(f.Text), 0o644); {
	case errors.As(err, &placed):
		// Saved; only the folder's sync failed (some network or removable
		// volumes cannot sync a directory): not a failure to show.
		s.c.log.Warn("export saved, its folder not synced", "path", path, "err", err)
	case err != nil:
		return "", fmt.Errorf("system: save %s: %w (choose another folder, or copy the text instead)", path, err)
	}
	return path, nil
}

// Example is a prompt the first run offers.
type Example struct {
	Title string `json:"title"`
	Text  string `json:"text"`
}

// FirstRun is what an empty window shows: the model that answers, and
// example prompts to start with.
type FirstRun struct {
	// Empty: there are no conversations yet.
	Empty bool `json:"empty"`
	// DefaultModel is the model new conversations use, nil for none
	// (NoModel then says what to do).
	DefaultModel *storage.Model `json:"defaultModel"`
	NoModel      string         `json:"noModel"`
	// ModelsDir is where to put models.
	ModelsDir string    `json:"modelsDir"`
	Examples  []Example `json:"examples"`
}

// examples are the first run's three prompts: short, and answerable by a
// small model.
var examples = []Example{
	{Title: "Explain an idea", Text: "Explain in three sentences why the sky is blue."},
	{Title: "Write", Text: "Write a four-line poem about a lighthouse keeper."},
	{Title: "Code", Text: "Write a Python function that checks whether a string is a palindrome, with a short example."},
}

// FirstRun returns the default model and three example prompts.
func (s *System) FirstRun() (FirstRun, error) {
	d, err := s.c.db()
	if err != nil {
		return FirstRun{}, err
	}
	cs, err := d.ListConversations(s.c.context(), 1, 0)
	if err != nil {
		return FirstRun{}, err
	}
	fr := FirstRun{Empty: len(cs) == 0, ModelsDir: storage.ModelsPath(s.c.dataDir), Examples: append([]Example(nil), examples...)}
	mdl, err := s.models.resolve(0)
	switch {
	case err == nil:
		fr.DefaultModel = &mdl
	case errors.Is(err, ErrNoModel):
		fr.NoModel = err.Error()
	default:
		return FirstRun{}, err
	}
	return fr, nil
}
