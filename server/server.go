// Package server is anechat's local OpenAI-compatible HTTP API: GET
// /v1/models, POST /v1/chat/completions and POST /v1/completions, streamed
// or not, and the same in Ollama's API (ollama.go), on the engine through internal/sessions (the app's chat runs on the
// same code). It is faster than a server that forgets: a request resumes
// from the KV of the longest prefix an earlier one left, in memory or in the
// data directory's snapshot store, and speculation drafts from the request's
// own text and from earlier requests.
//
// It is safe by default: every request needs the bearer token; the Host
// header must name the address it listens on (a loopback name, or the host
// it was told), so a web page cannot reach it by DNS rebinding; no CORS
// unless an origin is given. One model generates one reply at a time; the
// others wait in a bounded FIFO and, past it, are refused with 503.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"anechat/engine/spec"
	"anechat/internal/sessions"
)

// DefaultPort is the port `anechat serve` and the app's API switch listen on.
const DefaultPort = 11435

// DefaultQueue is how many requests may wait for the model when Config
// leaves it unset.
const DefaultQueue = 16

// maxBody caps a request body; a larger one is refused with 413.
const maxBody = 16 << 20

// The defaults of Config's limits on connections (RELIABILITY.md, "HTTP
// API: idle and trickling clients, paths in errors"). A request's headers
// come in one packet and a body of at most maxBody in well under a minute
// on any link a local API is used over; a streamed reply writes an event
// per token, so a write blocked for WriteTimeout means the client stopped
// reading; a client that keeps a connection for later uses it within
// seconds. Connections cost a file descriptor each in a process that also
// holds the database, the model's files and snapshots.
const (
	// DefaultHeaderTimeout is Config.HeaderTimeout's default.
	DefaultHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout is Config.ReadTimeout's default.
	DefaultReadTimeout = time.Minute
	// DefaultWriteTimeout is Config.WriteTimeout's default.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultIdleTimeout is Config.IdleTimeout's default.
	DefaultIdleTimeout = 30 * time.Second
	// DefaultMaxConns is Config.MaxConns's least default.
	DefaultMaxConns = 64
)

// Model is a model the server serves.
type Model struct {
	// ID is the name requests give as "model" and GET /v1/models lists.
	ID string
	// Path is the model's file or directory.
	Path string
	// Created is when it was added (GET /v1/models reports it).
	Created time.Time
}

// public is e as a client may read it. The engine's errors name the
// model's files, as the log and the CLI want; a client knows the model by
// its ID and has no business with the server's file system, so the model's
// path, in each form the loader may name it, becomes its ID.
func (m Model) public(e *apiError) *apiError {
	if m.Path == "" {
		return e
	}
	forms := []string{m.Path, filepath.Clean(m.Path)}
	if abs, err := filepath.Abs(m.Path); err == nil {
		forms = append(forms, abs)
	}
	// Longest first: a form that is part of another must not split it.
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
	c := *e
	for _, f := range forms {
		c.msg = strings.ReplaceAll(c.msg, f, m.ID)
	}
	return &c
}

// Defaults are what a request that does not say gets.
type Defaults struct {
	// Width is the speculation width: 1 = off, 2..8, 0 = auto.
	Width int
	// MaxTokens caps a reply; 0 = until a stop or the end of the context.
	MaxTokens int
	// Temperature 0 is greedy decoding.
	Temperature float64
}

// DefaultDefaults are the defaults of `anechat serve`: those of `anechat
// generate`.
func DefaultDefaults() Defaults { return Defaults{Width: spec.DefaultWidth} }

