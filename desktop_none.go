//go:build !desktop && !dev && !bindings

package main

import (
	"fmt"
	"os"
)

// runDesktop explains that this binary has no window. Wails builds (make run,
// wails build, wails dev) set the desktop tag and get the real one from
// desktop.go; a plain `go build` gives a CLI-only binary so that it builds
// without the frontend or the platform's web view libraries.
func runDesktop() int {
	fmt.Fprintln(os.Stderr, "anechat: this binary was built without the desktop window (build it with `make run` or `wails build`).")
	fmt.Fprintln(os.Stderr, "Run `anechat help` for the command-line interface.")
	return 2
}
