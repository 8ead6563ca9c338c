package cli

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"anechat/engine/spec"
	"anechat/internal/backends"
	"anechat/internal/kvindex"
	"anechat/internal/sessions"
	"anechat/server"
	"anechat/storage"
)

// serveReady is what runServe prints once it listens: the base URL and the
// token, one a line, for people and for scripts, then how Ollama's clients
// reach the same server (the ollama Python client reads both variables).
const serveReady = "anechat serve: %[1]s on %[2]s/v1\ntoken: %[3]s\nollama: OLLAMA_HOST=%[2]s OLLAMA_API_KEY=<the token>\n"

func runServe(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "serve", "[--model PATH|NAME] [--data-dir DIR] [--host 127.0.0.1] [--port 11435] [--cors ORIGIN] [--queue N] [--width K] [--max-tokens N] [--temperature T] [--compute-units U] [--warm-sessions N] [--warm-mb N] [--no-cache]")
	model := fs.String("model", "", "model file (.gguf) or directory, or the name of a model registered in the data directory (default: the data directory's default model, as for generate)")
	dataDir := fs.String("data-dir", "", "data directory: the API token, KV snapshots, measured call costs, registered models (default $ANECHAT_HOME or the OS default)")
	host := fs.String("host", "127.0.0.1", "address to listen on; anything but a loopback address exposes the API to the network (the token still guards it)")
	port := fs.Int("port", server.DefaultPort, "TCP port (0 = any free one)")
	cors := fs.String("cors", "", "the one browser origin (e.g. http://localhost:5173, or *) allowed to call the API; none by default")
	queue := fs.Int("queue", server.DefaultQueue, "requests that may wait while one runs; more are refused with 503 and Retry-After")
	width := fs.Int("width", spec.DefaultWidth, "default speculation width (a request may set anechat.width): 1 = off, 2..8, 0 = auto; output identical at every width")
	maxTokens := fs.Int("max-tokens", 0, "default cap on a reply's tokens when a request gives none (0 = until a stop or the end of the context)")
	temperature := fs.Float64("temperature", 0, "default sampling temperature when a request gives none (0 = greedy, as anechat generate)")
	warmSessions := fs.Int("warm-sessions", sessions.DefaultWarm.Sessions, "conversations whose KV stays in memory between requests, so each client's next turn resumes whatever came in between; past it (or --warm-mb) the least recently used is dropped and resumes from its snapshot on disk")
	warmMB := fs.Int64("warm-mb", sessions.DefaultWarm.Bytes>>20, "MiB of memory the warm conversations' KV may take (the one that ran last always stays)")
	units := computeUnitsFlag(fs)
	noCache := noCacheFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case *width < 0 || *width > spec.MaxWidth:
		return badFlag(env, "serve", fmt.Errorf("--width %d: want 1 (speculation off), 2..%d, or 0 (auto)", *width, spec.MaxWidth))
	case *maxTokens < 0:
		return badFlag(env, "serve", fmt.Errorf("--max-tokens %d: want a positive number, or 0 for no limit", *maxTokens))
	case math.IsNaN(*temperature) || *temperature < 0 || *temperature > 2:
		return badFlag(env, "serve", fmt.Errorf("--temperature %v: want 0 (greedy) to 2", *temperature))
	case *port < 0 || *port > 65535:
		return badFlag(env, "serve", fmt.Errorf("--port %d: want 0 to 65535", *port))
	case *queue < 1:
		return badFlag(env, "serve", fmt.Errorf("--queue %d: want at least 1", *queue))
	case *warmSessions < 1:
		return badFlag(env, "serve", fmt.Errorf("--warm-sessions %d: want at least 1 (the conversation that ran last)", *warmSessions))
	case *warmMB < 1 || *warmMB > math.MaxInt64>>20:
		return badFlag(env, "serve", fmt.Errorf("--warm-mb %d: want at least 1", *warmMB))
	case *cors != "" && *cors != "*" && !strings.Contains(*cors, "://"):
		return badFlag(env, "serve", fmt.Errorf("--cors %q: want an origin such as http://localhost:5173 (scheme, host and port), or *", *cors))
	}
	if err := checkComputeUnits(*units); err != nil {
		return badFlag(env, "serve", err)
	}
	log := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	dir, err := storage.DataDir(*dataDir, log)
	if err != nil {
		return err
	}
	token, err := server.LoadToken(dir)
	if err != nil {
		return err
	}
	served, err := servedModel(ctx, dir, *model, log)
	if err != nil {
		return err
	}
	run := sessions.New(log, backends.RegistryWith(backends.Options{ComputeUnits: *units, Log: log}))
	defer run.Close()
	if err := run.KeepWarm(sessions.Warm{Sessions: *warmSessions, Bytes: *warmMB << 20}); err != nil {
		return err // the flags were checked above
	}
	if !*noCache {
		x, err := kvindex.Open(ctx, dir, log)
		if err != nil {
			log.Warn("kv cache off: the data directory's database cannot be used", "err", err)
		} else {
			defer x.Close()
			run.UseStorage(x, x.DB())
			defer run.UseStorage(nil, nil) // before the database closes
		}
	}
	// Load the model now: a bad file fails here, not at the first request.
	if err := run.Do(ctx, served.Path, func(*sessions.Model) error { return nil }); err != nil {
		return modelError(served.Path, err)
	}
	defaults := server.Defaults{Width: *width, MaxTokens: *maxTokens, Temperature: *temperature}
	srv, err := server.New(server.Config{Sessions: run, Token: token, Host: *host, CORS: *cors, Queue: *queue, Log: log,
		Models:   func(context.Context) ([]server.Model, error) { return []server.Model{served}, nil },
		Defaults: func(context.Context) server.Defaults { return defaults }})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		return fmt.Errorf("listen on %s port %d: %w (is another server on it? pick one with --port)", *host, *port, err)
	}
	if ip := net.ParseIP(*host); ip == nil || !ip.IsLoopback() {
		log.Warn("the API listens beyond this machine: anyone who can reach it and has the token can use the model", "host", *host)
	}
	fmt.Fprintf(env.Stdout, serveReady, served.ID, baseURL(ln.Addr()), token)
	ctx, stop := interruptible(ctx)
	defer stop()
	return srv.Serve(ctx, ln)
}