// Config configures a Server.
type Config struct {
	// Sessions runs the replies (shared with the app's chat in the app).
	Sessions *sessions.Manager
	// Models lists the models served, asked at each request (the app's
	// default model can change while it runs). Required.
	Models func(ctx context.Context) ([]Model, error)
	// Defaults, if not nil, gives the defaults at each request; nil means
	// DefaultDefaults.
	Defaults func(ctx context.Context) Defaults
	// Token is the bearer token every request must carry. Required.
	Token string
	// Host is the host name or address the server was told to listen on
	// ("" = 127.0.0.1); besides the loopback names of a loopback address,
	// it is the one name the Host header may carry.
	Host string
	// CORS, if not "", is the one origin (or "*") whose pages may call the
	// API from a browser; "" sends no CORS headers.
	CORS string
	// Queue is how many requests may wait while one runs; 0 = DefaultQueue.
	Queue int
	// HeaderTimeout bounds the arrival of a request's line and headers;
	// ReadTimeout that of the whole request, body included (a body still
	// arriving then is refused with 408). Neither bounds the reply. Zero
	// durations here and below take the Default values.
	HeaderTimeout, ReadTimeout time.Duration
	// WriteTimeout bounds each write of a reply (each event of a stream),
	// not the whole reply: a client that stops reading is dropped, a
	// slow generation is not.
	WriteTimeout time.Duration
	// IdleTimeout is how long a kept-alive connection may wait for its
	// next request.
	IdleTimeout time.Duration
	// MaxConns caps the open connections; past it, the oldest connection
	// that never sent the token is closed (then the oldest idle one), and
	// when every connection is serving a request the next one waits. 0 =
	// DefaultMaxConns, or twice the requests the queue holds if more.
	MaxConns int
	// Log receives a line per request and what went wrong; nil discards.
	Log *slog.Logger
}

// Server serves the API. Make one with New and run it with Serve.
type Server struct {
	cfg   Config
	log   *slog.Logger
	queue *fifo
}

// New checks cfg and returns a server.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Sessions == nil:
		return nil, errors.New("server: no sessions manager")
	case cfg.Models == nil:
		return nil, errors.New("server: no model list")
	case len(cfg.Token) < 16:
		return nil, errors.New("server: the bearer token must be at least 16 characters")
	}
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueue
	}
	if cfg.MaxConns <= 0 {
		// Every request the queue holds, and as many again for kept-alive
		// connections and arrivals.
		cfg.MaxConns = max(DefaultMaxConns, 2*(cfg.Queue+1))
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&cfg.HeaderTimeout, DefaultHeaderTimeout}, {&cfg.ReadTimeout, DefaultReadTimeout},
		{&cfg.WriteTimeout, DefaultWriteTimeout}, {&cfg.IdleTimeout, DefaultIdleTimeout}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if cfg.Defaults == nil {
		cfg.Defaults = func(context.Context) Defaults { return DefaultDefaults() }
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, log: log, queue: newFIFO(cfg.Queue)}, nil
}

// Serve answers requests on ln until ctx ends, then stops: running
// generations are cancelled (their clients see the stream end) and Serve
// returns once every handler has returned. It closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hosts, err := newHostCheck(s.cfg.Host, ln.Addr())
	if err != nil {
		ln.Close()
		return err
	}
	// Requests' contexts derive from reqCtx: cancelling it at the end stops
	// every generation between two model calls.
	reqCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	limit := newConnLimit(ln, s.cfg.MaxConns, s.cfg.WriteTimeout, s.log)
	// No http.Server WriteTimeout: it would bound the whole reply, and a
	// streamed generation may take minutes; conn.Write bounds each write.
	// ReadTimeout's deadline is lifted once the body is read, so it does
	// not end a long reply.
	hs := &http.Server{
		Handler:           s.handler(hosts),
		ReadHeaderTimeout: s.cfg.HeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		ConnState:         limit.track,
		ConnContext:       withConn,
		BaseContext:       func(net.Listener) context.Context { return reqCtx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(limit) }()
	select {
	case err := <-done:
		return fmt.Errorf("server: %w", err)
	case <-ctx.Done():
	}
	cancel()
	if err := hs.Shutdown(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("server: shut down: %w", err)
	}
	<-done
	return nil
}

