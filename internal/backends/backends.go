// Package backends lists the backends this binary is built with, as the
// engine/load Registry that the app and the CLI open models through. It is
// the one place that imports the backends: engine's generic packages never
// do (engine/imports_test.go keeps it so).
package backends

import (
	"fmt"

	"anechat/engine/cpu"
	"anechat/engine/load"
)

// Registry returns the registry of this build's backends, most preferred
// first. Today that is the CPU backend alone; the Core ML backend goes first
// on darwin/arm64 once it exists.
func Registry() *load.Registry {
	return load.NewRegistry(cpu.Loader{})
}

// CoreMLStatus says whether a build for goos/goarch runs Core ML bundles
// (Gemma 4 on the Apple Neural Engine) and, when not, why and what would.
func CoreMLStatus(goos, goarch string) string {
	if goos != "darwin" || goarch != "arm64" {
		return fmt.Sprintf("not built for this platform (%s/%s): Core ML and the Apple Neural Engine need a darwin/arm64 build on an Apple silicon Mac", goos, goarch)
	}
	return "not available yet: this darwin/arm64 build does not contain the Core ML backend"
}
