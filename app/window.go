package app

import (
	"context"
	"fmt"

	"anechat/storage"
)

// WindowState is the window's size when it last closed; desktop.go opens
// the window with it. It is not a Preference: the Settings page never
// writes it back.
type WindowState struct {
	Width     int  `json:"width"`
	Height    int  `json:"height"`
	Maximised bool `json:"maximised"`
}

// Window size limits: the smallest window the layout works in, and a bound
// that keeps a corrupt value from opening a window larger than any screen.
const (
	MinWindowWidth  = 720
	MinWindowHeight = 480
	maxWindowSide   = 16384
)

// DefaultWindow is the size of the first window.
var DefaultWindow = WindowState{Width: 1100, Height: 760}

// valid reports whether w is a size worth restoring.
func (w WindowState) valid() bool {
	return w.Width >= MinWindowWidth && w.Height >= MinWindowHeight && w.Width <= maxWindowSide && w.Height <= maxWindowSide
}

// LoadWindowState reads the window state stored in the database of data
// directory dataDir (resolved as Startup does: "" is $ANECHAT_HOME or the
// OS default) before the window opens. Anything missing or out of range
// gives DefaultWindow: the window opens either way.
func LoadWindowState(ctx context.Context, dataDir string) WindowState {
	dir, err := storage.DataDir(dataDir, nil)
	if err != nil {
		return DefaultWindow
	}
	d, err := storage.Open(ctx, storage.DBPath(dir))
	if err != nil {
		return DefaultWindow
	}
	defer d.Close()
	var w WindowState
	if found, err := d.GetSetting(ctx, keyWindow, &w); err != nil || !found || !w.valid() {
		return DefaultWindow
	}
	return w
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
