package app

import (
	"runtime"

	"anechat/cli"
)

// System reports facts about the running program to the window.
type System struct{}

// SystemInfo is what the window's status bar shows.
type SystemInfo struct {
	Version string `json:"version"`
	OS      string `json:"os"`
	Arch    string `json:"arch"`
	Go      string `json:"go"`
}

// Info returns the version and the platform the binary runs on.
func (s *System) Info() SystemInfo {
	return SystemInfo{Version: cli.Version, OS: runtime.GOOS, Arch: runtime.GOARCH, Go: runtime.Version()}
}
