//go:build desktop || dev || bindings

package main

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/wailsapp/wails/v2"
	"github.com/wailsapp/wails/v2/pkg/options"
	"github.com/wailsapp/wails/v2/pkg/options/assetserver"
	"github.com/wailsapp/wails/v2/pkg/runtime"

	"anechat/app"
	"anechat/cli"
)

// The built frontend. `wails build` and `make run` build frontend/dist before
// compiling; a plain `go build` never sees this file (it needs the desktop, dev
// or bindings tag that Wails sets), so the CLI builds without the frontend.
//
//go:embed all:frontend/dist
var frontendDist embed.FS

// quitAfterEnv names the environment variable that makes the window close by
// itself that long after the page has loaded (a Go duration such as "8s"). The
// smoke test uses it to open the real window, take a screenshot and exit.
const quitAfterEnv = "ANECHAT_QUIT_AFTER"

// runDesktop opens the window with the app services bound to it and returns
// the process exit code once it closes.
func runDesktop() int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	assets, err := fs.Sub(frontendDist, "frontend/dist")
	if err != nil {
		fmt.Fprintf(os.Stderr, "anechat: the embedded frontend is missing: %v (build with `make run`)\n", err)
		return 1
	}
	var quitAfter time.Duration
	if v := os.Getenv(quitAfterEnv); v != "" {
		quitAfter, err = time.ParseDuration(v)
		if err != nil || quitAfter <= 0 {
			fmt.Fprintf(os.Stderr, "anechat: %s=%q is not a positive duration such as 8s\n", quitAfterEnv, v)
			return 2
		}
	}

	// The engine runs the models; the app owns storage, events and cancelling.
	gen := app.NewEngineGenerator(log)
	defer gen.Close()
	a := app.New(app.Options{Log: log, Version: cli.Version, Generator: gen})
	err = wails.Run(&options.App{
		Title:       "anechat",
		Width:       1100,
		Height:      760,
		MinWidth:    720,
		MinHeight:   480,
		AssetServer: &assetserver.Options{Assets: assets},
		OnStartup: func(ctx context.Context) {
			a.Startup(ctx, wailsEmitter{ctx})
		},
		OnDomReady: func(ctx context.Context) {
			log.Info("window ready")
			if quitAfter > 0 {
				time.AfterFunc(quitAfter, func() {
					log.Info("quitting", "env", quitAfterEnv, "after", quitAfter)
					runtime.Quit(ctx)
				})
			}
		},
		OnShutdown: func(context.Context) { a.Shutdown() },
		Bind:       a.Services(),
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "anechat: %v\n", err)
		return 1
	}
	return 0
}

// wailsEmitter sends app events to the window through the Wails runtime.
type wailsEmitter struct{ ctx context.Context }

func (e wailsEmitter) Emit(name string, data any) { runtime.EventsEmit(e.ctx, name, data) }