// baseURL is the http:// address of a listener, as clients reach it.
func baseURL(a net.Addr) string {
	ta := a.(*net.TCPAddr)
	host := ta.IP.String()
	if ta.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(ta.Port))
}

// servedModel resolves --model: a model file or directory (named as the data
// directory registered it, else after its file), or the name of a
// registered model; with no --model, the data directory's default model
// (defaultModelPath, as generate and chat pick it).
func servedModel(ctx context.Context, dataDir, arg string, log *slog.Logger) (server.Model, error) {
	var regs []storage.Model
	if d, err := storage.Open(ctx, storage.DBPath(dataDir)); err == nil {
		regs, _ = d.ListModels(ctx)
		d.Close()
	}
	if arg != "" {
		if st, err := os.Stat(arg); err == nil {
			abs, _ := filepath.Abs(arg)
			for _, m := range regs {
				if m.Path == abs && m.Name != "" {
					return server.Model{ID: m.Name, Path: abs, Created: m.AddedAt}, nil
				}
			}
			name := strings.TrimSuffix(filepath.Base(abs), filepath.Ext(abs))
			return server.Model{ID: name, Path: abs, Created: st.ModTime()}, nil
		}
		for _, m := range regs {
			if m.Name == arg {
				return server.Model{ID: m.Name, Path: m.Path, Created: m.AddedAt}, nil
			}
		}
		return server.Model{}, fmt.Errorf("--model %s: no such file or directory, and no model of that name is registered in %s%s", arg, dataDir, registered(regs))
	}
	p, err := defaultModelPath(ctx, dataDir, log)
	if err != nil {
		return server.Model{}, err
	}
	return servedModel(ctx, dataDir, p, log)
}

// registered lists the registered models' names for an error message.
func registered(ms []storage.Model) string {
	if len(ms) == 0 {
		return " (no model is registered there)"
	}
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.Name
	}
	return " (registered: " + strings.Join(names, ", ") + ")"
}