// handler routes the API behind the host, CORS and token checks.
func (s *Server) handler(hosts hostCheck) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", s.listModels)
	mux.HandleFunc("GET /v1/models/{id...}", s.getModel)
	mux.HandleFunc("POST /v1/chat/completions", s.completion(func() request { return &chatRequest{} }))
	mux.HandleFunc("POST /v1/completions", s.completion(func() request { return &completionRequest{} }))
	s.ollamaRoutes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeErrorFor(w, r, apiErr(http.StatusNotFound, "", "not_found", "no such endpoint: %s %s (this server has GET /v1/models, POST /v1/chat/completions and POST /v1/completions, and Ollama's POST /api/chat, POST /api/generate, GET /api/tags, POST /api/show and GET /api/version)", r.Method, r.URL.Path))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hosts.allowed(r.Host) {
			// A page that rebound its own name to this address lands here.
			writeErrorFor(w, r, &apiError{status: http.StatusForbidden, typ: "permission_error", code: "host_not_allowed", close: true,
				msg: fmt.Sprintf("the Host header %q is not an address this server listens on (%s)", r.Host, hosts)})
			return
		}
		if s.cors(w, r) {
			return // a preflight, answered
		}
		if !s.authorized(r) {
			// Closed after the answer (close): a client without the token
			// keeps no connection, and file descriptor, open.
			w.Header().Set("WWW-Authenticate", `Bearer realm="anechat"`)
			writeErrorFor(w, r, &apiError{status: http.StatusUnauthorized, typ: "authentication_error", code: "invalid_api_key", close: true,
				msg: "missing or wrong bearer token: send `Authorization: Bearer TOKEN` with the token `anechat serve` prints (kept in the data directory's " + TokenFile + ")"})
			return
		}
		serving(r)
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		mux.ServeHTTP(w, r)
	})
}

// cors adds the CORS headers for the configured origin and answers a
// preflight (true). Without an origin configured it adds nothing: browsers
// then refuse pages of other origins.
func (s *Server) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if s.cfg.CORS == "" || origin == "" || (s.cfg.CORS != "*" && origin != s.cfg.CORS) {
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", s.cfg.CORS)
	h.Add("Vary", "Origin")
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		return false
	}
	h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
	return true
}

// models returns the served models, or an error for the client.
func (s *Server) models(ctx context.Context) ([]Model, *apiError) {
	ms, err := s.cfg.Models(ctx)
	if err != nil {
		return nil, &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "no_model", msg: err.Error()}
	}
	return ms, nil
}

// model finds the model a request names: 404 when none is served by that
// name.
func (s *Server) model(ctx context.Context, name string) (Model, *apiError) {
	ms, e := s.models(ctx)
	if e != nil {
		return Model{}, e
	}
	ids := make([]string, len(ms))
	for i, m := range ms {
		if m.ID == name {
			return m, nil
		}
		ids[i] = m.ID
	}
	return Model{}, apiErr(http.StatusNotFound, "model", "model_not_found", "the model %q is not served here (GET /v1/models lists %s)", name, strings.Join(ids, ", "))
}

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func toObject(m Model) modelObject {
	o := modelObject{ID: m.ID, Object: "model", OwnedBy: "anechat"}
	if !m.Created.IsZero() {
		o.Created = m.Created.Unix()
	}
	return o
}

func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	ms, e := s.models(r.Context())
	if e != nil {
		writeError(w, e)
		return
	}
	out := struct {
		Object string        `json:"object"`
		Data   []modelObject `json:"data"`
	}{Object: "list", Data: []modelObject{}}
	for _, m := range ms {
		out.Data = append(out.Data, toObject(m))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getModel(w http.ResponseWriter, r *http.Request) {
	m, e := s.model(r.Context(), r.PathValue("id"))
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, toObject(m))
}
