package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"anechat/internal/sessions"
	"anechat/server"
	"anechat/storage"
)

// Settings keys of the API switch.
const (
	keyAPIEnabled = "api.enabled"
	keyAPIPort    = "api.port"
)

// API is the Settings switch (off by default) that serves the
// OpenAI-compatible HTTP API of `anechat serve` (package server) from inside
// the app: on 127.0.0.1 only, with the data directory's bearer token, on
// the app's default model and the same sessions manager as Chat, so a request and a
// chat reply take turns on one loaded model and share its KV and drafting
// corpus. The switch is stored: an app closed with it on starts it again.
type API struct {
	c        *core
	models   *Models
	settings *Settings

	mu      sync.Mutex
	running *apiRun
	lastErr string // why the last start failed, or the server stopped
}

// apiRun is a running server.
type apiRun struct {
	cancel context.CancelFunc
	done   chan struct{}
	url    string
	port   int
}

// APIStatus is the switch's state, for the Settings page.
type APIStatus struct {
	// Running: the server answers at URL.
	Running bool `json:"running"`
	// Enabled: the switch is on (stored; the server starts with the app).
	Enabled bool `json:"enabled"`
	// URL is the API's base URL (http://127.0.0.1:PORT/v1); "" when stopped.
	URL string `json:"url"`
	// OllamaHost is where the clients that speak only Ollama's API point
	// (their OLLAMA_HOST: the same server, its /api routes); "" when stopped.
	OllamaHost string `json:"ollamaHost"`
	// Port is the port it listens on, or will at the next Start.
	Port int `json:"port"`
	// Token is the bearer token requests need (`Authorization: Bearer
	// TOKEN`), kept in TokenFile in the data directory.
	Token     string `json:"token"`
	TokenFile string `json:"tokenFile"`
	// Model is the name requests give as "model": the default model; ""
	// when none is chosen.
	Model string `json:"model"`
	// Error says why the server is not running although enabled (the port
	// is taken, no engine), "" otherwise.
	Error string `json:"error"`
}

// sessionsOwner is a Generator whose replies run on an internal/sessions
// Manager (EngineGenerator), which the API then shares.
type sessionsOwner interface {
	Sessions() *sessions.Manager
}

