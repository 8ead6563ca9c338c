package app

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"anechat/storage"
)

// WindowState is the window's size when it last closed; desktop.go opens
// the window with it. It is not a Preference: the Settings page never
// writes it back.
type WindowState struct {
	Width     int  `json:"width"`
	Height    int  `json:"height"`
	Maximised bool `json:"maximised"`
	// Theme is the colour scheme setting (Preferences.Theme), read with the
	// size so the window's background matches it before the page is drawn.
	// It is stored with the preferences, not here.
	Theme Theme `json:"-"`
}

// Window size limits: the smallest window the layout works in, and a bound
// that keeps a corrupt value from opening a window larger than any screen.
const (
	MinWindowWidth  = 720
	MinWindowHeight = 480
	maxWindowSide   = 16384
)

// DefaultWindow is the size of the first window.
var DefaultWindow = WindowState{Width: 1100, Height: 760, Theme: ThemeSystem}

// valid reports whether w is a size worth restoring.
func (w WindowState) valid() bool {
	return w.Width >= MinWindowWidth && w.Height >= MinWindowHeight && w.Width <= maxWindowSide && w.Height <= maxWindowSide
}

// LoadWindowState reads the window state stored in the database of data
// directory dataDir (resolved as Startup does: "" is $ANECHAT_HOME or the
// OS default) before the window opens, and the theme setting. Anything
// missing or out of range gives DefaultWindow (and ThemeSystem): the window
// opens either way.
func LoadWindowState(ctx context.Context, dataDir string) WindowState {
	w := DefaultWindow
	dir, err := storage.DataDir(dataDir, nil)
	if err != nil {
		return w
	}
	d, err := storage.Open(ctx, storage.DBPath(dir))
	if err != nil {
		return w
	}
	defer d.Close()
	var th Theme
	if found, err := d.GetSetting(ctx, keyTheme, &th); err == nil && found && (th == ThemeLight || th == ThemeDark) {
		w.Theme = th
	}
	var stored WindowState
	if found, err := d.GetSetting(ctx, keyWindow, &stored); err == nil && found && stored.valid() {
		stored.Theme = w.Theme
		return stored
	}
	return w
}

// ThemeScriptPath is the script frontend/index.html runs first, before the
// page's styles and code (see ThemeScript).
const ThemeScriptPath = "/theme.js"

// ThemeScript is a middleware for the window's asset server (desktop.go):
// it answers ThemeScriptPath with one line of JavaScript that puts the
// stored theme on the page's root element (html[data-theme], which
// style.css reads), so that the window is drawn in the chosen scheme from
// its first frame instead of in the system's until the settings arrive.
// Every other request goes to next.
func (a *App) ThemeScript(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != ThemeScriptPath {
			next.ServeHTTP(w, r)
			return
		}
		theme := ThemeSystem
		if p, err := a.Settings.Get(); err == nil {
			theme = p.Theme
		}
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		io.WriteString(w, themeScript(theme))
	})
}

// themeScript is ThemeScript's answer for theme.
func themeScript(theme Theme) string {
	if theme == ThemeLight || theme == ThemeDark {
		return fmt.Sprintf("document.documentElement.dataset.theme = %q;\n", theme)
	}
	return "delete document.documentElement.dataset.theme; // the system's scheme (prefers-color-scheme)\n"
}

// SaveWindowState stores the window's state for the next start (desktop.go
// calls it as the window closes). A size outside the limits is refused.
func (a *App) SaveWindowState(w WindowState) error {
	if !w.valid() {
		return fmt.Errorf("settings: window %dx%d: want at least %dx%d and at most %d a side",
			w.Width, w.Height, MinWindowWidth, MinWindowHeight, maxWindowSide)
	}
	d, err := a.core.db()
	if err != nil {
		return err
	}
	return d.SetSetting(a.core.context(), keyWindow, w)
}
