package app

import (
	"runtime"
)

// System reports facts about the running program to the window.
type System struct{ c *core }

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