// Status reports the switch and the server.
func (a *API) Status() (APIStatus, error) {
	d, err := a.c.db()
	if err != nil {
		return APIStatus{}, err
	}
	ctx := a.c.context()
	st := APIStatus{Port: server.DefaultPort}
	if _, err := d.GetSetting(ctx, keyAPIEnabled, &st.Enabled); err != nil {
		return APIStatus{}, fmt.Errorf("api: %w", err)
	}
	var port int
	if _, err := d.GetSetting(ctx, keyAPIPort, &port); err != nil {
		return APIStatus{}, fmt.Errorf("api: %w", err)
	}
	if port > 0 {
		st.Port = port
	}
	if tok, err := server.LoadToken(a.dataDir()); err == nil {
		st.Token, st.TokenFile = tok, filepath.Join(a.dataDir(), server.TokenFile)
	}
	if m, err := a.models.resolve(0); err == nil {
		st.Model = modelID(m)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.running != nil {
		st.Running, st.URL, st.Port = true, a.running.url, a.running.port
		st.OllamaHost = strings.TrimSuffix(a.running.url, "/v1")
	}
	if st.Enabled && !st.Running {
		st.Error = a.lastErr
	}
	return st, nil
}

// Start turns the switch on and starts the server on port (0: the port
// stored, else server.DefaultPort). A running server on another port is
// restarted on the new one. It fails, naming the port, when the port is
// taken; the switch stays on (and Status says why it is not running).
func (a *API) Start(port int) (APIStatus, error) {
	if port < 0 || port > 65535 {
		return APIStatus{}, fmt.Errorf("api: port %d: want 1 to 65535, or 0 for the default %d", port, server.DefaultPort)
	}
	d, err := a.c.db()
	if err != nil {
		return APIStatus{}, err
	}
	ctx := a.c.context()
	if port == 0 {
		if _, err := d.GetSetting(ctx, keyAPIPort, &port); err != nil || port <= 0 {
			port = server.DefaultPort
		}
	}
	for _, kv := range []struct {
		key string
		v   any
	}{{keyAPIEnabled, true}, {keyAPIPort, port}} {
		if err := d.SetSetting(ctx, kv.key, kv.v); err != nil {
			return APIStatus{}, fmt.Errorf("api: %w", err)
		}
	}
	if err := a.start(port); err != nil {
		st, _ := a.Status()
		return st, err
	}
	return a.Status()
}

// Stop turns the switch off and stops the server: running requests are
// cancelled.
func (a *API) Stop() (APIStatus, error) {
	d, err := a.c.db()
	if err != nil {
		return APIStatus{}, err
	}
	if err := d.SetSetting(a.c.context(), keyAPIEnabled, false); err != nil {
		return APIStatus{}, fmt.Errorf("api: %w", err)
	}
	a.stop()
	a.mu.Lock()
	a.lastErr = ""
	a.mu.Unlock()
	return a.Status()
}

// restore starts the server at app start when the switch is on; a failure
// is kept for Status.
func (a *API) restore() {
	st, err := a.Status()
	if err != nil || !st.Enabled {
		return
	}
	if err := a.start(st.Port); err != nil {
		a.c.log.Warn("api: not started", "err", err)
	}
}

// start runs the server on port unless it already runs there.
func (a *API) start(port int) error {
	a.mu.Lock()
	if a.running != nil && a.running.port == port {
		a.mu.Unlock()
		return nil
	}
	a.mu.Unlock()
	a.stop()
	err := a.listen(port)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lastErr = ""
	if err != nil {
		a.lastErr = err.Error()
	}
	return err
}

// listen starts a server on 127.0.0.1:port.
func (a *API) listen(port int) error {
	ro, ok := a.c.opts.Generator.(sessionsOwner)
	if !ok {
		return fmt.Errorf("api: %w", ErrNoEngine)
	}
	token, err := server.LoadToken(a.dataDir())
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	srv, err := server.New(server.Config{Sessions: ro.Sessions(), Token: token, Log: a.c.log,
		Models: func(context.Context) ([]server.Model, error) {
			m, err := a.models.resolve(0)
			if err != nil {
				return nil, err
			}
			return []server.Model{{ID: modelID(m), Path: m.Path, Created: m.AddedAt}}, nil
		},
		Defaults: func(context.Context) server.Defaults {
			p, err := a.settings.Get()
			if err != nil {
				p = DefaultPreferences()
			}
			return server.Defaults{Width: int(p.SpeculationWidth), MaxTokens: p.MaxTokens, Temperature: p.Temperature}
		}})
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("api: listen on 127.0.0.1 port %d: %w (another program uses it? choose another port)", port, err)
	}
	ctx, cancel := context.WithCancel(a.c.context())
	r := &apiRun{cancel: cancel, done: make(chan struct{}), port: ln.Addr().(*net.TCPAddr).Port}
	r.url = "http://" + ln.Addr().String() + "/v1"
	go func() {
		defer close(r.done)
		if err := srv.Serve(ctx, ln); err != nil && !errors.Is(err, net.ErrClosed) {
			a.c.log.Error("api: server stopped", "err", err)
			a.mu.Lock()
			a.lastErr = err.Error()
			a.mu.Unlock()
		}
		a.mu.Lock()
		if a.running == r {
			a.running = nil
		}
		a.mu.Unlock()
	}()
	a.mu.Lock()
	a.running = r
	a.mu.Unlock()
	a.c.log.Info("api: serving", "url", r.url)
	return nil
}

// stop stops a running server and waits for it.
func (a *API) stop() {
	a.mu.Lock()
	r := a.running
	a.running = nil
	a.mu.Unlock()
	if r != nil {
		r.cancel()
		<-r.done
	}
}

// dataDir is the data directory in use.
func (a *API) dataDir() string {
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	return a.c.dataDir
}

// modelID is the name a model is served under: its registered name, else
// its file's.
func modelID(m storage.Model) string {
	if m.Name != "" {
		return m.Name
	}
	return strings.TrimSuffix(filepath.Base(m.Path), filepath.Ext(m.Path))
}
