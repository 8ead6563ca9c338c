// Package app holds the services bound to the desktop window: Chat, Library,
// Settings, Models and System. Each exported method of a service is callable
// from the frontend; long work reports back through events. The services work
// on storage and, through the small Generator interface, on the engine; they
// know nothing of Wails, so plain Go tests drive them.
package app

import (
	"anechat/internal/catalog"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"anechat/engine/load"
	"anechat/internal/backends"
	"anechat/internal/kvindex"
	"anechat/internal/secrets"
	"anechat/storage"
)

// Emitter sends an event to the window. desktop.go implements it with the
// Wails runtime; tests record the events.
type Emitter interface {
	Emit(name string, data any)
}

// Options configures New.
type Options struct {
	// Log receives the services' diagnostics; nil discards them.
	Log *slog.Logger
	// DataDir is the data directory; "" resolves it with storage.DataDir
	// ($ANECHAT_HOME, else the OS default).
	DataDir string
	// Version is the program version System.Info reports.
	Version string
	// Generator runs the model for Chat; nil means no engine is available
	// and sending a message fails with ErrNoEngine.
	Generator Generator
	// Backends validates and opens models (the Models page's scan); nil
	// means this build's backends (internal/backends).
	Backends *load.Registry
	// Open shows a directory in the desktop's file manager
	// (System.OpenDataDir); nil means xdg-open, or open on macOS.
	Open func(ctx context.Context, path string) error
	// Dialogs asks the user for a folder or file (the window's native
	// dialogs); nil when there is no window: System.ChooseFolder then fails.
	Dialogs Dialogs
	// Now is the clock (the undo window of deleted conversations, download
	// speeds); nil means time.Now.
	Now func() time.Time
	// HTTP is the client downloads use; nil means one with no overall
	// timeout (a model takes long). Downloads follow its redirects only as
	// far as the URL rule allows (download.Fetch holds each hop to it).
	HTTP *http.Client
	// Headless is a command-line use of the services (anechat pull), with
	// no window: Startup opens storage and picks up interrupted downloads,
	// and starts nothing the window owns (no HTTP API left switched on, no
	// scan of the models folder, no purge of deleted conversations).
	Headless bool
	// HubURL is the Hugging Face Hub (or a mirror) the catalog and the
	// search talk to; "" means $ANECHAT_HUB, else huggingface.co
	// (hub.BaseURL), so tests and the e2e run point it at a fake Hub.
	HubURL string
	// Machine is what the catalog's fit is judged against; zero means
	// this machine (catalog.ThisMachine).
	Machine catalog.Machine
	// Secrets keeps the Hugging Face access token the user pastes in
	// Settings; nil means secrets.Default: the login keychain on macOS, a
	// 0600 file in the data dir elsewhere.
	Secrets secrets.Store
	// HubToken, when set, is the access token the Hub client sends instead
	// of the stored one (`anechat pull` passes $HF_TOKEN).
	HubToken string
}

// App owns the services and what they share.
type App struct {
	core      *core
	Chat      *Chat
	Library   *Library
	Settings  *Settings
	Models    *Models
	System    *System
	Downloads *Downloads
	// CoreML is the compute-units setting, what runs the loaded model and
	// loading a model ahead of the first reply (app/coreml.go).
	CoreML *CoreML
	API    *API
	// Catalog is the curated models and the Hugging Face search of the
	// Models page (app/catalog.go).
	Catalog *Catalog
}

// core is the state every service shares: the database (or why it could not
// be opened), the event sink and the window's lifetime.
type core struct {
	log     *slog.Logger
	opts    Options
	mu      sync.Mutex
	ctx     context.Context // cancelled at Shutdown
	cancel  context.CancelFunc
	emit    Emitter
	dataDir string
	store   *storage.DB
	openErr error // why the data dir or database is unusable, nil if fine
	// registry validates and opens models.
	registry *load.Registry
	// onToken are called when the Hugging Face token changed (the catalog
	// forgets what the Hub said without it).
	onToken []func()
}

// tokenChanged runs the onToken hooks.
func (c *core) tokenChanged() {
	for _, f := range c.onToken {
		f()
	}
}

// now is the app's clock.
func (c *core) now() time.Time {
	if c.opts.Now != nil {
		return c.opts.Now()
	}
	return time.Now()
}

// ErrNotStarted is returned by a service called before Startup.
var ErrNotStarted = errors.New("app: not started yet (the window calls Startup first)")

