//go:build desktop || dev || bindings

package main

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"time"

	"github.com/wailsapp/wails/v2"
	"github.com/wailsapp/wails/v2/pkg/options"
	"github.com/wailsapp/wails/v2/pkg/options/assetserver"
	"github.com/wailsapp/wails/v2/pkg/runtime"

	"anechat/app"
	"anechat/cli"
	"anechat/storage"
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

	// The data directory is resolved once, before the web view starts: its
	// files go there too (keepWebViewData), and the window opens at the size
	// it last had. If it is unusable, Startup reports why in the window.
	dataDir, err := storage.DataDir("", log)
	if err != nil {
		dataDir = ""
	} else {
		keepWebViewData(dataDir, log)
	}
	win := app.LoadWindowState(context.Background(), dataDir)
	start := options.Normal
	if win.Maximised {
		start = options.Maximised
	}

	// The engine runs the models; the app owns storage, events and cancelling.
	gen := app.NewEngineGenerator(log)
	defer gen.Close()
	a := app.New(app.Options{Log: log, DataDir: dataDir, Version: cli.Version, Generator: gen, Dialogs: wailsDialogs{}})
	err = wails.Run(&options.App{
		Title:            "anechat",
		Width:            win.Width,
		Height:           win.Height,
		MinWidth:         app.MinWindowWidth,
		MinHeight:        app.MinWindowHeight,
		WindowStartState: start,
		// The stored theme from the first frame: the window's background,
		// then the page's (theme.js, answered by the app before the
		// page's styles load).
		BackgroundColour: windowBackground(win.Theme),
		AssetServer:      &assetserver.Options{Assets: assets, Middleware: a.ThemeScript},
		OnStartup: func(ctx context.Context) {
			a.Startup(ctx, wailsEmitter{ctx})
		},
		OnBeforeClose: func(ctx context.Context) bool {
			// The size to open at next time; a maximised window keeps the
			// size it had before.
			w := win
			if w.Maximised = runtime.WindowIsMaximised(ctx); !w.Maximised {
				w.Width, w.Height = runtime.WindowGetSize(ctx)
			}
			if err := a.SaveWindowState(w); err != nil {
				log.Warn("window size not remembered", "err", err)
			}
			return false // close
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

// keepWebViewData makes the web view keep its own files (WebKitGTK's
// hsts-storage.sqlite, mediakeys/, storage/, its caches) under the data
// directory in use instead of $XDG_DATA_HOME/anechat and $XDG_CACHE_HOME/
// anechat, which is the default data directory even when ANECHAT_HOME
// points elsewhere. WebKitGTK takes them from GLib's user data and cache
// directories, read from these variables when GTK starts, so they are set
// before wails.Run; the user's values are kept for the programs the app
// starts (app.OriginalEnvPrefix). macOS's WKWebView keeps its data apart
// per app already.
func keepWebViewData(dataDir string, log *slog.Logger) {
	if goruntime.GOOS != "linux" {
		return
	}
	for name, sub := range map[string]string{"XDG_DATA_HOME": "data", "XDG_CACHE_HOME": "cache"} {
		dir := filepath.Join(dataDir, "webview", sub)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			log.Warn("web view files stay in the default place", "dir", dir, "err", err)
			continue
		}
		os.Setenv(app.OriginalEnvPrefix+name, os.Getenv(name))
		os.Setenv(name, dir)
	}
}

// windowBackground is the window's colour before the page draws: the
// page's own background (style.css --bg) for a chosen scheme, nil (the
// web view's default) when it follows the system.
func windowBackground(theme app.Theme) *options.RGBA {
	switch theme {
	case app.ThemeDark:
		return &options.RGBA{R: 0x17, G: 0x19, B: 0x1d, A: 255}
	case app.ThemeLight:
		return &options.RGBA{R: 0xf6, G: 0xf7, B: 0xf9, A: 255}
	}
	return nil
}

// wailsDialogs are the window's native dialogs.
type wailsDialogs struct{}

func (wailsDialogs) ChooseFolder(ctx context.Context, title string) (string, error) {
	return runtime.OpenDirectoryDialog(ctx, runtime.OpenDialogOptions{Title: title, CanCreateDirectories: false})
}

func (wailsDialogs) SaveFile(ctx context.Context, title, name string) (string, error) {
	return runtime.SaveFileDialog(ctx, runtime.SaveDialogOptions{Title: title, DefaultFilename: name, CanCreateDirectories: true})
}

// wailsEmitter sends app events to the window through the Wails runtime.
type wailsEmitter struct{ ctx context.Context }

func (e wailsEmitter) Emit(name string, data any) { runtime.EventsEmit(e.ctx, name, data) }
