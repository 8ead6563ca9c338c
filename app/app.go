// Package app holds the services bound to the desktop window: chat, library,
// settings, models and system. Each exported method of a service is callable
// from the frontend; long work reports back through events. The services work
// on storage and, through small interfaces, on the engine; they know nothing
// of Wails, so that plain Go tests drive them.
package app

import (
	"context"
	"log/slog"
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
}

// App owns the services and what they share.
type App struct {
	log    *slog.Logger
	System *System
}

// New builds the services. They become usable after Startup.
func New(opts Options) *App {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &App{log: log, System: &System{}}
}

// Startup is called once the window exists; ctx lives as long as the window.
func (a *App) Startup(ctx context.Context, emit Emitter) {}

// Shutdown releases what Startup opened.
func (a *App) Shutdown() {}

// Services lists the values whose methods are bound to the window.
func (a *App) Services() []any {
	return []any{a.System}
}