// New builds the services. They become usable after Startup.
func New(opts Options) *App {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := opts.Backends
	if reg == nil {
		reg = backends.Registry()
	}
	c := &core{log: log, opts: opts, openErr: ErrNotStarted, registry: reg}
	a := &App{core: c}
	a.Settings = &Settings{c: c}
	eg, _ := opts.Generator.(*EngineGenerator) // nil for another Generator: Models.Load then says there is no engine
	a.Models = &Models{c: c, settings: a.Settings, gen: eg}
	a.Chat = &Chat{c: c, settings: a.Settings, models: a.Models, gen: opts.Generator, streams: map[int64]*stream{},
		titles: map[int64]*titleJob{}}
	a.Library = &Library{c: c, gen: opts.Generator, models: a.Models}
	a.Chat.library = a.Library
	a.System = &System{c: c, models: a.Models, settings: a.Settings}
	a.Downloads = &Downloads{c: c, models: a.Models, jobs: map[string]*dlJob{},
		retries: defaultRetries, retryDelay: defaultRetryDelay, progressEvery: defaultProgressEvery}
	a.CoreML = NewCoreMLService(a, eg)
	a.API = &API{c: c, models: a.Models, settings: a.Settings}
	a.Catalog = &Catalog{c: c, downloads: a.Downloads, sizes: map[string]entrySize{}}
	c.onToken = append(c.onToken, a.Catalog.forgetSizes)
	return a
}

// Startup resolves the data directory and opens the database; ctx lives as
// long as the window. A failure (unwritable directory, corrupt database) is
// kept: every service call then returns it, and System.Info shows it, so the
// window can tell the user which path is wrong and what to do.
//
// Once storage is open it scans the models folder, so a model put there (such
// as the SmolLM2 that `make run` fetches on Linux) is registered and, if no
// default is set yet, becomes the default (see preferredDefault).
func (a *App) Startup(ctx context.Context, emit Emitter) {
	if !a.open(ctx, emit) {
		return
	}
	if a.core.opts.Headless {
		a.Downloads.restore()
		return
	}
	a.Chat.purge()
	a.Downloads.restore()
	// The stored compute units apply from the first load; a bad stored
	// value leaves the default (Settings shows the error and stores a valid one).
	if err := a.CoreML.Apply(); err != nil {
		a.core.log.Warn("Core ML compute units not applied", "err", err)
	}
	// A scan failure leaves the models page to show it; the app still works.
	if res, err := a.Models.Scan(); err != nil {
		a.core.log.Warn("models folder scan at start failed", "err", err)
	} else {
		for _, p := range res.Problems {
			a.core.log.Warn("not a readable model", "path", p.Path, "err", p.Error)
		}
	}
	a.API.restore() // the HTTP API switch, if left on
}

// open resolves the data directory and opens the database and the KV index;
// false if that failed (the reason is kept in core.openErr).
func (a *App) open(ctx context.Context, emit Emitter) bool {
	c := a.core
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ctx, c.cancel = context.WithCancel(ctx)
	c.emit = emit
	c.openErr = nil
	dir, err := storage.DataDir(c.opts.DataDir, c.log)
	if err != nil {
		c.openErr = fmt.Errorf("app: data directory: %w", err)
		c.log.Error("data directory unusable", "err", err)
		return false
	}
	c.dataDir = dir
	s, err := storage.Open(ctx, storage.DBPath(dir))
	if err != nil {
		c.openErr = fmt.Errorf("app: database: %w", err)
		c.log.Error("database unusable", "err", err)
		return false
	}
	if u, ok := c.opts.Generator.(StorageUser); ok {
		x, err := kvindex.New(ctx, s, storage.KVPath(dir), c.log)
		if err != nil { // kvindex.New closed the database
			c.openErr = fmt.Errorf("app: KV snapshot index: %w", err)
			c.log.Error("kv snapshot index unusable", "err", err)
			return false
		}
		// The settings table keeps the measured call costs per model.
		u.UseStorage(x, s)
	}
	c.store = s
	c.log.Info("storage open", "path", s.Path(), "schema", s.SchemaVersion())
	return true
}

// Shutdown cancels running generations and closes the database.
func (a *App) Shutdown() {
	c := a.core
	c.mu.Lock()
	cancel, s := c.cancel, c.store
	c.store, c.openErr = nil, errors.New("app: shut down")
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	a.Chat.wait()
	a.Downloads.wait()
	a.API.stop()
	if u, ok := c.opts.Generator.(StorageUser); ok {
		u.UseStorage(nil, nil) // both live on the database closed below
	}
	if s != nil {
		if err := s.Close(); err != nil {
			c.log.Error("close database", "err", err)
		}
	}
}

// Services lists the values whose methods are bound to the window.
func (a *App) Services() []any {
	return []any{a.Chat, a.Library, a.Settings, a.Models, a.System, a.Downloads, a.CoreML, a.API, a.Catalog}
}

// db returns the open database, or why there is none.
func (c *core) db() (*storage.DB, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.store == nil {
		return nil, c.openErr
	}
	return c.store, nil
}

// context is the window's context (cancelled at Shutdown).
func (c *core) context() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == nil {
		return context.Background()
	}
	return c.ctx
}

// send emits an event if there is a window.
func (c *core) send(name string, data any) {
	c.mu.Lock()
	e := c.emit
	c.mu.Unlock()
	if e != nil {
		e.Emit(name, data)
	}
}
